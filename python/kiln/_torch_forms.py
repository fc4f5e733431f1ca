"""PyTorch's argument forms for the functions whose op-table form differs.

kiln._ops has one function per op with the op's own form: tensor inputs
first, then attributes in declared order. Where PyTorch spells a call
differently, the function under kiln.<name> (and the Tensor method) takes
PyTorch's form and calls the op:

    kiln.max(x)              full reduction (amax), a 0-d tensor
    kiln.max(x, 1)           (values, indices), also as .values / .indices
    kiln.max(x, y)           elementwise (maximum); the same for min
    kiln.split(x, [1, 2], 1) sizes or a split size
    kiln.index_select(x, dim, index), gather(x, dim, index),
    scatter_add(x, dim, index, src), index_add(x, dim, index, source, alpha=1)
    kiln.var(x, dim, unbiased, keepdim) or correction=; the same for std
    kiln.flatten(x, start_dim, end_dim), kiln.t(x)
    kiln.isclose / allclose / equal, composed of ops
    kiln.randint(high, size) or (low, high, size), dtype= (the factory)
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

from kiln import _C, _ops
from kiln._C import Tensor
from kiln._factories import randint

__all__ = ["max", "min", "split", "index_select", "gather", "scatter_add", "index_add", "var",
           "std", "flatten", "t", "isclose", "allclose", "equal", "randint"]

flatten = _C.flatten
t = _C.t


def _extreme(name: str, full: Callable[..., Any], elementwise: Callable[..., Any],
             along_dim: Callable[..., Any]) -> Callable[..., Any]:
    # torch.return_types.max / min: a tuple whose parts also have names.
    result = namedtuple(name, ["values", "indices"])  # type: ignore[misc]  # name: max or min

    def fn(input: Tensor, dim: int | Tensor | None = None, keepdim: bool = False, *,
           other: Tensor | None = None) -> Any:
        if other is not None or isinstance(dim, _C.Tensor):
            if keepdim or (other is not None and dim is not None):
                raise TypeError(f"{name}(input, other) takes no dim or keepdim")
            return elementwise(input, dim if other is None else other)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim needs a dim")
            return full(input)
        return result(*along_dim(input, dim, keepdim))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name}(input): over every element; {name}(input, dim, keepdim=False): "
                  f"(values, indices) along dim; {name}(input, other): elementwise.")
    return fn


max = _extreme("max", _ops.amax, _ops.maximum, _ops.max)  # noqa: A001
min = _extreme("min", _ops.amin, _ops.minimum, _ops.min)  # noqa: A001


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int],
          dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of split_size along dim (the last may be smaller), or of the
    given sizes."""
    if isinstance(split_size_or_sections, int):
        return _ops.split(tensor, split_size=split_size_or_sections, dim=dim)
    return _ops.split(tensor, sizes=list(split_size_or_sections), dim=dim)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    return _ops.index_select(input, index, dim)


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    return _ops.gather(input, index, dim)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return _ops.scatter_add(input, index, src, dim)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
              alpha: float = 1) -> Tensor:
    return _ops.index_add(input, index, source if alpha == 1 else source * alpha, dim)


def _variance(name: str, op: Callable[..., Any]) -> Callable[..., Tensor]:
    def fn(input: Tensor, dim: int | Sequence[int] | bool | None = None,
           unbiased: bool | None = None, keepdim: bool = False, *,
           correction: float | None = None) -> Tensor:
        if isinstance(dim, bool):  # torch.var(x, False): the unbiased flag
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise TypeError(f"{name}(): give either unbiased or correction, not both")
        if correction is None:
            correction = 0 if unbiased is not None and not unbiased else 1
        dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
        return op(input, dims, int(correction), keepdim)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name}(input, dim=None, unbiased=True, keepdim=False, *, correction=None)"
                  ": as torch; unbiased=False is correction=0.")
    return fn


var = _variance("var", _ops.var)
std = _variance("std", _ops.std)


def _both(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise `a and b` of two bool tensors."""
    return _ops.where(a, b, a)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|input - other| <= atol + rtol * |other|, elementwise; equal values
    (infinities included) are close; NaNs only with equal_nan."""
    within = _ops.le(_ops.abs(input - other), atol + rtol * _ops.abs(other))
    same = _ops.eq(input, other)
    close = _ops.where(same, same, within)
    if equal_nan:
        both_nan = _both(_ops.ne(input, input), _ops.ne(other, other))
        close = _ops.where(both_nan, both_nan, close)
    return close


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (see isclose)."""
    return _ops.sum(_ops.logical_not(isclose(input, other, rtol, atol, equal_nan))).item() == 0


def equal(input: Tensor, other: Tensor) -> bool:
    """Same shape and the same elements."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return _ops.sum(_ops.ne(input, other)).item() == 0


# add / sub with alpha, the functions whose output shape depends on the data
# (kiln._C's, over ops/data_dependent.h: they refuse to be traced), the
# repeats, and clamp with one bound.
__all__ += ["add", "sub", "nonzero", "argwhere", "unique", "bincount", "repeat_interleave",
            "tile", "clamp_min", "clamp_max"]

_add, _sub = _ops.add, _ops.sub


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input + alpha * other; alpha must be an integer for integral tensors."""
    if type(alpha) is int and alpha == 1:
        return _add(input, other)
    return _C.add_alpha(input, other, alpha)


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input - alpha * other; alpha must be an integer for integral tensors."""
    if type(alpha) is int and alpha == 1:
        return _sub(input, other)
    return _C.sub_alpha(input, other, alpha)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """The indices of the nonzero elements: an [n, ndim] int64 tensor, or
    with as_tuple=True one 1-D index tensor per dim."""
    if as_tuple:
        return tuple(_C.nonzero_tuple(input))
    return _C.nonzero(input)


argwhere = _C.argwhere


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values (or slices along dim), ascending; with
    return_inverse / return_counts also where each element went and how
    often each value occurs, as torch.unique returns them."""
    values, inverse, counts = _C.unique(input, sorted, return_inverse, return_counts, dim)
    if not return_inverse and not return_counts:
        return values
    extra = ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
    return (values, *extra)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Occurrences (or summed weights) of each value of a 1-D non-negative
    integer tensor."""
    return _C.bincount(input, weights, minlength)


def repeat_interleave(input: Tensor, repeats: int | Tensor | None = None, dim: int | None = None,
                      *, output_size: int | None = None) -> Tensor:
    """Each element (or slice along dim) repeated; repeat_interleave(repeats)
    alone gives the indices 0, 1, ... each repeated repeats[i] times."""
    if repeats is None:
        return _C.repeat_interleave_indices(input, output_size)
    return _C.repeat_interleave(input, repeats, dim, output_size)


def tile(input: Tensor, dims: int | Sequence[int]) -> Tensor:
    """input repeated dims[i] times along dim i (dims padded with leading 1s)."""
    return _C.tile(input, [dims] if isinstance(dims, int) else list(dims))


def clamp_min(input: Tensor, min: float) -> Tensor:  # noqa: A002
    return _ops.clamp(input, min=min)


def clamp_max(input: Tensor, max: float) -> Tensor:  # noqa: A002
    return _ops.clamp(input, max=max)
