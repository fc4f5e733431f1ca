"""Batches of sequences of different lengths, as torch.nn.utils.rnn:
pad_sequence, PackedSequence, pack_padded_sequence, pad_packed_sequence,
pack_sequence, unpack_sequence and unpad_sequence. kiln.nn.RNN, LSTM and GRU
take a PackedSequence and return one.

A PackedSequence holds the sequences sorted by decreasing length, step by
step: data [N, *] is step 0 of every sequence, then step 1 of those that
have one, and so on; batch_sizes[t] counts the sequences at step t.
sorted_indices maps the sorted order to the caller's batch (None when the
input was sorted), unsorted_indices back. The math is kiln's C++
(kiln/nn/rnn_packed.h): index_select and cat, so gradients flow through.

    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    output, (h_n, c_n) = lstm(packed)
    padded, lengths = pad_packed_sequence(output, batch_first=True)
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from kiln import _C
from kiln._C import Tensor
from kiln._factories import tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """data, batch_sizes, sorted_indices, unsorted_indices (see the module's
    docstring). Made by pack_padded_sequence and pack_sequence rather than
    by hand; PackedSequence(data, batch_sizes, sorted_indices) fills in
    unsorted_indices."""

    def __new__(cls, data: Any, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PyTorch's PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """data.to(*args, **kwargs), the indices following data's device;
        self when data is unchanged."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        sorted_indices, unsorted_indices = (
            None if t is None else t.to(data.device)
            for t in (self.sorted_indices, self.unsorted_indices))
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=_C.dtype.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=_C.dtype.float32)

    def long(self) -> PackedSequence:
        return self.to(dtype=_C.dtype.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=_C.dtype.int32)

    @property
    def is_cuda(self) -> bool:
        return bool(self.data.is_cuda)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D permutation of indices (None for None)."""
    return _C.nn.invert_permutation(permutation)


def _lengths_tensor(lengths: Tensor | Iterable[int]) -> Tensor:
    if isinstance(lengths, Tensor):
        return lengths
    return tensor(list(lengths), dtype=_C.dtype.int64)


def pad_sequence(sequences: Tensor | Iterable[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Sequences [L_i, *] padded with padding_value (on padding_side,
    "right" or "left") to the longest one and stacked: [T, B, *], or
    [B, T, *] when batch_first."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of "
                           f"type: {type(sequences)}")
    return _C.nn.pad_sequence(list(sequences), batch_first, float(padding_value), padding_side)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor,
                   batch_first: bool = False) -> list[Tensor]:
    """The first lengths[b] steps of each sequence b of a padded batch."""
    return _C.nn.unpad_sequence(padded_sequences, _lengths_tensor(lengths), batch_first)


def pack_padded_sequence(input: Tensor, lengths: Tensor | Iterable[int], batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Packs a padded batch, input [T, B, *] ([B, T, *] when batch_first)
    whose sequence b fills its first lengths[b] steps. With enforce_sorted
    the lengths must be in decreasing order; otherwise the batch is sorted
    (stably) and the PackedSequence remembers how."""
    data, batch_sizes, sorted_indices, unsorted_indices = _C.nn.pack_padded_sequence(
        input, _lengths_tensor(lengths), batch_first, enforce_sorted)
    return PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of pack_padded_sequence: (padded [T, B, *] or [B, T, *],
    lengths int64 [B]) in the caller's batch order. T is the longest
    sequence, or total_length (ValueError if shorter)."""
    return _C.nn.pad_packed_sequence(sequence.data, sequence.batch_sizes, sequence.sorted_indices,
                                     sequence.unsorted_indices, batch_first,
                                     float(padding_value), total_length)


def pack_sequence(sequences: Iterable[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """pad_sequence, then pack_padded_sequence with each sequence's length."""
    data, batch_sizes, sorted_indices, unsorted_indices = _C.nn.pack_sequence(
        list(sequences), enforce_sorted)
    return PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences of a PackedSequence, in the caller's order."""
    p = packed_sequences
    return _C.nn.unpack_sequence(p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices)
