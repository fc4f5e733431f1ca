"""The parts of kiln.Tensor that are naturally Python: repr, tolist,
__array__, conversions to Python numbers, and the ops as methods."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kiln import _C, _device
from kiln._C import Tensor


def _repr(self: Tensor) -> str:
    text = self._to_string()
    grad_fn = self._grad_fn_name
    if grad_fn:
        return f"{text[:-1]}, grad_fn=<{grad_fn}>)"
    if self.requires_grad:
        return f"{text[:-1]}, requires_grad=True)"
    return text


def _tolist(self: Tensor) -> Any:
    return self.detach().numpy().tolist()


def _array(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    array = self.detach().numpy()
    if dtype is not None:
        array = array.astype(dtype, copy=False)
    return array.copy() if copy else array


def _transpose_all(self: Tensor) -> Tensor:
    """x.T: the dims reversed (the matrix transpose of a 2-D tensor)."""
    return self.permute(list(range(self.ndim))[::-1])


def _cast(dtype: _C.dtype) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return self.to(dtype)
    return method


def _device_of(self: Tensor) -> _device.device:
    return _device.CPU


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """PyTorch's forms: to(dtype), to(device, dtype=None), to(other) (its
    dtype and device), with dtype=, device=, copy= (a new tensor even when
    nothing changes) and non_blocking= / memory_format= (accepted). Nothing
    to change returns the tensor itself, as in PyTorch."""
    dtype, copy = _device.parse_to(args, kwargs, "Tensor.to()", accepts_copy=True)
    out = self if dtype is None or dtype == self.dtype else _C.Tensor._to_dtype(self, dtype)
    return out.clone() if copy and out is self else out


def _cpu(self: Tensor) -> Tensor:
    return self


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False) -> Tensor:
    _device.check_device(_device.device("cuda") if device is None else device, "Tensor.cuda()")
    return self  # not reached: check_device raises for any CUDA device


def install_tensor_methods() -> None:
    from kiln import _indexing, _ops, _torch_forms
    cls = _C.Tensor
    cls.__repr__ = _repr
    cls.__str__ = _repr
    cls.tolist = _tolist
    cls.__array__ = _array
    cls.__bool__ = lambda self: bool(self._item_as("bool() (a Python `if` or `while`)"))
    cls.__float__ = lambda self: float(self._item_as("float()"))
    cls.__int__ = lambda self: int(self._item_as("int()"))
    cls.__index__ = lambda self: int(self._item_as("__index__()"))
    cls.__getitem__ = _indexing.getitem
    cls.__setitem__ = _indexing.setitem
    cls.T = property(_transpose_all)
    cls._to_dtype = cls.to  # the binding: to(dtype) only
    cls.to = _to
    cls.device = property(_device_of)
    cls.is_cpu = property(lambda self: True)
    cls.is_cuda = property(lambda self: False)
    cls.cpu = _cpu
    cls.cuda = _cuda
    for name, dtype in (("float", _C.dtype.float32), ("double", _C.dtype.float64),
                        ("long", _C.dtype.int64), ("int", _C.dtype.int32),
                        ("bool", _C.dtype.bool)):
        setattr(cls, name, _cast(dtype))
    # The op functions themselves: a Python function on a class is a method
    # whose first argument is the tensor, with no wrapper frame in between.
    # PyTorch's forms first, where they differ from the op's (x.max(1)).
    for module in (_torch_forms, _ops):
        for name in module.__all__:
            if name not in _ops.FACTORY_OPS and not hasattr(cls, name):
                setattr(cls, name, getattr(module, name))
