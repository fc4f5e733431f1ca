// Transposed 2-D convolution (PyTorch's conv_transpose2d): the gradient of
// conv2d with respect to its input, with the transposed convolution's input
// standing in for that gradient, plus a bias per output channel.
#pragma once

#include "kiln/kernels/cpu/conv.h"

namespace kiln::cpu {

// out [N, OC, OH, OW] (contiguous) from x [N, C, H, W] and w [C, OC / groups,
// KH, KW] (any strides), bias [OC] or absent. `p` is the geometry of the
// convolution it transposes (from out to x); output_padding is in out's size.
void conv_transpose2d(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv2dParams& p);

}  // namespace kiln::cpu
