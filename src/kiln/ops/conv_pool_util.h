// Internal to the conv/pool family: the geometry helpers conv_pool_ops.cpp
// defines and conv_pool_grads.cpp (the backward ops and rules) shares, so
// forward and backward agree about every size.
#pragma once

#include <array>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/op.h"
#include "kiln/ops/registry.h"

namespace kiln::conv_pool {

// x as [N, C, H, W] (a 3-D input is one sample).
cpu::StridedView batched(const cpu::StridedView& v);
// A one-element list means the same value for height and width; `op` and
// `name` go into the error for a list of another length.
std::array<int64_t, 2> pair_of(const IntList& values, const char* op, const char* name);
// stride, padding, dilation and groups, checked, with `op` in the errors.
cpu::Conv2dParams conv_params(const Attrs& attrs, const char* op = "conv2d");
// The pooling parameters of `def` (max_pool2d or avg_pool2d) for input x.
cpu::Pool2dParams params_for(const OpDef& def, const cpu::StridedView& x, const Attrs& attrs,
                             bool has_dilation);

// PyTorch's pooling_output_shape: with ceil_mode the last window may be
// partial, but must start inside the input or its left padding.
Dim pooled_size(const Dim& in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                bool ceil_mode);

// The 3-D family (conv3d_ops.cpp, pool3d_ops.cpp): a one-element list means
// the same value for depth, height and width.
std::array<int64_t, 3> triple_of(const IntList& values, const char* op, const char* name);
void check_volume_input(const TensorMeta& x, const char* op);
// x as [N, C, D, H, W] (a 4-D input is one sample).
cpu::StridedView batched5(const cpu::StridedView& v);
// [N,] channels, spatial... (N when x is batched).
DimList volume_output_shape(const TensorMeta& x, const Dim& channels, const DimList& spatial);
// The attributes of a convolution (conv2d, conv3d and their backward ops)
// and of a pooling (max and avg, 2-D and 3-D), for their C++ wrappers.
inline Attrs conv_attrs(IntList stride, IntList padding, IntList dilation, int64_t groups) {
  return {{"stride", std::move(stride)},
          {"padding", std::move(padding)},
          {"dilation", std::move(dilation)},
          {"groups", groups}};
}
inline Attrs max_pool_attrs(IntList kernel_size, IntList stride, IntList padding, IntList dilation,
                            bool ceil_mode) {
  return {{"kernel_size", std::move(kernel_size)},
          {"stride", std::move(stride)},
          {"padding", std::move(padding)},
          {"dilation", std::move(dilation)},
          {"ceil_mode", ceil_mode}};
}
inline Attrs avg_pool_attrs(IntList kernel_size, IntList stride, IntList padding, bool ceil_mode,
                            bool count_include_pad) {
  return {{"kernel_size", std::move(kernel_size)},
          {"stride", std::move(stride)},
          {"padding", std::move(padding)},
          {"ceil_mode", ceil_mode},
          {"count_include_pad", count_include_pad}};
}
// conv_attrs with the size a backward op gives (input_size, weight_size).
inline Attrs conv_backward_attrs(const char* size_name, IntList size, IntList stride,
                                 IntList padding, IntList dilation, int64_t groups) {
  Attrs attrs = conv_attrs(std::move(stride), std::move(padding), std::move(dilation), groups);
  attrs.set(size_name, std::move(size));
  return attrs;
}

void register_conv3d_ops(OpRegistry& registry);
void register_pool3d_ops(OpRegistry& registry);
// max_pool2d_with_indices (max_pool_indices_ops.cpp).
void register_max_pool_indices_ops(OpRegistry& registry);

// Backward rules (conv_pool_grads.cpp).
std::vector<Tensor> conv2d_grad(const GradContext& ctx);
std::vector<Tensor> max_pool2d_grad(const GradContext& ctx);
std::vector<Tensor> avg_pool2d_grad(const GradContext& ctx);
std::vector<Tensor> adaptive_avg_pool2d_grad(const GradContext& ctx);

// conv2d_backward_input, conv2d_backward_weight and the pooling backward ops.
void register_backward_ops(OpRegistry& registry);
// conv_transpose2d (conv_transpose_ops.cpp).
void register_conv_transpose_ops(OpRegistry& registry);

}  // namespace kiln::conv_pool
