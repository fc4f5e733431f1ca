"""NumPy interop: from_numpy and .numpy() share memory both ways, keep the
other side's memory alive, and keep its layout."""
import gc

import numpy as np
import pytest

import kiln

DTYPES = [(np.float32, kiln.float32), (np.float64, kiln.float64), (np.int32, kiln.int32),
          (np.int64, kiln.int64), (np.bool_, kiln.bool)]


@pytest.mark.parametrize("np_dtype,kiln_dtype", DTYPES)
def test_from_numpy_shares_memory_both_ways(np_dtype, kiln_dtype):
    array = np.zeros((2, 3), dtype=np_dtype)
    t = kiln.from_numpy(array)
    assert t.dtype == kiln_dtype and t.shape == (2, 3)
    array[1, 2] = 1
    assert t.tolist()[1][2] == 1
    t.numpy()[0, 1] = 1
    assert array[0, 1] == 1
    assert t.data_ptr() == array.ctypes.data


def test_from_numpy_keeps_strides():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2].T  # non-contiguous: strides (2, 6) in elements
    t = kiln.from_numpy(view)
    assert t.shape == (3, 4) and t.stride() == (2, 6) and t.stride(1) == 6
    np.testing.assert_array_equal(t.numpy(), view)
    base[0, 2] = -5
    assert t.tolist()[1][0] == -5


def test_from_numpy_keeps_the_array_alive():
    t = kiln.from_numpy(np.full((1000,), 7.0))
    gc.collect()
    assert t.sum().item() == 7000.0


def test_numpy_keeps_the_tensor_alive():
    array = kiln.arange(10).numpy()
    gc.collect()
    np.testing.assert_array_equal(array, np.arange(10))


def test_numpy_of_a_view_shares_the_base():
    t = kiln.zeros(3, 4)
    column = t.transpose(0, 1)
    column.numpy()[2, 1] = 9.0
    assert t.tolist()[1][2] == 9.0
    assert column.numpy().strides == (4, 16)


def test_array_protocol_and_tolist():
    t = kiln.tensor([[1.5, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(np.asarray(t), [[1.5, 2.0], [3.0, 4.0]])
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert t.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert kiln.tensor(3).item() == 3 and isinstance(kiln.tensor(3).item(), int)
    assert kiln.tensor(True).item() is True


def test_numpy_refuses_a_tensor_that_requires_grad():
    t = kiln.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Use tensor.detach\\(\\).numpy\\(\\) instead"):
        t.numpy()
    np.testing.assert_array_equal(t.detach().numpy(), [1.0, 1.0])


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="can't convert np.ndarray"):
        kiln.from_numpy(np.zeros(3, dtype=np.float16))


def test_memory_returns_to_the_allocator_when_python_drops_it():
    gc.collect()
    before = kiln._C._allocator_live_bytes()
    x = kiln.randn(256, 256, requires_grad=True)
    loss = ((x @ x).relu() * 2).sum()
    loss.backward()
    array = (x.detach() + 1).numpy()
    assert kiln._C._allocator_live_bytes() > before
    del x, loss
    assert kiln._C._allocator_live_bytes() > before  # `array` still holds its tensor
    del array
    gc.collect()
    assert kiln._C._allocator_live_bytes() == before
