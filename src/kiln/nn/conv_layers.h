// The convolutions beyond Conv2d: Conv1d, ConvTranspose1d and
// ConvTranspose2d, as functions (torch.nn.functional's conv1d,
// conv_transpose1d, conv_transpose2d) and modules with PyTorch's arguments,
// defaults, parameter shapes and initialization. The 1-D forms are the 2-D
// ops over a height of 1 (an unsqueeze and a squeeze, views), so they share
// their kernels, gradients, tracing and ONNX export.
#pragma once

#include <optional>
#include <string>

#include "kiln/nn/module.h"
#include "kiln/ops/conv_pool.h"

namespace kiln::nn {
namespace functional {

using kiln::conv2d;
using kiln::conv_transpose2d;

// x [N, C, L] or [C, L]; w [OC, C / groups, K]. One-element lists.
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntList stride = {1},
              IntList padding = {0}, IntList dilation = {1}, int64_t groups = 1);
// padding "valid" (none) or "same" (output length = input length; stride 1
// only). An odd total padding puts the extra element on the right, as in
// PyTorch.
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
              const std::string& padding, IntList dilation = {1}, int64_t groups = 1);

// conv2d with padding "valid" or "same", as conv1d's.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
              const std::string& padding, IntList dilation = {1, 1}, int64_t groups = 1);

// x [N, C, L] or [C, L]; w [C, OC / groups, K]. PyTorch's argument order.
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b = {},
                        IntList stride = {1}, IntList padding = {0}, IntList output_padding = {0},
                        int64_t groups = 1, IntList dilation = {1});

// The output_padding that gives a transposed convolution of x the requested
// output_size (its spatial sizes, or with the batch and channel dims too),
// as ConvTranspose*d's forward(x, output_size) computes it; a ValueError
// naming the valid range when no output_padding gives it.
IntList conv_transpose_output_padding(const Tensor& x, const IntList& output_size,
                                      const IntList& stride, const IntList& padding,
                                      const IntList& kernel_size, const IntList& dilation,
                                      int64_t spatial_dims);

}  // namespace functional

// Conv1d: weight [out, in / groups, k], bias [out], initialized as Conv2d's.
// padding is a number or "same"/"valid"; padding_mode "zeros", "reflect",
// "replicate" or "circular" (the last three pad with F.pad, then convolve).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true,
         std::string padding_mode = "zeros");
  // padding "same" or "valid".
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
         std::string padding, int64_t dilation = 1, int64_t groups = 1, bool bias = true,
         std::string padding_mode = "zeros");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding, dilation, groups;
  std::string padding_string;  // "same" or "valid", or "" for a number
  std::string padding_mode;
  Tensor weight, bias;

 private:
  void init(bool with_bias);
};

// Shared by ConvTranspose1d and ConvTranspose2d: weight [in, out / groups,
// *kernel], bias [out]; PyTorch initializes it as Conv's, with fan_in taken
// from weight's dim 1 (out / groups * kernel area). Only padding_mode
// "zeros" exists. forward(x, output_size) picks the output_padding that
// gives that size.
class ConvTranspose : public Module {
 public:
  Tensor forward(const Tensor& x) override { return forward(x, {}); }
  virtual Tensor forward(const Tensor& x, const IntList& output_size) = 0;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  IntList kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor weight, bias;

 protected:
  ConvTranspose(const char* type_name, int64_t spatial_dims, int64_t in_channels,
                int64_t out_channels, IntList kernel_size, IntList stride, IntList padding,
                IntList output_padding, int64_t groups, bool bias, IntList dilation,
                const std::string& padding_mode);
  // The module's output_padding, or the one that gives output_size.
  IntList output_padding_for(const Tensor& x, const IntList& output_size) const;
  int64_t spatial_dims;
};

class ConvTranspose1d : public ConvTranspose {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                  int64_t groups = 1, bool bias = true, int64_t dilation = 1,
                  const std::string& padding_mode = "zeros");
  using ConvTranspose::forward;
  Tensor forward(const Tensor& x, const IntList& output_size) override;
};

// One-element lists apply to both dims.
class ConvTranspose2d : public ConvTranspose {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntList kernel_size,
                  IntList stride = {1}, IntList padding = {0}, IntList output_padding = {0},
                  int64_t groups = 1, bool bias = true, IntList dilation = {1},
                  const std::string& padding_mode = "zeros");
  using ConvTranspose::forward;
  Tensor forward(const Tensor& x, const IntList& output_size) override;
};

}  // namespace kiln::nn
