"""Rows for det, det_cofactor (det's derivative) and dft (the discrete Fourier
transform on torch.view_as_real's form of complex tensors: a trailing dim of
2, or of 1 for a real signal).

PyTorch's oracle for dft is torch.fft (fft, ifft, rfft, irfft) between
view_as_complex and view_as_real; for det_cofactor it is det(A) A^-T where A
is invertible and, at singular matrices, the derivative of det that
torch.autograd gives with create_graph (its exact, SVD-based path)."""
import torch

from oracle import Case, Input, ints, randn, values


def _complex(t):
    return torch.view_as_complex(t.contiguous())


def _real(t):
    return torch.view_as_real(t)


def _cofactor(a):
    return torch.linalg.det(a)[..., None, None] * torch.linalg.inv(a).mT


def _exact_cofactor(a):
    a = a.clone().requires_grad_(True)
    return torch.autograd.grad(torch.linalg.det(a).sum(), a, create_graph=True)[0].detach()


def det(x, name="", **kw):
    return Case("det", [x], torch.linalg.det, name=name, **kw)


def cofactor(x, name="", fn=_cofactor, **kw):
    return Case("det_cofactor", [x], fn, name=name, **kw)


def dft(x, fn, name, axis=-2, length=0, inverse=False, onesided=False, **kw):
    attrs = {"axis": axis, "length": length, "inverse": inverse, "onesided": onesided}
    return Case("dft", [x], fn, attrs=attrs, name=name, **kw)


def _kiln_axis(dim):
    """torch's dim over x without its last dim, as an axis of x."""
    return dim - 1 if dim < 0 else dim


def _n(length):
    return None if length == 0 else length


def fft_real(x, dim, length=0, name="", **kw):
    """fft of a real signal x [..., 1] (dim counts x's dims but the last)."""
    def fn(t):
        return _real(torch.fft.fft(t[..., 0], n=_n(length), dim=dim))
    return dft(x, fn, name, axis=_kiln_axis(dim), length=length, **kw)


def fft_complex(x, dim, length=0, inverse=False, name="", **kw):
    transform = torch.fft.ifft if inverse else torch.fft.fft

    def fn(t):
        return _real(transform(_complex(t), n=_n(length), dim=dim))
    return dft(x, fn, name, axis=_kiln_axis(dim), length=length, inverse=inverse, **kw)


def rfft(x, dim, length=0, name="", **kw):
    def fn(t):
        return _real(torch.fft.rfft(t[..., 0], n=_n(length), dim=dim))
    return dft(x, fn, name, axis=_kiln_axis(dim), length=length, onesided=True, **kw)


def irfft(x, dim, length=0, name="", **kw):
    def fn(t):
        return torch.fft.irfft(_complex(t), n=_n(length), dim=dim)[..., None]
    return dft(x, fn, name, axis=_kiln_axis(dim), length=length, inverse=True, onesided=True, **kw)


SINGULAR_RANK_2 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
SINGULAR_RANK_1 = [[1.0, 2.0, -1.0], [2.0, 4.0, -2.0], [3.0, 6.0, -3.0]]

# Rows of one matrix [n, n] pin n (tests/cpp/jit_op_symbolic_test.cpp lists
# them); the others hold a batch dim first.
CASES = [
    det(randn(2, 2), name="2x2", rtol=1e-5),
    det(randn(3, 4, 4, dtype="float64"), name="batch_f64"),
    det(randn(2, 3, 5, 5, layout="transposed"), name="transposed", rtol=1e-4, atol=1e-4),
    det(randn(2, 1, 1, dtype="float64"), name="1x1"),
    det(randn(0, 3, 3, dtype="float64"), name="empty_batch"),
    # a zero pivot that partial pivoting must swap away
    det(values([[[0.0, 1.0, 2.0], [3.0, 0.0, 1.0], [1.0, 1.0, 0.0]]], "float64"),
        name="zero_pivot"),
    # exactly singular: det 0; PyTorch's first-order gradient there is 0, kiln's the
    # true cofactor matrix (the det_cofactor rows below), so no gradient row
    det(values([SINGULAR_RANK_2], "float64"), name="singular", grad=False),
    det(ints(0, 5, 2, 2), name="int_input", error="expected a float32 or float64 input"),
    det(randn(2, 3), name="not_square", error="expected a batch of square matrices"),
    det(randn(3), name="vector", error="expected a batch of square matrices"),
    cofactor(randn(3, 3, dtype="float64"), name="3x3_f64"),
    cofactor(randn(2, 4, 4), name="batch", rtol=1e-4, atol=1e-4),
    cofactor(values([[[2.0]]], "float64"), name="1x1"),
    cofactor(values([SINGULAR_RANK_2], "float64"), name="rank_n_minus_1", fn=_exact_cofactor,
             grad=False),
    cofactor(values([SINGULAR_RANK_1], "float64"), name="rank_n_minus_2", fn=_exact_cofactor,
             grad=False),
    cofactor(values([[[0.0, 1.0], [0.0, 0.0]]], "float64"), name="nilpotent", fn=_exact_cofactor,
             grad=False),
    fft_real(randn(3, 8, 1), 1, name="real_pow2", reduce_len=8),
    fft_real(randn(5, 2, 1, dtype="float64"), 0, name="real_axis0_bluestein"),
    fft_real(randn(2, 6, 1), -1, length=9, name="real_padded", reduce_len=9),
    fft_complex(randn(12, 3, 2, dtype="float64"), 0, name="complex_bluestein"),
    fft_complex(randn(2, 7, 2, layout="transposed", dtype="float64"), 1, length=10,
                inverse=True, name="inverse_padded_strided"),
    fft_complex(randn(3, 10, 2), 1, length=4, name="truncated", reduce_len=4),
    fft_complex(randn(2, 16, 2), 1, inverse=True, name="inverse_pow2", reduce_len=16),
    fft_complex(randn(1, 1, 2, dtype="float64"), 1, name="length_1"),
    fft_complex(randn(2, 1000, 2, dtype="float64"), 1, name="long_bluestein", rtol=1e-9,
                atol=1e-9),
    fft_complex(randn(1024, 2, dtype="float64"), 0, name="long_pow2", rtol=1e-9, atol=1e-9),
    rfft(randn(4, 9, 1, dtype="float64"), 1, name="rfft_odd"),
    rfft(randn(16, 3, 1), 0, name="rfft_pow2", reduce_len=16),
    rfft(randn(2, 5, 1, dtype="float64"), -1, length=8, name="rfft_padded"),
    irfft(randn(3, 5, 2, dtype="float64"), 1, name="irfft_default_length"),
    irfft(randn(3, 5, 2, dtype="float64"), 1, length=9, name="irfft_odd"),
    irfft(randn(6, 2, 2), 0, length=6, name="irfft_truncated", reduce_len=6),
    irfft(randn(2, 3, 2, dtype="float64"), 1, length=10, name="irfft_padded"),
    dft(randn(2, 4, 2), None, "onesided_complex", onesided=True,
        error="a onesided forward transform takes a real input"),
    dft(randn(2, 4, 1), None, "irfft_real", inverse=True, onesided=True,
        error="a onesided inverse transform takes a complex input"),
    dft(randn(2, 4, 2), None, "last_axis", axis=2, error="is out of range"),
    dft(randn(2, 4, 3), None, "three_parts", error="expected a last dim of 1"),
    dft(Input((2, 4, 2), "int64", "ints", 0, 3), None, "int_input",
        error="expected a float32 or float64 input"),
]
