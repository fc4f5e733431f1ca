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

import builtins
import functools
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln import _C, _grad_mode, _math_forms, _ops
from kiln._C import Tensor
from kiln._factories import randint
from kiln._math_forms import *  # noqa: F403

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


# Truth reductions, einsum with PyTorch's operand forms, and small functions
# PyTorch programs call by these names.
__all__ += ["all", "any", "einsum", "bmm", "outer", "numel", "is_tensor", "is_floating_point",
            "logsumexp", "square", "unbind", "broadcast_to"]


def _truth_reduction(name: str, count: Callable[..., Tensor],
                     verdict: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def fn(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
        return verdict(_ops.sum(count(input, 0), dims, keepdim), 0)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name}(input, dim=None, keepdim=False): a bool tensor, whether "
                  f"{name} element is nonzero (over every element, or along dim).")
    return fn


# all: no element is zero; any: some element is nonzero. Counting keeps them
# ops of the table, so they trace and export.
all = _truth_reduction("all", _ops.eq, _ops.eq)  # noqa: A001
any = _truth_reduction("any", _ops.ne, _ops.gt)  # noqa: A001

# Functions of torch that are not Tensor methods there either.
NOT_METHODS = {"einsum", "is_tensor", "inference_mode", "get_default_dtype", "finfo", "iinfo",
               "meshgrid"}


def einsum(equation: str, *operands: Any) -> Tensor:
    """einsum("ij,jk->ik", a, b), or with the operands as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C.einsum(equation, list(operands))


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors [b, n, m] @ [b, m, p]."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: both arguments must be 3-D, got {input.ndim}-D and "
                           f"{mat2.ndim}-D")
    return _ops.matmul(input, mat2)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors: [n] x [m] -> [n, m]."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: both arguments must be 1-D, got {input.ndim}-D and "
                           f"{vec2.ndim}-D")
    return _ops.unsqueeze(input, 1) * _ops.unsqueeze(vec2, 0)


def numel(input: Tensor) -> int:
    return int(input.numel())


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, _C.Tensor)


def is_floating_point(input: Tensor) -> bool:
    return input.dtype in (_C.dtype.float32, _C.dtype.float64)


def logsumexp(input: Tensor, dim: int | Sequence[int], keepdim: bool = False) -> Tensor:
    """log(sum(exp(input))) along dim, computed stably: the max is taken out
    first (0 where it is infinite, so an all -inf row gives -inf, not NaN)."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    peak = _ops.amax(input.detach(), dims, True)
    peak = _ops.where(_ops.isinf(peak), 0.0, peak)
    out = _ops.log(_ops.sum(_ops.exp(input - peak), dims, True)) + peak
    if keepdim:
        return out
    for d in sorted((d % input.ndim for d in dims), reverse=True):
        out = _ops.squeeze(out, d)
    return out


def square(input: Tensor) -> Tensor:
    return input * input


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along dim, that dim removed."""
    return tuple(_ops.select(input, dim, i) for i in range(input.shape[dim]))


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    return _ops.expand(input, list(size))


# Aliases and compositions PyTorch training code uses, each exactly the
# torch function (no approximation of one op by others).
__all__ += ["clip", "mm", "mv", "dot", "logical_and", "logical_or", "logical_xor", "swapaxes",
            "swapdims", "movedim", "moveaxis", "ravel", "unflatten", "count_nonzero",
            "inference_mode", "get_default_dtype"]

clip = _ops.clamp


def _check_dims(name: str, *pairs: tuple[Tensor, int]) -> None:
    if builtins.any(t.ndim != n for t, n in pairs):  # this module's any is torch's
        wanted = " and ".join(f"{n}-D" for _, n in pairs)
        got = " and ".join(f"{t.ndim}-D" for t, _ in pairs)
        raise RuntimeError(f"{name}: expected {wanted} arguments, got {got}")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    _check_dims("mm", (input, 2), (mat2, 2))
    return _ops.matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    _check_dims("mv", (input, 2), (vec, 1))
    return _ops.matmul(input, vec)


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    _check_dims("dot", (input, 1), (tensor, 1))
    return _ops.matmul(input, tensor)


def _logical(name: str, combine: Callable[[Tensor, Tensor], Tensor]) -> Callable[..., Tensor]:
    def fn(input: Tensor, other: Tensor) -> Tensor:
        return combine(_ops.ne(input, 0), _ops.ne(other, 0))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, other): elementwise, nonzero as True; a bool tensor."
    return fn


logical_and = _logical("logical_and", _ops.bitwise_and)
logical_or = _logical("logical_or", _ops.bitwise_or)
logical_xor = _logical("logical_xor", _ops.bitwise_xor)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    return _ops.transpose(input, axis0, axis1)


swapdims = swapaxes


def movedim(input: Tensor, source: int | Sequence[int],
            destination: int | Sequence[int]) -> Tensor:
    """The dims `source` moved to the positions `destination`; the others
    keep their order."""
    sources = [source] if isinstance(source, int) else list(source)
    targets = [destination] if isinstance(destination, int) else list(destination)
    if len(sources) != len(targets):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({sources} "
                           f"dims) should contain the same number of dims as destination "
                           f"({targets} dims)")
    ndim = input.ndim
    sources = [d % ndim for d in sources]
    targets = [d % ndim for d in targets]
    order = [-1] * ndim
    for s, t in zip(sources, targets):
        order[t] = s
    rest = iter(d for d in range(ndim) if d not in sources)
    return _ops.permute(input, [d if d >= 0 else next(rest) for d in order])


moveaxis = movedim


def ravel(input: Tensor) -> Tensor:
    return _ops.reshape(input, [-1])


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Dim `dim` split into `sizes` (one of them may be -1)."""
    shape = list(input.shape)
    dim %= len(shape)
    return _ops.reshape(input, shape[:dim] + list(sizes) + shape[dim + 1:])


