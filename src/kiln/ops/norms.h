// Vector and matrix norms and pairwise distances, as PyTorch computes them
// (torch.linalg.vector_norm / matrix_norm / norm, torch.norm, torch.cdist).
// Each is a composition of ops (sum, amax, abs, pow, sqrt, where), so it
// traces, compiles and differentiates as its parts. The gradient of a norm
// that is 0 is 0 (where sqrt or the 1/p power would give NaN), as PyTorch
// defines it.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "kiln/core/tensor.h"

namespace kiln {

// An order: a number (2, 1, inf, -inf, 0, any p) or a name ("fro", "nuc").
using NormOrd = std::variant<double, std::string>;

// (sum |x|^ord)^(1/ord) over dims (empty: all), with ord = inf the largest
// |x|, -inf the smallest, 0 the count of nonzeros. Floating x only, unless
// dtype names a floating type to compute in.
Tensor vector_norm(const Tensor& x, double ord = 2.0, IntList dims = {}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
// The norm of the matrices over two dims: "fro", 1 / -1 (largest / smallest
// column sum of |x|), inf / -inf (row sums). "nuc", 2 and -2 need singular
// values, which kiln does not compute: NotImplementedError.
Tensor matrix_norm(const Tensor& x, const NormOrd& ord = std::string("fro"),
                   IntList dims = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
// torch.linalg.norm: a vector norm over one dim, a matrix norm over two;
// with no dim, the 2-norm of every element when ord is unset, else by x's
// dimension (1-D: vector, 2-D: matrix).
Tensor linalg_norm(const Tensor& x, const std::optional<NormOrd>& ord = std::nullopt,
                   const std::optional<IntList>& dims = std::nullopt, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
// torch.norm: a vector norm over dims (unset: all) for a number p (unset:
// 2) or "fro" (the 2-norm).
Tensor norm(const Tensor& x, const std::optional<NormOrd>& p = std::nullopt,
            const std::optional<IntList>& dims = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

// The p-norm distance between each row of x1 [..., P, M] and each row of
// x2 [..., R, M]: [..., P, R], batch dims broadcast. Computed from the
// differences (what torch.cdist's compute_mode "donot_use_mm_for_euclid_dist"
// does), so equal rows are exactly 0 apart.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0);

}  // namespace kiln
