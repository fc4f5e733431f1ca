"""Tensor factories with PyTorch's signatures: sizes as varargs or one
sequence, keyword dtype, requires_grad and device (the CPU: _device.py)."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from kiln import _C
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._device import DeviceLike, check_device

# A size: an int per dimension, as varargs (zeros(2, 3)) or one sequence
# (zeros((2, 3))).
Size = int | Sequence[int]

_NUMPY_DTYPES = {
    _C.dtype.float32: np.float32,
    _C.dtype.float64: np.float64,
    _C.dtype.int32: np.int32,
    _C.dtype.int64: np.int64,
    _C.dtype.int16: np.int16,
    _C.dtype.int8: np.int8,
    _C.dtype.uint8: np.uint8,
    _C.dtype.bool: np.bool_,
}


def _size(size: tuple[Size, ...]) -> list[int]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return list(size[0])
    return cast(list[int], list(size))  # varargs: one int per dimension


def _symbolic(size: Sequence[object]) -> bool:
    return any(isinstance(s, _C.SymInt) for s in size)


def _filled(size: list[int], value: float, dtype: DType | None, requires_grad: bool) -> Tensor:
    """full() with sizes a trace with dynamic shapes keeps symbolic: the
    value expanded to the size and copied, so the graph records
    expand + clone and the size stays general (a factory is no op)."""
    scalar = _C.full([], value, dtype, False)
    result = _C.dispatch("clone", [_C.dispatch("expand", [scalar], {"size": size})])
    if requires_grad:
        result.requires_grad_()
    return result


def tensor(data: object, dtype: DType | None = None, requires_grad: bool = False,
           device: DeviceLike = None) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, numbers, a NumPy
    array or a Tensor). Python floats give float32 and ints int64."""
    check_device(device, "tensor")
    if isinstance(data, _C.Tensor):
        data = data.detach().numpy()
    array: np.ndarray
    if dtype is not None:
        array = np.array(data, dtype=_NUMPY_DTYPES[dtype])
    else:
        from_numpy_array = isinstance(data, np.ndarray)
        array = np.array(data)
        if array.dtype == np.float64 and not from_numpy_array:
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu" and not from_numpy_array:
            array = array.astype(np.int64)
    result = _C.from_numpy(np.asarray(array, order="C")).clone()  # keeps 0-d arrays 0-d
    if requires_grad:
        result.requires_grad_()
    return result


def zeros(*size: Size, dtype: DType | None = None, requires_grad: bool = False,
          device: DeviceLike = None) -> Tensor:
    check_device(device, "zeros")
    shape = _size(size)
    if _symbolic(shape):
        return _filled(shape, 0.0, dtype, requires_grad)
    return _C.zeros(shape, dtype, requires_grad)


def ones(*size: Size, dtype: DType | None = None, requires_grad: bool = False,
         device: DeviceLike = None) -> Tensor:
    check_device(device, "ones")
    shape = _size(size)
    if _symbolic(shape):
        return _filled(shape, 1.0, dtype, requires_grad)
    return _C.ones(shape, dtype, requires_grad)


def empty(*size: Size, dtype: DType | None = None, requires_grad: bool = False,
          device: DeviceLike = None) -> Tensor:
    check_device(device, "empty")
    shape = _size(size)
    if _symbolic(shape):  # zeros: an uninitialized graph value is no better
        return _filled(shape, 0.0, dtype, requires_grad)
    return _C.empty(shape, dtype, requires_grad)


def full(size: Sequence[int], fill_value: float, dtype: DType | None = None,
         requires_grad: bool = False,
         device: DeviceLike = None) -> Tensor:
    check_device(device, "full")
    if _symbolic(size):
        return _filled(list(size), fill_value, dtype, requires_grad)
    return _C.full(list(size), fill_value, dtype, requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, dtype: DType | None = None,
           requires_grad: bool = False,
           device: DeviceLike = None) -> Tensor:
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    # No op makes a range: a symbolic bound specializes the trace (reported).
    start, end, step = (operator.index(v) if isinstance(v, _C.SymInt) else v
                        for v in (start, end, step))
    return _C.arange(start, end, step, dtype, requires_grad)


