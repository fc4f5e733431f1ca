// Ops that keep some elements and replace the others, by position or by a
// mask, with PyTorch's names, arguments and defaults: triu, tril,
// masked_fill and the in-place masked_fill_.
#pragma once

#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"

namespace kiln {

// The upper (lower) triangle of the matrices in the last two dims: elements
// with j - i >= diagonal (<= diagonal) kept, the others 0.
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);

// x with `value` where the bool `mask` is true; mask broadcasts with x (the
// result has the broadcast shape). value is a number or a 0-d tensor,
// converted to x's dtype; a 0-d tensor value gets a gradient (the sum of the
// result's gradient where the mask is true).
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// In place: mask must broadcast to x's shape.
const Tensor& masked_fill_(const Tensor& x, const Tensor& mask, const Tensor& value);
const Tensor& masked_fill_(const Tensor& x, const Tensor& mask, Scalar value);

}  // namespace kiln
