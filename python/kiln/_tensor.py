"""The parts of kiln.Tensor that are naturally Python: repr, tolist,
__array__, conversions to Python numbers, the ops as methods, their
in-place forms (x.sqrt_()), the new_* factories and the *_as methods."""
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


def _get_data(self: Tensor) -> Tensor:
    """x.data: the same memory without autograd history (what nn.init-style
    code writes into with uniform_(), zero_(), copy_())."""
    return self.detach()


def _set_data(self: Tensor, value: Tensor) -> None:
    """x.data = y: y's values written into x's memory, unseen by autograd.
    PyTorch swaps the storage, which lets the shape change; here the shape
    and dtype must match, and anything else says so."""
    if not isinstance(value, _C.Tensor):
        raise TypeError(f"x.data = value: value must be a Tensor, not {type(value).__name__}")
    if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
        raise RuntimeError(f"x.data = value: kiln writes the value into x's memory, so it needs "
                           f"x's shape {list(self.shape)} and dtype {self.dtype}, got "
                           f"{list(value.shape)} and {value.dtype}")
    _C._copy_no_grad(self, value)


def _cpu(self: Tensor) -> Tensor:
    return self


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False) -> Tensor:
    _device.check_device(_device.device("cuda") if device is None else device, "Tensor.cuda()")
    return self  # not reached: check_device raises for any CUDA device


def _numpy_operand(obj: Any) -> Tensor | bool | int | float | None:
    """The kiln operand for a NumPy value met by an operator (tensor.cpp
    asks): an array as kiln.tensor makes it (its own dtype), a NumPy scalar
    as the Python number it holds (so it promotes like one); None for
    anything else (the operator then returns NotImplemented)."""
    if isinstance(obj, np.ndarray):
        from kiln._factories import tensor
        return tensor(obj)
    if isinstance(obj, np.generic):
        value = obj.item()
        return value if isinstance(value, (bool, int, float)) else None
    return None


def _sizes(size: tuple[Any, ...]) -> list[Any]:
    """PyTorch's size arguments: varargs (x.repeat(2, 3)) or one sequence."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return list(size[0])
    return list(size)


def _repeat(self: Tensor, *sizes: Any) -> Tensor:
    """x.repeat(*sizes): x tiled sizes[i] times along dim i (new leading dims
    where sizes is longer), a new tensor."""
    if not sizes:
        raise TypeError("repeat() missing 1 required positional argument: 'repeats'")
    return _C.repeat(self, _sizes(sizes))


def _new_factory(name: str) -> Callable[..., Tensor]:
    def method(self: Tensor, *size: Any, dtype: _C.dtype | None = None, device: Any = None,
               requires_grad: bool = False, layout: Any = None,
               pin_memory: bool = False) -> Tensor:
        from kiln import _factories
        factory = getattr(_factories, name)
        return factory(*size, dtype=self.dtype if dtype is None else dtype, device=device,
                       requires_grad=requires_grad)
    method.__name__ = method.__qualname__ = f"new_{name}"
    method.__doc__ = (f"A new tensor of the given size from kiln.{name}, with this tensor's "
                      "dtype unless dtype= is given.")
    return method


def _new_full(self: Tensor, size: Any, fill_value: float, *, dtype: _C.dtype | None = None,
              device: Any = None, requires_grad: bool = False, layout: Any = None,
              pin_memory: bool = False) -> Tensor:
    from kiln._factories import full
    return full(_sizes((size,)), fill_value, dtype=self.dtype if dtype is None else dtype,
                device=device, requires_grad=requires_grad)


def _new_tensor(self: Tensor, data: Any, *, dtype: _C.dtype | None = None, device: Any = None,
                requires_grad: bool = False, layout: Any = None,
                pin_memory: bool = False) -> Tensor:
    from kiln._factories import tensor
    return tensor(data, dtype=self.dtype if dtype is None else dtype, device=device,
                  requires_grad=requires_grad)


# Ops of the table whose in-place form is a Tensor method under PyTorch's
# name (x.sqrt_(), x.clamp_(min, max), x.addcmul_(t1, t2, value=2)): the
# op's inputs after the first, then its attributes, as the op function
# takes them. mul_, div_, add_, sub_ and the operators' forms
# (remainder_, bitwise_and_, ...) are bound in tensor.cpp.
_INPLACE_OPS = (
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
    "floor", "ceil", "round", "trunc", "sign", "bitwise_not", "logical_not", "nan_to_num",
    "clamp", "pow", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "addcmul", "addcdiv",
    "log1p", "expm1", "log2", "log10", "reciprocal", "erf", "erfc", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "atan2", "hypot",
)


def _inplace_method(name: str, schemas: dict[str, tuple[int, list[str]]]) -> Callable[..., Tensor]:
    op_def = _C.op(name)
    max_inputs, attr_names = schemas[name]

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        others, rest = args[:max_inputs - 1], args[max_inputs - 1:]
        if len(rest) > len(attr_names):
            raise TypeError(f"{name}_() takes at most {max_inputs - 1 + len(attr_names)} "
                            f"arguments, got {len(args)}")
        attrs = dict(zip(attr_names, rest))
        attrs.update(kwargs)
        return self._apply_inplace(op_def, list(others), attrs or None)

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"In place: x.{name}_(...) writes kiln.{name}(x, ...) into x and returns x."
    return method


def _clamp_bound_inplace(bound: str) -> Callable[[Tensor, float], Tensor]:
    op_def = _C.op("clamp")

    def method(self: Tensor, value: float) -> Tensor:
        return self._apply_inplace(op_def, [], {bound: value})
    method.__name__ = method.__qualname__ = f"clamp_{bound}_"
    return method


def _masked_fill_inplace(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    """x.masked_fill_(mask, value): value where mask is True, in x's memory."""
    return _C.masked_fill_(self, mask, value)


