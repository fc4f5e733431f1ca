// 3-D convolution over (N, C, D, H, W) and its backward halves: oneDNN for
// float32, direct loops for float64 (and for shapes oneDNN refuses: an
// empty batch or zero channels). The transposed convolution is the
// input-gradient kernel plus a bias, as in 2-D (conv_transpose.h).
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct Conv3dParams {
  int64_t stride[3] = {1, 1, 1};
  int64_t padding[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  int64_t groups = 1;
};

// out[N, OC, OD, OH, OW] (contiguous) = conv(x[N, C, D, H, W],
// w[OC, C / groups, KD, KH, KW]) + bias[OC]; shapes are already checked; x,
// w and bias may have any strides; bias may be absent.
void conv3d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv3dParams& p);
// dx[N, C, D, H, W] (contiguous) from dy[N, OC, OD, OH, OW] and w, with the
// forward's geometry.
void conv3d_backward_input(const StridedView& dx, const StridedView& dy, const StridedView& w,
                           const Conv3dParams& p);
// dw[OC, C / groups, KD, KH, KW] (contiguous) from dy and x.
void conv3d_backward_weight(const StridedView& dw, const StridedView& dy, const StridedView& x,
                            const Conv3dParams& p);
// out [N, OC, OD, OH, OW] from x [N, C, D, H, W] and w [C, OC / groups, KD,
// KH, KW]; `p` is the geometry of the convolution it transposes (from out
// to x); an output_padding of at least the stride is in out's size.
void conv_transpose3d(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv3dParams& p);

// The loops behind the above, for tests that cross-check oneDNN.
void conv3d_reference(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv3dParams& p);
void conv3d_backward_input_reference(const StridedView& dx, const StridedView& dy,
                                     const StridedView& w, const Conv3dParams& p);
void conv3d_backward_weight_reference(const StridedView& dw, const StridedView& dy,
                                      const StridedView& x, const Conv3dParams& p);

}  // namespace kiln::cpu
