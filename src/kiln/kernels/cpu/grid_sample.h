// grid_sample: samples [N, C, H, W] planes at the points a grid of
// normalized (x, y) coordinates in [-1, 1] names (torch's
// F.grid_sample, ONNX's GridSample), with PyTorch's CPU rules for
// unnormalizing, padding and interpolating, in the input's own precision.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class GridSampleMode { Bilinear, Nearest, Bicubic };
enum class GridSamplePadding { Zeros, Border, Reflection };

struct GridSampleParams {
  GridSampleMode mode = GridSampleMode::Bilinear;
  GridSamplePadding padding = GridSamplePadding::Zeros;
  // -1 and 1 are the centers of the corner pixels (true) or their outer
  // edges (false).
  bool align_corners = false;
};

// out [N, C, OH, OW] (contiguous) from x [N, C, H, W] and grid [N, OH, OW, 2]
// (any strides), all float32 or all float64. A point outside the input
// reads zeros, the nearest border pixel, or the input reflected at its
// borders, as `padding` says.
void grid_sample2d(const StridedView& out, const StridedView& x, const StridedView& grid,
                   const GridSampleParams& p);

}  // namespace kiln::cpu
