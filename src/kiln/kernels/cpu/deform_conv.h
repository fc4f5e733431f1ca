// Deformable convolution v1 and v2 (Dai et al. 2017, Zhu et al. 2019):
// ONNX's DeformConv and torchvision's deform_conv2d. Tap (i, j) of the
// kernel at output (oh, ow) reads x at
//   y = oh * stride_h - pad_h + i * dilation_h + offset[.., 2k, oh, ow]
//   x = ow * stride_w - pad_w + j * dilation_w + offset[.., 2k + 1, oh, ow]
// (k = i * kernel_w + j) by bilinear interpolation, zero outside the input,
// times mask[.., k, oh, ow] when a mask is given. Channels are split into
// offset_groups, each with its own offsets and mask. The sampled values
// form columns (im2col), and a GEMM per group with the weight gives the
// output, as torchvision and ONNX Runtime compute it.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct DeformGeometry {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t offset_groups = 1;
};

// columns [N, C * kernel_h * kernel_w, OH * OW] (contiguous) from x
// [N, C, H, W], offset [N, offset_groups * 2 * kh * kw, OH, OW] and mask
// [N, offset_groups * kh * kw, OH, OW] (absent: data == nullptr); row
// c * kh * kw + k holds channel c sampled at tap k. Float32 or float64,
// any strides for the inputs.
void deform_im2col(const StridedView& columns, const StridedView& x, const StridedView& offset,
                   const StridedView& mask, const DeformGeometry& g);

// The gradients of deform_im2col's columns w.r.t. x, offset and mask (each
// contiguous; grad_mask absent when mask is) for grad_columns of the
// columns' shape.
void deform_im2col_backward(const StridedView& grad_x, const StridedView& grad_offset,
                            const StridedView& grad_mask, const StridedView& grad_columns,
                            const StridedView& x, const StridedView& offset,
                            const StridedView& mask, const DeformGeometry& g);

// out [N, M, OH, OW] (contiguous) = the deformable convolution of x with
// weight [M, C / groups, kh, kw] plus bias [M] (absent: data == nullptr):
// deform_im2col per image, then matmul() per group.
void deform_conv2d(const StridedView& out, const StridedView& x, const StridedView& weight,
                   const StridedView& offset, const StridedView& mask, const StridedView& bias,
                   const DeformGeometry& g, int64_t groups);

}  // namespace kiln::cpu
