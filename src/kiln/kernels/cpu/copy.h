// Copy with conversion between any two dtypes and any two layouts; fill.
#pragma once

#include "kiln/core/scalar.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out[i] = convert(in[i]); `in` broadcasts to out's shape. Float -> int
// truncates toward zero and anything -> bool is `!= 0`, as in C++ and PyTorch.
void copy_convert(const StridedView& out, const StridedView& in);
void fill(const StridedView& out, Scalar value);

// copy_convert's path for float32 images between NCHW and NHWC (one a
// permuted view of the other's memory order, out contiguous, same shape):
// a blocked transpose per image (transpose_f32.cpp). False, having done
// nothing, for anything else.
bool copy_image_transposed_f32(const StridedView& out, const StridedView& in);

}  // namespace kiln::cpu
