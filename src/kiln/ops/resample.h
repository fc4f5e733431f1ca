// Resampling ops: nearest and bilinear upsampling of [N, C, H, W] inputs
// (to any size, so downsampling too), ONNX's N-D resize, and padding (PyTorch's F.pad, four
// modes). F.interpolate and the padding layers are built on them (nn/).
#pragma once

#include <optional>
#include <string>

#include "kiln/core/dim.h"
#include "kiln/core/tensor.h"

namespace kiln {

// output_size is [OH, OW]. scales_h / scales_w are the scale factors the
// user asked for (PyTorch uses 1 / scale for the source index when given,
// input / output size otherwise). exact: "nearest-exact" (pixel centers).
Tensor upsample_nearest2d(const Tensor& x, const DimList& output_size,
                          std::optional<double> scales_h = std::nullopt,
                          std::optional<double> scales_w = std::nullopt, bool exact = false);
Tensor upsample_bilinear2d(const Tensor& x, const DimList& output_size, bool align_corners = false,
                           std::optional<double> scales_h = std::nullopt,
                           std::optional<double> scales_w = std::nullopt);

// ONNX Resize's attributes (its names and defaults).
struct ResizeOptions {
  std::string mode = "nearest";  // "nearest", "linear", "cubic"
  std::string coordinate_transformation_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
  bool antialias = false;
};

// ONNX Resize over every dim of x to output_size (one size per dim). roi
// ([starts, ends], tf_crop_and_resize only) and scales (one per dim; the
// coordinates use them where given, output / input size elsewhere) are
// floating 1-D tensors or undefined.
Tensor resize(const Tensor& x, const DimList& output_size, const Tensor& roi, const Tensor& scales,
              const ResizeOptions& options);

// pad is PyTorch's: (before, after) pairs starting from the last dim, so
// {1, 2} pads the last dim, {1, 2, 3, 4} the last two. mode is "constant"
// (negative padding crops), "reflect", "replicate" or "circular"; value is
// the constant (None: 0) and is refused by the other modes.
Tensor pad(const Tensor& x, IntList pad, const std::string& mode = "constant",
           std::optional<double> value = std::nullopt);

}  // namespace kiln
