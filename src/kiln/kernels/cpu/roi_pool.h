// max_roi_pool: Caffe's ROI max pooling (Fast R-CNN), ONNX's MaxRoiPool and
// torchvision's roi_pool. Each roi [batch, x1, y1, x2, y2] is scaled by
// spatial_scale and rounded (half away from zero) to whole pixels, split
// into pooled_h x pooled_w bins of equal real size, and each bin of every
// channel gives the maximum of the pixels it covers; a bin that covers none
// (outside the input) gives 0.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct RoiPoolParams {
  int64_t pooled_h = 1, pooled_w = 1;
  double spatial_scale = 1.0;
};

// out [R, C, pooled_h, pooled_w] (contiguous) from x [N, C, H, W] and rois
// [R, 5] (any strides, x's floating dtype). A batch index outside [0, N) or
// a coordinate that is not finite is an error.
void max_roi_pool(const StridedView& out, const StridedView& x, const StridedView& rois,
                  const RoiPoolParams& p);

// grad_x [N, C, H, W] (contiguous): each bin's gradient goes to the pixel
// its maximum came from (the first in row-major order on ties), summed over
// the bins and rois that picked it; empty bins route nothing.
void max_roi_pool_backward(const StridedView& grad_x, const StridedView& grad_out,
                           const StridedView& x, const StridedView& rois, const RoiPoolParams& p);

}  // namespace kiln::cpu