def linspace(start: float, end: float, steps: int, dtype: DType | None = None,
             requires_grad: bool = False,
             device: DeviceLike = None) -> Tensor:
    check_device(device, "linspace")
    return _C.linspace(start, end, steps, dtype, requires_grad)


def eye(n: int, m: int | None = None, dtype: DType | None = None,
        requires_grad: bool = False,
        device: DeviceLike = None) -> Tensor:
    check_device(device, "eye")
    return _C.eye(n, -1 if m is None else m, dtype, requires_grad)


def _drawn(result: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        result.requires_grad_()
    return result


# The random factories dispatch kiln's random ops (uniform, normal, randint
# and the _like forms), so a traced or compiled function draws new numbers
# on every call, from kiln.manual_seed's generator as eager code does. Sizes
# a trace with dynamic shapes keeps symbolic (SymInt) stay so in the graph.
def rand(*size: Size, dtype: DType | None = None, requires_grad: bool = False,
         device: DeviceLike = None, generator: Any = None) -> Tensor:
    check_device(device, "rand")
    shape = _size(size)
    if _symbolic(shape) and generator is None:
        attrs = {"shape": shape, "dtype": dtype or _C.dtype.float32}
        return _drawn(_C.dispatch("uniform", [], attrs), requires_grad)
    return _C.rand(shape, dtype, requires_grad, generator)


def randn(*size: Size, dtype: DType | None = None, requires_grad: bool = False,
          device: DeviceLike = None, generator: Any = None) -> Tensor:
    check_device(device, "randn")
    shape = _size(size)
    if _symbolic(shape) and generator is None:
        attrs = {"shape": shape, "dtype": dtype or _C.dtype.float32}
        return _drawn(_C.dispatch("normal", [], attrs), requires_grad)
    return _C.randn(shape, dtype, requires_grad, generator)


def randint(low: int, high: int | Sequence[int] | None = None,
            size: Sequence[int] | None = None, dtype: DType | None = None,
            device: DeviceLike = None, generator: Any = None) -> Tensor:
    """randint(high, size) or randint(low, high, size), as in PyTorch."""
    check_device(device, "randint")
    if size is None:  # randint(high, size)
        low, high, size = 0, low, cast(Sequence[int], high)
    shape = list(size)
    if _symbolic(shape) and generator is None:
        attrs = {"low": low, "high": high, "shape": shape, "dtype": dtype or _C.dtype.int64}
        return _C.dispatch("randint", [], attrs)
    return _C.randint(low, high, shape, dtype, generator)


def zeros_like(t: Tensor, dtype: DType | None = None, requires_grad: bool = False,
               device: DeviceLike = None) -> Tensor:
    check_device(device, "zeros_like")
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: DType | None = None, requires_grad: bool = False,
              device: DeviceLike = None) -> Tensor:
    check_device(device, "ones_like")
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype: DType | None = None, requires_grad: bool = False,
               device: DeviceLike = None) -> Tensor:
    check_device(device, "empty_like")
    return empty(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: float, dtype: DType | None = None,
              requires_grad: bool = False,
              device: DeviceLike = None) -> Tensor:
    check_device(device, "full_like")
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def rand_like(t: Tensor, dtype: DType | None = None, requires_grad: bool = False,
              device: DeviceLike = None) -> Tensor:
    """Uniform in [0, 1), shaped like t (a symbolic shape stays symbolic)."""
    check_device(device, "rand_like")
    return _drawn(_C.dispatch("uniform_like", [t], {"dtype": dtype}), requires_grad)


def randn_like(t: Tensor, dtype: DType | None = None, requires_grad: bool = False,
               device: DeviceLike = None) -> Tensor:
    """Standard normal, shaped like t (a symbolic shape stays symbolic)."""
    check_device(device, "randn_like")
    return _drawn(_C.dispatch("normal_like", [t], {"dtype": dtype}), requires_grad)
