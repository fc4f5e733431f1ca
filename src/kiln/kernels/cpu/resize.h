// N-D resizing with ONNX Resize's semantics: per axis, an output index maps
// to a source coordinate (coordinate_transformation_mode), and the
// coordinate to input indices and weights (nearest with a rounding rule,
// linear, or cubic, optionally antialiased). Resizing is separable: one pass
// per resized axis, each a weighted gather along that axis. The backward
// is the adjoint: the same passes, transposed, in reverse order.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct ResizeParams {
  enum class Mode { Nearest, Linear, Cubic };
  enum class Transform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNN,
    TfCropAndResize,
  };
  enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

  Mode mode = Mode::Nearest;
  Transform transform = Transform::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;      // weights of taps outside the input: 0, then renormalized
  double extrapolation_value = 0.0;  // tf_crop_and_resize, outside [0, in - 1]
  bool antialias = false;            // linear / cubic: the filter stretched by 1 / scale
  // Per dim: the scale (output / input length, which the coordinates use);
  // empty: each dim's output size / input size.
  std::vector<double> scales;
  // tf_crop_and_resize: [start of each dim, end of each dim], in [0, 1].
  std::vector<double> roi;
};

// The values of a 1-D float32 / float64 view, as doubles.
std::vector<double> read_doubles(const StridedView& values);

// out (contiguous) from x (any strides), both of one rank. Nearest takes any
// dtype; linear and cubic float32 / float64.
void resize(const StridedView& out, const StridedView& x, const ResizeParams& p);

// dx (contiguous, the forward's input shape) from dy (any strides, the
// forward's output shape): each output's gradient goes back to the inputs
// it read, with the forward's weights. float32 / float64.
void resize_backward(const StridedView& dx, const StridedView& dy, const ResizeParams& p);

}  // namespace kiln::cpu
