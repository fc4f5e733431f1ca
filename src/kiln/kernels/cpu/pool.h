// 2-D pooling: oneDNN for float32 where its semantics match PyTorch's,
// reference loops for float64 and the remaining cases.
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  bool count_include_pad = true;  // avg only
};

// x: [N, C, H, W], any strides; out: [N, C, OH, OW], contiguous. The output
// size already says whether ceil_mode added a last, partial window.
void max_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void avg_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p);
// Window i covers [floor(i * H / OH), ceil((i + 1) * H / OH)).
void adaptive_avg_pool2d(const StridedView& out, const StridedView& x);

// The reference loops behind the above, for tests that cross-check them.
void max_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void avg_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void adaptive_avg_pool2d_reference(const StridedView& out, const StridedView& x);

}  // namespace kiln::cpu
