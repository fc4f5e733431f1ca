// 3-D max and average pooling over (N, C, D, H, W) and their backward:
// plain loops over (n, c) volumes (each writes only its own, so volumes run
// in parallel), with PyTorch's window rules (pool.h says them for 2-D).
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct Pool3dParams {
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t padding[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  bool count_include_pad = true;  // avg only
};

// x: [N, C, D, H, W], any strides; out: [N, C, OD, OH, OW], contiguous. The
// output size already says whether ceil_mode added a last, partial window.
// Max pooling: NaN wins, ties keep the first; any numeric dtype.
void max_pool3d(const StridedView& out, const StridedView& x, const Pool3dParams& p);
void avg_pool3d(const StridedView& out, const StridedView& x, const Pool3dParams& p);

// dx [N, C, D, H, W] (contiguous, floating) from dy [N, C, OD, OH, OW] with
// the forward's parameters; max pooling reads x to find each window's max
// again and sends the gradient there.
void max_pool3d_backward(const StridedView& dx, const StridedView& dy, const StridedView& x,
                         const Pool3dParams& p);
void avg_pool3d_backward(const StridedView& dx, const StridedView& dy, const Pool3dParams& p);

}  // namespace kiln::cpu
