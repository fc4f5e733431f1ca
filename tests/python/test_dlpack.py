"""DLPack both ways with PyTorch and NumPy, and the buffer protocol: no
copies (a write on one side is read on the other)."""
import numpy as np
import pytest
import torch

import kiln


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.int64, kiln.bool])
def test_torch_consumes_kiln_without_copy(dtype):
    k = kiln.zeros(2, 3, dtype=dtype)
    t = torch.from_dlpack(k)
    assert tuple(t.shape) == (2, 3) and str(t.dtype) == str(dtype).replace("kiln", "torch")
    assert t.data_ptr() == k.data_ptr()
    t[1, 2] = 1
    assert k.tolist()[1][2] == 1


def test_dlpack_keeps_strides_and_the_storage_alive():
    k = kiln.arange(12, dtype=kiln.float32).view(3, 4).T[1:]
    t = torch.from_dlpack(k)
    assert t.stride() == k.stride() and t.tolist() == k.tolist()
    del k
    assert t.tolist() == torch.arange(12.0).view(3, 4).T[1:].tolist()
    assert kiln.zeros(1).__dlpack_device__() == (1, 0)


def test_kiln_consumes_torch_and_numpy_without_copy():
    t = torch.zeros(2, 3)
    k = kiln.from_dlpack(t)
    assert k.shape == (2, 3) and k.dtype == kiln.float32 and k.data_ptr() == t.data_ptr()
    k[0, 1] = 5.0
    t[1] += 2
    assert t.tolist() == [[0, 5, 0], [2, 2, 2]] and k.tolist() == t.tolist()
    tt = torch.arange(6).view(2, 3).t()
    kt = kiln.from_dlpack(tt)
    assert kt.dtype == kiln.int64 and kt.tolist() == tt.tolist() and kt.stride() == tt.stride()
    a = np.ones(4, dtype=np.float64)
    ka = kiln.from_dlpack(a)
    a[2] = 9
    assert ka.tolist() == [1, 1, 9, 1]
    n = np.from_dlpack(kiln.ones(3))  # NumPy consumes kiln too
    assert n.tolist() == [1, 1, 1]


def test_from_dlpack_keeps_the_producer_alive():
    k = kiln.from_dlpack(torch.arange(5.0))
    assert k.tolist() == [0, 1, 2, 3, 4]


def test_dlpack_of_tensor_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="requires grad"):
        torch.from_dlpack(kiln.zeros(2, requires_grad=True))
    assert torch.from_dlpack(kiln.zeros(2, requires_grad=True).detach()).tolist() == [0, 0]


def test_buffer_protocol():
    k = kiln.arange(6, dtype=kiln.float32).view(2, 3)
    m = memoryview(k)
    assert m.shape == (2, 3) and m.format == "f" and m.tolist() == k.tolist()
    m[0, 1] = 7.0
    assert k.tolist()[0][1] == 7.0
    b = memoryview(kiln.tensor([1, 2], dtype=kiln.int32)).tobytes()
    assert b == np.array([1, 2], dtype=np.int32).tobytes()


def test_exported_memory_returns_to_the_allocator():
    import gc
    gc.collect()
    before = kiln._C._allocator_live_bytes()
    k = kiln.zeros(1000)
    t, m = torch.from_dlpack(k), memoryview(k)
    assert kiln._C._allocator_live_bytes() >= before + 4000
    del k, t
    m.release()
    del m
    gc.collect()
    assert kiln._C._allocator_live_bytes() == before
