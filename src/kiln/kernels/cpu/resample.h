// 2-D resampling of [N, C, H, W] planes: nearest (and nearest-exact) and
// bilinear upsampling (any output size, so downsampling too), forward and
// backward, with PyTorch's source-index rules, so results agree with
// F.interpolate to the rounding of its own arithmetic (float32 index math
// for float32, as PyTorch's CPU kernels do).
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct UpsampleParams {
  // The user's scale factor per spatial dim (h, w), or 0 when the sizes
  // decide it (input / output): PyTorch's scales_h / scales_w.
  double scales[2] = {0.0, 0.0};
  bool align_corners = false;  // bilinear only
  bool exact = false;          // nearest only: nearest-exact (pixel centers)
};

// out [N, C, OH, OW] (contiguous) from x [N, C, H, W] (any strides); float32
// or float64. H, W, OH, OW are positive.
void upsample_nearest2d(const StridedView& out, const StridedView& x, const UpsampleParams& p);
void upsample_bilinear2d(const StridedView& out, const StridedView& x, const UpsampleParams& p);

// dx [N, C, H, W] (contiguous) from dy [N, C, OH, OW] (any strides): each
// output's gradient goes back to the input elements it read, with the
// forward's weights.
void upsample_nearest2d_backward(const StridedView& dx, const StridedView& dy,
                                 const UpsampleParams& p);
void upsample_bilinear2d_backward(const StridedView& dx, const StridedView& dy,
                                  const UpsampleParams& p);

}  // namespace kiln::cpu
