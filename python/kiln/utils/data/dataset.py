"""Map-style datasets."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn, Protocol, cast

from kiln import _C, _ops
from kiln._C import Tensor


class Dataset:
    """A map-style dataset: subclasses define __getitem__(i) and __len__."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> NoReturn:
        raise NotImplementedError("kiln.utils.data: ConcatDataset is not supported yet")


class SizedDataset(Protocol):
    """What DataLoader, Subset and random_split read: dataset[i] and
    len(dataset) (a Dataset subclass, a TensorDataset, or even a list)."""

    def __getitem__(self, index: int, /) -> Any: ...

    def __len__(self) -> int: ...


class Sampler(Protocol):
    """A DataLoader's sampler: the indices of an epoch, in order, and how many."""

    def __iter__(self) -> Iterator[int]: ...

    def __len__(self) -> int: ...


def _row(t: Tensor, index: int) -> Tensor:
    if index < 0:
        index += t.shape[0]
    if not 0 <= index < t.shape[0]:
        raise IndexError(f"index {index} is out of bounds for dimension 0 with size "
                         f"{t.shape[0]}")
    return _ops.select(t, 0, index)


class TensorDataset(Dataset):
    """Row i of each tensor, as a tuple; the tensors share their first size."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"TensorDataset: expected kiln Tensors, got {type(t).__name__}")
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors: first sizes are "
                             f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(_row(t, int(index)) for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset: SizedDataset, indices: Iterable[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: SizedDataset, lengths: Sequence[int] | Sequence[float],
                 generator: Any = None) -> list[Subset]:
    """Splits into non-overlapping Subsets of the given lengths (or fractions)."""
    from kiln.utils.data.dataloader import _permutation
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(n * f) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _permutation(n, generator)
    out, start = [], 0
    for length in cast(Sequence[int], lengths):
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out
