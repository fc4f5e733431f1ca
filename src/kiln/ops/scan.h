// Running sums and products, and reordering along dims, with PyTorch's names,
// arguments and defaults: cumsum, cumprod, flip, roll. Each returns a new
// tensor (flip is a copy, as in PyTorch).
#pragma once

#include <optional>

#include "kiln/core/tensor.h"

namespace kiln {

// Bool and integer inputs accumulate into int64 unless `dtype` says
// otherwise; a given dtype converts the input first (as sum does). Floating
// values accumulate in double, as PyTorch's CPU kernels do.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// x with each of `dims` reversed (a dim may not repeat).
Tensor flip(const Tensor& x, const IntList& dims);

// x rotated by shifts[j] along dims[j]: the element at i moves to
// (i + shift) mod size. No dims: the flattened tensor is rotated by the one
// shift and given x's shape back. A dim may repeat (its shifts add up).
Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims = {});

}  // namespace kiln
