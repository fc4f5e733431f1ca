"""Tensor factories with PyTorch's signatures: sizes as varargs or one
sequence, keyword dtype and requires_grad."""
import numpy as np

from kiln import _C

_NUMPY_DTYPES = {
    _C.dtype.float32: np.float32,
    _C.dtype.float64: np.float64,
    _C.dtype.int32: np.int32,
    _C.dtype.int64: np.int64,
    _C.dtype.bool: np.bool_,
}


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return list(size[0])
    return list(size)


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, a NumPy
    array or a Tensor). Python floats give float32 and ints int64."""
    if isinstance(data, _C.Tensor):
        data = data.detach().numpy()
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


def zeros(*size, dtype=None, requires_grad=False):
    return _C.zeros(_size(size), dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    return _C.ones(_size(size), dtype, requires_grad)


def empty(*size, dtype=None, requires_grad=False):
    return _C.empty(_size(size), dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False):
    return _C.full(list(size), fill_value, dtype, requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    return _C.arange(start, end, step, dtype, requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False):
    return _C.linspace(start, end, steps, dtype, requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False):
    return _C.eye(n, -1 if m is None else m, dtype, requires_grad)


def rand(*size, dtype=None, requires_grad=False):
    return _C.rand(_size(size), dtype, requires_grad)


def randn(*size, dtype=None, requires_grad=False):
    return _C.randn(_size(size), dtype, requires_grad)


def randint(low, high=None, size=None, dtype=None):
    """randint(high, size) or randint(low, high, size), as in PyTorch."""
    if size is None:
        low, high, size = 0, low, high
    return _C.randint(low, high, list(size), dtype)


def zeros_like(t, dtype=None, requires_grad=False):
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def empty_like(t, dtype=None, requires_grad=False):
    return empty(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False):
    return rand(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False):
    return randn(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)
