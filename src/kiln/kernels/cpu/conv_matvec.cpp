// A 1x1 float32 convolution over a 1x1 image at batch 1 (the two FCs of
// every squeeze-excitation block, a classifier head written as a
// convolution: PP-LCNet's 512 -> 1280) is a matrix-vector product: kiln's
// matvec_f32, as linear takes at batch 1. oneDNN ran PP-LCNet's 512 ->
// 1280 head in twice ONNX Runtime's time (229 us against 113, one thread)
// and each small FC of the squeeze-excitation blocks at 10-20 us of fixed
// cost. Both layouts are the same memory here, so channels-last takes it
// too. Sums in matvec_f32's order (within float32 tolerance of oneDNN's).
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/matmul.h"

namespace kiln::cpu {

bool conv2d_matvec_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                               const Conv2dParams& p) {
  if (out.dtype != DType::Float32 || x.dtype != DType::Float32 || w.dtype != DType::Float32)
    return false;
  if (x.ndim != 4 || out.ndim != 4 || x.shape[0] != 1 || !out.is_contiguous()) return false;
  // [1, C, 1, 1] or channels-last [1, 1, 1, C]: C elements either way.
  const int64_t C = w.shape[1], OC = w.shape[0];
  return p.groups == 1 && w.shape[2] == 1 && w.shape[3] == 1 && w.strides[1] == 1 &&
         p.padding[0] == 0 && p.padding[1] == 0 && x.numel() == C && out.numel() == OC && C > 0 &&
         (p.channels_last ? x.shape[3] == C : x.shape[1] == C) &&
         (p.channels_last ? x.shape[1] * x.shape[2] == 1 : x.shape[2] * x.shape[3] == 1);
}

void conv2d_matvec_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                       const StridedView& residual) {
  const int64_t C = w.shape[1], OC = w.shape[0];
  const int channel_dim = p.channels_last ? 3 : 1;
  const float* xp = x.ptr<const float>();
  thread_local std::vector<float> x_copy, residual_copy;
  if (x.strides[channel_dim] != 1) {
    x_copy.resize(size_t(C));
    for (int64_t c = 0; c < C; ++c)
      x_copy[size_t(c)] = xp[c * x.strides[channel_dim]];
    xp = x_copy.data();
  }
  const float* bias_data = bias.data ? bias.ptr<const float>() : nullptr;
  const int64_t bias_stride = bias.data ? bias.strides[0] : 0;
  matvec_f32(out.ptr<float>(), xp, w.ptr<const float>(), w.strides[0], bias_data, bias_stride, OC,
             C);
  if (!residual.data && epilogue.empty()) return;
  const float* residual_data =
      residual.data ? contiguous_residual_f32(residual, residual_copy) : nullptr;
  apply_conv_epilogue_f32(out.ptr<float>(), residual_data, OC, epilogue);
}

}  // namespace kiln::cpu
