// Copy with conversion between any two dtypes and any two layouts; fill.
#pragma once

#include "kiln/core/scalar.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out[i] = convert(in[i]); `in` broadcasts to out's shape. Float -> int
// truncates toward zero and anything -> bool is `!= 0`, as in C++ and PyTorch.
void copy_convert(const StridedView& out, const StridedView& in);
void fill(const StridedView& out, Scalar value);

}  // namespace kiln::cpu
