"""Tensor.__getitem__ / __setitem__: a Python index (ints, slices, None,
Ellipsis, one index tensor or boolean mask) turned into kiln's view ops.

Basic indices (ints, slices, None, ...) compose select/slice/unsqueeze, so a
read is a view of the tensor and a write goes through that view with copy_ or
fill_ (an in-place write: the version counter moves). One advanced index (an
integer tensor or list, or a boolean mask) reads with index_select, a copy, as
in PyTorch; a mask's positions come from the nonzero op (the result's
shape depends on the data). Several advanced indices in one subscript
(x[rows, cols]) broadcast together as in NumPy and PyTorch: the indexed dims
are moved to the front, merged into one and read with one index_select of
the flattened positions (see _several)."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from kiln import _C
from kiln._C import Tensor

# An item of an index: an int, slice, None, Ellipsis, bool, a list or array
# of ints, or a tensor (integer or boolean); a subscript is one or a tuple.
Index = Any

# How a trace reports a mask read on the host, among several advanced
# indices (x[mask, idx]): the positions are frozen into the graph. A mask
# alone goes through the nonzero op, which a trace records.
_MASK_READ = "boolean-mask indexing x[mask] (its result's size depends on the data)"
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
              "Variables are valid indices (got {})")


def _as_advanced(item: Index) -> Tensor | None:
    """An index tensor for an advanced index, or None for a basic one."""
    if isinstance(item, _C.Tensor):
        if item.ndim == 0 and item.dtype != _C.dtype.bool:
            return None  # a 0-d integer tensor indexes like an int
        return item
    if isinstance(item, (list, np.ndarray)):
        from kiln._factories import tensor
        return tensor(item)
    return None


def _is_scalar_index(item: Index) -> bool:
    return (isinstance(item, _C.Tensor) and item.ndim == 0
            and item.dtype in (_C.dtype.int64, _C.dtype.int32))


def _select_at(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """x[..., i] for a 0-d integer tensor i, as ops on i rather than its
    value read into Python: a traced loop index (fori_loop's i) stays
    live in the graph. Negative i counts from the end, as an int would."""
    size = x.shape[dim]
    i = _C.dispatch("cast", [index], {"dtype": _C.dtype.int64})
    i = _C.dispatch("where", [_C.dispatch("lt", [i, 0]), _C.dispatch("add", [i, size]), i])
    picked = _C.dispatch("index_select", [x, _C.dispatch("reshape", [i], {"shape": [1]})],
                         {"dim": dim})
    return _C.dispatch("squeeze", [picked], {"dims": [dim]})


def _bound(value: Any) -> Any:
    """A slice bound: an int, or a SymInt a trace with dynamic shapes keeps
    symbolic (x[:, : x.shape[1] // 2])."""
    return value if isinstance(value, _C.SymInt) else operator.index(value)


def _dims_used(item: Index) -> int:
    """How many dims of the indexed tensor an index item consumes."""
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    adv = _as_advanced(item)
    if adv is not None and adv.dtype == _C.dtype.bool:
        return adv.ndim
    return 1


def _walk(x: Tensor, index: Index, reading: bool = False
          ) -> tuple[Tensor, tuple[int, Tensor] | _Several | None]:
    """Applies the basic part of `index`; returns the view and, for the one
    advanced index if any, (dim in the view, index tensor). `reading`: a
    0-d integer tensor selects through ops (a copy), not a view, so that
    its value is never read into Python."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(item is Ellipsis for item in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_dims_used(item) for item in index)
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    ellipsis_dims = x.ndim - used
    dim = 0
    advanced: list[tuple[int, Tensor]] = []
    for item in index:
        if item is None:
            x = _C.dispatch("unsqueeze", [x], {"dim": dim})
            dim += 1
        elif item is Ellipsis:
            dim += ellipsis_dims
        elif isinstance(item, bool):  # x[True] adds a dim, as x[None]
            x = _C.dispatch("unsqueeze", [x], {"dim": dim})
            if not item:
                x = _C.dispatch("slice", [x], {"dim": dim, "start": 0, "end": 0, "step": 1})
            dim += 1
        elif isinstance(item, slice):
            step = 1 if item.step is None else operator.index(item.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            attrs: dict[str, Any] = {"dim": dim, "step": step}
            if item.start is not None:
                attrs["start"] = _bound(item.start)
            if item.stop is not None:
                attrs["end"] = _bound(item.stop)
            x = _C.dispatch("slice", [x], attrs)
            dim += 1
        elif reading and _is_scalar_index(item):
            x = _select_at(x, dim, item)
        elif (adv := _as_advanced(item)) is not None:
            advanced.append((dim, adv))
            dim += _dims_used(item)
        else:
            try:
                i = operator.index(item)
            except TypeError:
                raise IndexError(_BAD_INDEX.format(type(item).__name__)) from None
            x = _C.dispatch("select", [x], {"dim": dim, "index": i})
    if not advanced:
        return x, None
    if len(advanced) == 1:
        return x, advanced[0]
    return x, _Several(x, advanced)


class _Several:
    """Several advanced indices of one subscript as integer positions: each
    boolean mask becomes one index per dim it covers (its nonzero positions),
    all are bounds-checked, made non-negative and broadcast to one shape."""

    def __init__(self, x: Tensor, advanced: list[tuple[int, Tensor]]) -> None:
        dims: list[int] = []
        arrays: list[np.ndarray] = []
        for dim, index in advanced:
            if index.dtype == _C.dtype.bool:
                _check_mask_shape(x, dim, index)
                mask = index.detach()._numpy_as(_MASK_READ)
                for k, positions in enumerate(np.nonzero(mask)):
                    dims.append(dim + k)
                    arrays.append(positions.astype(np.int64))
                continue
            if index.dtype not in (_C.dtype.int64, _C.dtype.int32):
                raise IndexError("tensors used as indices must be long, int or bool tensors")
            dims.append(dim)
            arrays.append(_checked_positions(index.numpy().astype(np.int64), x.shape[dim], dim))
        try:
            arrays = list(np.broadcast_arrays(*arrays))
        except ValueError:
            shapes = ", ".join(str(list(a.shape)) for a in arrays)
            raise IndexError(f"shape mismatch: indexing tensors could not be broadcast "
                             f"together with shapes {shapes}") from None
        self.dims, self.arrays = dims, arrays
        self.shape = list(arrays[0].shape)
        self.rest = [d for d in range(x.ndim) if d not in dims]
        # PyTorch keeps the broadcast dims where the indexed dims were when
        # those are adjacent, else puts them first.
        adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
        self.at = dims[0] if adjacent else 0

    def flat_positions(self, x: Tensor) -> Tensor:
        sizes = [x.shape[d] for d in self.dims]
        flat = np.ravel_multi_index(tuple(a.reshape(-1) for a in self.arrays), sizes)
        return _C.from_numpy(np.ascontiguousarray(flat, dtype=np.int64))

    def merged(self, x: Tensor) -> tuple[Tensor, list[int]]:
        """x with the indexed dims first, merged into one: [N, *rest]."""
        moved = _C.dispatch("permute", [x], {"dims": self.dims + self.rest})
        rest_shape = [x.shape[d] for d in self.rest]
        return _C.dispatch("reshape", [moved], {"shape": [-1] + rest_shape}), rest_shape

    def place(self, t: Tensor, rest_shape: list[int]) -> Tensor:
        """[*shape, *rest] -> the result layout (broadcast dims at self.at)."""
        if self.at == 0:
            return t
        nb = len(self.shape)
        order = (list(range(nb, nb + self.at)) + list(range(nb)) +
                 list(range(nb + self.at, nb + len(rest_shape))))
        return _C.dispatch("permute", [t], {"dims": order})

    def unplace(self, t: Tensor, rest_shape: list[int]) -> Tensor:
        """The inverse of place: the result layout -> [*shape, *rest]."""
        if self.at == 0:
            return t
        nb = len(self.shape)
        order = (list(range(self.at, self.at + nb)) + list(range(self.at)) +
                 list(range(self.at + nb, nb + len(rest_shape))))
        return _C.dispatch("permute", [t], {"dims": order})

    def read(self, x: Tensor) -> Tensor:
        source, rest_shape = self.merged(x)
        out = _C.dispatch("index_select", [source, self.flat_positions(x)], {"dim": 0})
        out = _C.dispatch("reshape", [out], {"shape": self.shape + rest_shape})
        return self.place(out, rest_shape)

    def write(self, x: Tensor, value: Tensor | float) -> None:
        rest_shape = [x.shape[d] for d in self.rest]
        if isinstance(value, _C.Tensor):
            result_shape = list(self.read(x).shape)
            value = _C.dispatch("expand", [value], {"size": result_shape})
            value = _C.dispatch("reshape", [self.unplace(value, rest_shape)],
                                {"shape": [-1] + rest_shape})
        # One write per position, through a view of x (selects from the last
        # indexed dim down, so the earlier dims keep their numbers).
        for j, position in enumerate(zip(*(a.reshape(-1).tolist() for a in self.arrays))):
            target = x
            for d, i in sorted(zip(self.dims, position), reverse=True):
                target = _C.dispatch("select", [target], {"dim": d, "index": i})
            part = (_C.dispatch("select", [value], {"dim": 0, "index": j})
                    if isinstance(value, _C.Tensor) else value)
            _write(target, part)


def _check_mask_shape(x: Tensor, dim: int, mask: Tensor) -> None:
    shape = tuple(x.shape[dim:dim + mask.ndim])
    if tuple(mask.shape) != shape:
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {dim} does not "
                         f"match the shape of the indexed tensor {list(shape)} at index {dim}")


def _checked_positions(positions: np.ndarray, size: int, dim: int) -> np.ndarray:
    bad = positions[(positions < -size) | (positions >= size)]
    if bad.size:
        raise IndexError(f"index {bad.reshape(-1)[0]} is out of bounds for dimension {dim} "
                         f"with size {size}")
    return np.where(positions < 0, positions + size, positions)  # negatives count from the end


def _mask_positions(x: Tensor, dim: int, mask: Tensor) -> tuple[Tensor, Tensor]:
    """x with the mask's dims merged into one, and the flat positions of the
    mask's True elements: through the nonzero op, so a trace records the
    count as a size the data decides rather than freezing the positions."""
    _check_mask_shape(x, dim, mask)
    flat_mask = _C.dispatch("reshape", [mask.detach()], {"shape": [-1]})
    positions = _C.dispatch("nonzero", [flat_mask], {})  # [n, 1]
    positions = _C.dispatch("reshape", [positions], {"shape": [-1]})
    merged = list(x.shape[:dim]) + [-1] + list(x.shape[dim + mask.ndim:])
    return _C.dispatch("reshape", [x], {"shape": merged}), positions


def _index_tensor(x: Tensor, dim: int, index: Tensor) -> tuple[Tensor, Tensor]:
    if index.dtype == _C.dtype.bool:
        return _mask_positions(x, dim, index)
    if index.dtype not in (_C.dtype.int64, _C.dtype.int32):
        raise IndexError("tensors used as indices must be long, int or bool tensors")
    flat = index.numpy().reshape(-1).astype(np.int64)
    return x, _C.from_numpy(np.ascontiguousarray(_checked_positions(flat, x.shape[dim], dim)))


def getitem(self: Tensor, index: Index) -> Tensor:
    x, advanced = _walk(self, index, reading=True)
    if advanced is None:
        return x
    if isinstance(advanced, _Several):
        return advanced.read(x)
    dim, index = advanced
    source, flat = _index_tensor(x, dim, index)
    out = _C.dispatch("index_select", [source, flat], {"dim": dim})
    if index.dtype != _C.dtype.bool and index.ndim != 1:
        shape = list(x.shape[:dim]) + list(index.shape) + list(x.shape[dim + 1:])
        out = _C.dispatch("reshape", [out], {"shape": shape})
    return out


def _write(view: Tensor, value: Tensor | float) -> None:
    if isinstance(value, _C.Tensor):
        view.copy_(value)
    else:
        view.fill_(value)


def _check_autograd(self: Tensor, target: Tensor, value: Tensor | float) -> None:
    # Autograd doesn't yet follow a write through a view back to its base
    # (PyTorch rebases the base's history); refuse rather than give wrong
    # gradients. Writing into the whole tensor, or under no_grad, is fine.
    if target is self or not _C.is_grad_enabled():
        return
    if self.requires_grad or (isinstance(value, _C.Tensor) and value.requires_grad):
        raise RuntimeError("kiln: assignment into part of a tensor that takes part in autograd "
                           "is not supported yet (use kiln.where, or do it under "
                           "kiln.no_grad())")


def setitem(self: Tensor, index: Index, value: Tensor | float) -> None:
    x, advanced = _walk(self, index)
    _check_autograd(self, x, value)
    if advanced is None:
        _write(x, value)
        return
    if isinstance(advanced, _Several):
        advanced.write(x, value)
        return
    dim, index = advanced
    _, flat = _index_tensor(x, dim, index)
    if index.dtype == _C.dtype.bool and not (isinstance(value, _C.Tensor) and value.numel() != 1):
        # x[mask] = v (a number or one element): one where, written back in place.
        tail = [1] * (x.ndim - dim - index.ndim)
        mask = _C.dispatch("reshape", [index], {"shape": list(index.shape) + tail})
        x.copy_(_C.dispatch("where", [mask, value, x]))
        return
    # One write per selected position (a tuple of indices into dims dim.. of
    # x), each through a view of x.
    if index.dtype == _C.dtype.bool:
        positions = [tuple(p) for p in np.argwhere(index.numpy()).tolist()]
    else:
        positions = [(i,) for i in flat.tolist()]
    k = index.ndim if index.dtype == _C.dtype.bool else 1
    picked = list(x.shape[:dim]) + [len(positions)] + list(x.shape[dim + k:])
    if isinstance(value, _C.Tensor):
        value = _C.dispatch("expand", [value], {"size": picked})
    for j, position in enumerate(positions):
        target = x
        for i in position:
            target = _C.dispatch("select", [target], {"dim": dim, "index": i})
        part = (_C.dispatch("select", [value], {"dim": dim, "index": j})
                if isinstance(value, _C.Tensor) else value)
        _write(target, part)
