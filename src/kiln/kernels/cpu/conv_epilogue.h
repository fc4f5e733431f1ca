// What a fused convolution does to its output before storing it
// (ops/conv_fused_ops.cpp, jit/passes/fuse_conv_epilogue.cpp):
//   out = activation(conv(x, w) + bias + residual) * scale_after + shift_after
// with the residual optional and of the output's shape, the scale and shift
// after the activation single numbers (PP-LCNet's learnable affine map). Each convolution
// path applies it its own way (conv.cpp: oneDNN post-ops; kiln's depthwise
// and direct kernels: over each plane or image while it is in cache), all
// through apply_conv_epilogue where they compute it themselves.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// The activations a fused convolution carries; alpha and beta are their
// parameters where they have some:
//   clamp        min(max(v, alpha), beta)        (relu6: 0, 6)
//   hardsigmoid  clamp(alpha * v + beta, 0, 1)   (PyTorch: 1/6, 1/2)
//   hardswish    v * hardsigmoid(v)
//   silu         v * sigmoid(v)
//   leaky_relu   max(v > 0 ? v : alpha * v, beta)  (beta -inf: none; ONNX
//                LeakyRelu then Max with a constant: openwakeword's)
enum class EpilogueActivation {
  None,
  Relu,
  Clamp,
  HardSigmoid,
  HardSwish,
  Sigmoid,
  Silu,
  Tanh,
  LeakyRelu
};

struct ConvEpilogue {
  EpilogueActivation activation = EpilogueActivation::None;
  double alpha = 0.0, beta = 0.0;
  bool residual = false;  // a tensor of the output's shape is added before the activation
  double scale_after = 1.0, shift_after = 0.0;  // y * scale + shift after the activation

  bool has_affine_after() const { return scale_after != 1.0 || shift_after != 0.0; }
  bool empty() const {
    return activation == EpilogueActivation::None && !residual && !has_affine_after();
  }
};

// The activation named `name` ("none", "relu", "clamp", ...), or false.
bool epilogue_activation_from_name(std::string_view name, EpilogueActivation& activation);
const char* epilogue_activation_name(EpilogueActivation activation);

// out[i] = activation(out[i] + residual[i]) * scale_after + shift_after over
// n contiguous elements (residual null: none, whatever epilogue.residual
// says).
void apply_conv_epilogue_f32(float* out, const float* residual, int64_t n,
                             const ConvEpilogue& epilogue);
void apply_conv_epilogue_f64(double* out, const double* residual, int64_t n,
                             const ConvEpilogue& epilogue);
// Over a whole contiguous output of either float dtype, the residual any
// view of its shape.
void apply_conv_epilogue(const StridedView& out, const StridedView& residual,
                         const ConvEpilogue& epilogue);

// The residual's float32 data, contiguous (in `storage` when the view is not).
const float* contiguous_residual_f32(const StridedView& residual, std::vector<float>& storage);

}  // namespace kiln::cpu
