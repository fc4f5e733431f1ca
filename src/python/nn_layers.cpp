// kiln._C.nn's layer functions beyond the everyday ones: the convolutions
// of kiln/nn/conv_layers.h (conv1d, the transposed ones, string paddings),
// the resampling and padding of resample_layers.h, and group_norm /
// instance_norm (normalization.h), for kiln.nn.functional and the modules
// of kiln.nn.conv_resample: arguments converted, the C++ function called.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/nn/conv_layers.h"
#include "kiln/nn/normalization.h"
#include "kiln/nn/resample_layers.h"

namespace kiln::python {
namespace {

namespace F = kiln::nn::functional;
using nb::arg;

void bind_convolutions(nb::module_& m) {
  // Two overloads each: numeric paddings, or "same" / "valid".
  m.def(
      "conv1d",
      [](const Tensor& x, const Tensor& w, const OptTensor& b, const IntList& stride,
         const IntList& padding, const IntList& dilation, int64_t groups) {
        return F::conv1d(x, w, or_undefined(b), stride, padding, dilation, groups);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("dilation"), arg("groups"));
  m.def(
      "conv1d",
      [](const Tensor& x, const Tensor& w, const OptTensor& b, const IntList& stride,
         const std::string& padding, const IntList& dilation, int64_t groups) {
        return F::conv1d(x, w, or_undefined(b), stride, padding, dilation, groups);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("dilation"), arg("groups"));
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, const OptTensor& b, const IntList& stride,
         const std::string& padding, const IntList& dilation, int64_t groups) {
        return F::conv2d(x, w, or_undefined(b), stride, padding, dilation, groups);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("dilation"), arg("groups"));
  m.def(
      "conv_transpose1d",
      [](const Tensor& x, const Tensor& w, const OptTensor& b, const IntList& stride,
         const IntList& padding, const IntList& output_padding, int64_t groups,
         const IntList& dilation) {
        return F::conv_transpose1d(x, w, or_undefined(b), stride, padding, output_padding, groups,
                                   dilation);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("output_padding"), arg("groups"), arg("dilation"));
  m.def(
      "conv_transpose2d",
      [](const Tensor& x, const Tensor& w, const OptTensor& b, const IntList& stride,
         const IntList& padding, const IntList& output_padding, int64_t groups,
         const IntList& dilation) {
        return F::conv_transpose2d(x, w, or_undefined(b), stride, padding, output_padding, groups,
                                   dilation);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("output_padding"), arg("groups"), arg("dilation"));
  m.def("conv_transpose_output_padding", &F::conv_transpose_output_padding, arg("input"),
        arg("output_size"), arg("stride"), arg("padding"), arg("kernel_size"), arg("dilation"),
        arg("spatial_dims"));
}

void bind_resampling(nb::module_& m) {
  m.def("pad", &F::pad, arg("input"), arg("pad"), arg("mode") = "constant",
        arg("value").none() = nb::none());
  m.def(
      "interpolate",
      [](const Tensor& x, const std::optional<IntList>& size,
         const std::optional<std::vector<double>>& scale_factor, const std::string& mode,
         std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor,
         bool antialias) {
        return F::interpolate(x, {.size = size,
                                  .scale_factor = scale_factor,
                                  .mode = mode,
                                  .align_corners = align_corners,
                                  .recompute_scale_factor = recompute_scale_factor,
                                  .antialias = antialias});
      },
      arg("input"), arg("size").none(), arg("scale_factor").none(), arg("mode"),
      arg("align_corners").none(), arg("recompute_scale_factor").none(), arg("antialias"));
  m.def("pixel_shuffle", &F::pixel_shuffle, arg("input"), arg("upscale_factor"));
  m.def("pixel_unshuffle", &F::pixel_unshuffle, arg("input"), arg("downscale_factor"));
}

void bind_normalization(nb::module_& m) {
  m.def(
      "group_norm",
      [](const Tensor& x, int64_t num_groups, const OptTensor& weight, const OptTensor& bias,
         double eps) {
        return F::group_norm(x, num_groups, or_undefined(weight), or_undefined(bias), eps);
      },
      arg("input"), arg("num_groups"), arg("weight").none(), arg("bias").none(), arg("eps"));
  m.def(
      "instance_norm",
      [](const Tensor& x, const OptTensor& running_mean, const OptTensor& running_var,
         const OptTensor& weight, const OptTensor& bias, bool use_input_stats, double momentum,
         double eps) {
        return F::instance_norm(x, or_undefined(running_mean), or_undefined(running_var),
                                or_undefined(weight), or_undefined(bias), use_input_stats, momentum,
                                eps);
      },
      arg("input"), arg("running_mean").none(), arg("running_var").none(), arg("weight").none(),
      arg("bias").none(), arg("use_input_stats"), arg("momentum"), arg("eps"));
}

}  // namespace

void bind_nn_layers(nb::module_& m) {
  bind_convolutions(m);
  bind_resampling(m);
  bind_normalization(m);
}

}  // namespace kiln::python
