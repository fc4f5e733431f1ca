// det and det_cofactor: the determinants of a batch of square matrices
// (torch.linalg.det, ONNX's Det) and their derivatives, the cofactor
// matrices. Both factor each matrix by LU in double, whatever the dtype.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out [...] = det(a[..., :, :]) for a [..., n, n] (any strides), float32 or
// float64 like out. LU with partial pivoting: det = sign(P) prod U_ii.
void det(const StridedView& out, const StridedView& a);

// out [..., n, n] = d det(a) / d a, the cofactor matrix (det(a) a^-T where
// a is invertible). Exact at singular matrices too: LU with complete
// pivoting finds the rank, and a matrix of rank n - 1 gets its (rank-one)
// cofactor matrix from the factors; rank n - 2 or less gives 0.
void det_cofactor(const StridedView& out, const StridedView& a);

}  // namespace kiln::cpu