def _where_method(self: Tensor, condition: Tensor, other: Any) -> Tensor:
    """x.where(condition, y) is where(condition, x, y), as in torch: the
    tensor is the value taken where the condition holds, not the condition."""
    from kiln import _ops
    return _ops.where(condition, self, other)


def _install_misc_methods(cls: Any) -> None:
    # NumPy defers its operators to an object of higher priority that does
    # not subclass ndarray, so `array + tensor` calls Tensor.__radd__ and
    # gives a Tensor (as `tensor + array` does), while np.exp(tensor) still
    # converts through __array__.
    cls.__array_priority__ = 1000
    cls.where = _where_method
    cls.repeat = _repeat
    # A nanobind function is no descriptor: a lambda makes it a method.
    cls.expand_as = lambda self, other: _C.expand_as(self, other)
    cls.view_as = lambda self, other: self.view(other.shape)
    cls.reshape_as = lambda self, other: self.reshape(other.shape)
    cls.type_as = lambda self, other: self.to(other.dtype)
    for name in ("zeros", "ones", "empty"):
        setattr(cls, f"new_{name}", _new_factory(name))
    cls.new_full = _new_full
    cls.new_tensor = _new_tensor
    schemas = {name: (max_inputs, [a[0] for a in attrs])
               for name, _, max_inputs, _, attrs in _C.op_schemas()}
    for name in _INPLACE_OPS:
        if not hasattr(cls, f"{name}_"):
            setattr(cls, f"{name}_", _inplace_method(name, schemas))
    cls.clip_ = cls.clamp_
    cls.masked_fill_ = _masked_fill_inplace
    cls.nelement = cls.numel
    cls.ndimension = cls.dim
    cls.clamp_min_ = _clamp_bound_inplace("min")
    cls.clamp_max_ = _clamp_bound_inplace("max")
    _install_math_methods(cls)


def _tensor_norm(self: Tensor, p: float | str | None = "fro", dim: Any = None,
                 keepdim: bool = False, dtype: _C.dtype | None = None) -> Tensor:
    """x.norm(p="fro", dim=None, keepdim=False, dtype=None), as torch.norm."""
    from kiln._math_forms import norm
    return norm(self, p, dim, keepdim, dtype=dtype)


def _install_math_methods(cls: Any) -> None:
    """The in-place forms of kiln._math_forms' compositions (x.scatter_(),
    x.index_fill_(), x.lerp_(), ...), the arc* names' in-place forms, and
    x.norm, whose method form has no out= between keepdim and dtype."""
    from kiln import _math_forms
    for name, method in _math_forms.METHODS.items():
        setattr(cls, name, method)
    for alias, name in _math_forms.ALIASES.items():
        setattr(cls, f"{alias}_", getattr(cls, f"{name}_"))
    cls.norm = _tensor_norm


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
    cls.data = property(_get_data, _set_data)
    cls.is_cpu = property(lambda self: True)
    cls.is_cuda = property(lambda self: False)
    cls.cpu = _cpu
    cls.cuda = _cuda
    _install_misc_methods(cls)
    for name, dtype in (("float", _C.dtype.float32), ("double", _C.dtype.float64),
                        ("long", _C.dtype.int64), ("int", _C.dtype.int32),
                        ("short", _C.dtype.int16), ("char", _C.dtype.int8),
                        ("byte", _C.dtype.uint8),
                        ("bool", _C.dtype.bool)):
        setattr(cls, name, _cast(dtype))
    # The op functions themselves: a Python function on a class is a method
    # whose first argument is the tensor, with no wrapper frame in between.
    # PyTorch's forms first, where they differ from the op's (x.max(1)).
    for module in (_torch_forms, _ops):
        for name in module.__all__:
            if name in _ops.FACTORY_OPS or name in _torch_forms.NOT_METHODS:
                continue
            if not hasattr(cls, name):
                setattr(cls, name, getattr(module, name))
