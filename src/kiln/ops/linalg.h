// Matrix products: matmul (PyTorch's rules for 1-D and batched operands),
// linear (x · Wᵀ + b) and addmm (beta · input + alpha · m1 · m2).
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1,
             double alpha = 1);

}  // namespace kiln
