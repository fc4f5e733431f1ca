// The ops a model calls on every forward, bound one by one with typed
// arguments (kiln._C.linear, kiln._C.conv2d, ...). kiln._C.dispatch reaches
// every op too, but by name with a dict of attributes that it converts and
// checks on each call; these go straight to the C++ API functions (which hold
// their OpDef in a static), so the path from a layer's forward to the kernel
// is one nanobind call. kiln.nn's layers and functional use them; nothing
// here holds logic.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/einsum.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/mask.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln::python {
namespace {

using nb::arg;

void bind_activations(nb::module_& m) {
  using Unary = Tensor (*)(const Tensor&);
  m.def("relu", static_cast<Unary>(&relu), arg("input"));
  m.def("sigmoid", static_cast<Unary>(&sigmoid), arg("input"));
  m.def("tanh", static_cast<Unary>(&tanh), arg("input"));
  m.def("leaky_relu", &leaky_relu, arg("input"), arg("negative_slope") = 0.01);
  m.def("gelu", &gelu, arg("input"), arg("approximate") = "none");
  m.def("softmax", &softmax, arg("input"), arg("dim"));
  m.def("log_softmax", &log_softmax, arg("input"), arg("dim"));
}

void bind_linear_conv_pool(nb::module_& m) {
  m.def(
      "linear",
      [](const Tensor& x, const Tensor& w, OptTensor b) { return linear(x, w, or_undefined(b)); },
      arg("input"), arg("weight"), arg("bias").none() = nb::none());
  m.def("matmul", &matmul, arg("input"), arg("other"));
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, OptTensor b, IntList stride, IntList padding,
         IntList dilation, int64_t groups) {
        return conv2d(x, w, or_undefined(b), std::move(stride), std::move(padding),
                      std::move(dilation), groups);
      },
      arg("input"), arg("weight"), arg("bias").none(), arg("stride"), arg("padding"),
      arg("dilation"), arg("groups"));
  m.def("max_pool2d", &max_pool2d, arg("input"), arg("kernel_size"), arg("stride"), arg("padding"),
        arg("dilation"), arg("ceil_mode"));
  m.def("avg_pool2d", &avg_pool2d, arg("input"), arg("kernel_size"), arg("stride"), arg("padding"),
        arg("ceil_mode"), arg("count_include_pad"));
  m.def("adaptive_avg_pool2d", &adaptive_avg_pool2d, arg("input"), arg("output_size"));
}

void bind_shapes(nb::module_& m) {
  // Sizes may be SymInts (x.shape[0] while tracing with dynamic shapes).
  m.def(
      "reshape",
      [](const Tensor& x, nb::handle shape) {
        DimList dims = dims_of(shape);
        if (is_static(dims)) return reshape(x, to_static(dims));
        return reshape(x, std::span<const Dim>(dims));
      },
      arg("input"), arg("shape"));
  m.def("flatten", &flatten, arg("input"), arg("start_dim") = 0, arg("end_dim") = -1);
  m.def("t", &t, arg("input"));
}

// Not ops of the table: einsum composes ops (its operands a list), and
// masked_fill_ writes into its tensor and returns that same Python object.
void bind_einsum_masked_fill(nb::module_& m) {
  m.def("einsum", &einsum, arg("equation"), arg("operands"));
  m.def(
      "masked_fill_",
      [](nb::handle self, const Tensor& mask, const Tensor& value) {
        masked_fill_(nb::cast<const Tensor&>(self), mask, value);
        return nb::borrow(self);
      },
      arg("input"), arg("mask"), arg("value"));
  m.def(
      "masked_fill_",
      [](nb::handle self, const Tensor& mask, Scalar value) {
        masked_fill_(nb::cast<const Tensor&>(self), mask, value);
        return nb::borrow(self);
      },
      arg("input"), arg("mask"), arg("value"));
}

}  // namespace

void bind_ops(nb::module_& m) {
  bind_activations(m);
  bind_linear_conv_pool(m);
  bind_shapes(m);
  bind_einsum_masked_fill(m);
}

}  // namespace kiln::python
