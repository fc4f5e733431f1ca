"""kiln.linalg: the norms of torch.linalg, composed of kiln's ops in C++
(ops/norms.h), so they trace, compile and differentiate like any op, and
det (kiln's op det: LU with partial pivoting). The
decompositions and solvers of torch.linalg (svd, qr, solve, ...) are not
here, and neither are the norms that need singular values (matrix ord
"nuc", 2 and -2, which raise NotImplementedError)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln import _C, _missing, _ops
from kiln._C import Tensor

__all__ = ["vector_norm", "matrix_norm", "norm", "det"]


def _dims(dim: int | Sequence[int] | None) -> list[int] | None:
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def _ord(ord: Any) -> Any:
    """An order as the binding takes it: numbers as floats, names as given."""
    if ord is None or isinstance(ord, str):
        return ord
    return float(ord)


def vector_norm(x: Tensor, ord: float = 2, dim: int | Sequence[int] | None = None,
                keepdim: bool = False, *, dtype: _C.dtype | None = None) -> Tensor:
    """(sum |x|^ord)^(1/ord) over dim (all dims when None): ord inf is the
    largest |x|, -inf the smallest, 0 the count of nonzeros."""
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' must be Number, not str")
    return _C.vector_norm(x, float(ord), _dims(dim) or [], keepdim, dtype)


def matrix_norm(A: Tensor, ord: float | str = "fro", dim: tuple[int, int] = (-2, -1),
                keepdim: bool = False, *, dtype: _C.dtype | None = None) -> Tensor:
    """The matrix norm over the two dims: "fro", 1 / -1 (largest / smallest
    column sum of |A|), inf / -inf (row sums)."""
    return _C.matrix_norm(A, _ord(ord), list(dim), keepdim, dtype)


def norm(A: Tensor, ord: float | str | None = None, dim: int | Sequence[int] | None = None,
         keepdim: bool = False, *, dtype: _C.dtype | None = None) -> Tensor:
    """A vector norm over one dim, a matrix norm over two; with no dim, the
    2-norm of every element when ord is None, else by A's dimension (1-D:
    vector, 2-D: matrix)."""
    return _C.linalg_norm(A, _ord(ord), _dims(dim), keepdim, dtype)


def det(A: Tensor) -> Tensor:
    """The determinants of the square matrices A [..., n, n] (float32 or
    float64). Its gradient is the cofactor matrix, exact at singular A too."""
    return _ops.det(A)


__getattr__ = _missing.module_getattr("kiln.linalg", "torch.linalg")
