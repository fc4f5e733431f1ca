// 2-D pooling. Plain loops serve max/avg pooling (faster than oneDNN on
// NCHW, see bench/kernel_choices.cpp); oneDNN serves evenly dividing
// adaptive pooling and remains available for the benchmark and cross-checks.
#pragma once

#include <algorithm>
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

// The input rows [h0, h1) and columns [w0, w1) that output (oh, ow) of an
// average pool reads, and PyTorch's divisor for it: the window clipped to
// the padded input (so ceil_mode's overhang never counts), or to the input
// itself when padding is not counted. Shared by forward and backward.
struct AvgWindow {
  int64_t h0, h1, w0, w1, count;
};
inline AvgWindow avg_pool_window(int64_t oh, int64_t ow, int64_t H, int64_t W,
                                 const Pool2dParams& p) {
  int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], H + p.padding[0]);
  int64_t w1 = std::min(w0 + p.kernel[1], W + p.padding[1]);
  const int64_t padded_count = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, H);
  w1 = std::min(w1, W);
  return {h0, h1, w0, w1, p.count_include_pad ? padded_count : (h1 - h0) * (w1 - w0)};
}

// x: [N, C, H, W], any strides; out: [N, C, OH, OW], contiguous. The output
// size already says whether ceil_mode added a last, partial window.
void max_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p);
// The same channels-last: x [N, H, W, C], any strides; out [N, OH, OW, C],
// contiguous (a chain of channels-last convolutions, carry_conv_layout).
// Eight or more channels at a time, NaN winning as in max_pool2d.
void max_pool2d_nhwc(const StridedView& out, const StridedView& x, const Pool2dParams& p);
// max_pool2d's values and, in `indices` (int64, contiguous, out's shape),
// where each came from: ih * W + iw within its (n, c) plane, as PyTorch's
// return_indices (the first max; NaN wins).
void max_pool2d_with_indices(const StridedView& out, const StridedView& indices,
                             const StridedView& x, const Pool2dParams& p);
void avg_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p);
// Window i covers [floor(i * H / OH), ceil((i + 1) * H / OH)).
void adaptive_avg_pool2d(const StridedView& out, const StridedView& x);

// oneDNN's float32 pooling, for the benchmark and the cross-check tests;
// avg only where avg_pool2d_onednn_matches says its divisor agrees with PyTorch's.
void max_pool2d_onednn(const StridedView& out, const StridedView& x, const Pool2dParams& p);
bool avg_pool2d_onednn_matches(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void avg_pool2d_onednn(const StridedView& out, const StridedView& x, const Pool2dParams& p);

// Backward (pool_backward.cpp): dx [N, C, H, W] (contiguous, floating) from
// dy [N, C, OH, OW] with the forward's parameters; max pooling also reads x
// to find each window's max (the first one, NaN winning, as the forward).
void max_pool2d_backward(const StridedView& dx, const StridedView& dy, const StridedView& x,
                         const Pool2dParams& p);
void avg_pool2d_backward(const StridedView& dx, const StridedView& dy, const Pool2dParams& p);
void adaptive_avg_pool2d_backward(const StridedView& dx, const StridedView& dy);

// float32 with contiguous rows (pool_max_f32.cpp): max_pool2d's fast path,
// the same results as the reference loop.
bool max_pool2d_f32_applies(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void max_pool2d_f32(const StridedView& out, const StridedView& x, const Pool2dParams& p);

// adaptive_avg_pool2d to 1x1 of float32 planes stored whole
// (pool_global_f32.cpp): a vectorized sum per plane.
bool global_avg_pool2d_f32_applies(const StridedView& out, const StridedView& x);
void global_avg_pool2d_f32(const StridedView& out, const StridedView& x);

// The reference loops behind the above, for tests that cross-check them.
void max_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void avg_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p);
void adaptive_avg_pool2d_reference(const StridedView& out, const StridedView& x);

}  // namespace kiln::cpu
