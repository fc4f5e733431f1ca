// Casting, copying and filling.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

Tensor to(const Tensor& x, DType dtype);  // a converted copy; x itself when the dtype matches
Tensor clone(const Tensor& x);            // always a new contiguous tensor
Tensor contiguous(const Tensor& x);       // x itself when already contiguous
// Copies src into dst (broadcasting, converting the dtype); returns dst.
const Tensor& copy_(const Tensor& dst, const Tensor& src);
const Tensor& fill_(const Tensor& x, Scalar value);
const Tensor& zero_(const Tensor& x);

// A Python number as an operand: a 0-d tensor that takes part in type
// promotion as a number (x_int32 + 2 stays int32; x_int32 + 2.5 is float32).
Tensor wrap_scalar(Scalar value);

}  // namespace kiln