def count_nonzero(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    return _ops.sum(_ops.ne(input, 0), dims, False, _C.dtype.int64)


class inference_mode(_grad_mode.no_grad):
    """torch.inference_mode(mode=True): here the same as no_grad (kiln keeps
    no separate inference tensors); mode=False leaves grad mode as it is.
    A context manager and a decorator, with or without parentheses."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # @inference_mode, no parentheses: mode is the function

    def __init__(self, mode: Any = True) -> None:
        self.enabled = mode

    def __enter__(self) -> None:
        self.mode = not self.enabled and _C.is_grad_enabled()
        super().__enter__()

    def __call__(self, fn: Any) -> Any:
        enabled = self.enabled

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(enabled):
                return fn(*args, **kwargs)
        return wrapper


def get_default_dtype() -> _C.dtype:
    """float32: kiln's factories make float32 tensors unless told otherwise."""
    return _C.dtype.float32


# Numeric limits (attention code masks with finfo(dtype).min) and meshgrid.
__all__ += ["finfo", "iinfo", "meshgrid"]

_FLOATS = {_C.dtype.float32: "float32", _C.dtype.float64: "float64"}
_INTS = {_C.dtype.int8: "int8", _C.dtype.uint8: "uint8", _C.dtype.int16: "int16",
         _C.dtype.int32: "int32", _C.dtype.int64: "int64"}


class finfo:
    """torch.finfo(dtype=float32): bits, eps, max, min, tiny (=
    smallest_normal) and resolution of a floating dtype."""

    def __init__(self, type: _C.dtype = _C.dtype.float32) -> None:  # noqa: A002
        if type not in _FLOATS:
            raise TypeError(f"kiln.finfo() requires a floating point input type, got {type}; "
                            f"use kiln.iinfo for integer types")
        info = np.finfo(_FLOATS[type])
        self.dtype = _FLOATS[type]
        self.bits = int(info.bits)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = 10.0 ** -int(info.precision)  # as torch: a decimal power

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """torch.iinfo(dtype): bits, min and max of an integer dtype."""

    def __init__(self, type: _C.dtype) -> None:  # noqa: A002
        if type not in _INTS:
            raise TypeError(f"kiln.iinfo() requires an integer input type, got {type}; "
                            f"use kiln.finfo for floating point types")
        info = np.iinfo(_INTS[type])
        self.dtype = _INTS[type]
        self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors; indexing="xy" swaps the first two
    dims of the grid (Cartesian order), "ij" (the default) does not."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', not {indexing!r}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = [tensors[i].numel() for i in order]
    grids = []
    for i, t in enumerate(tensors):
        where = order.index(i)
        view = [1] * len(tensors)
        view[where] = -1
        grids.append(_ops.expand(_ops.reshape(t, view), shape))
    return tuple(grids)


# scatter, the indexing compositions, lerp, norm, cdist, the arc* names and
# the thread count: a module of their own (_math_forms), exported from here.
__all__ += _math_forms.__all__
NOT_METHODS |= _math_forms.NOT_METHODS
