// The ops a model calls on every forward, bound one by one with typed
// arguments (kiln._C.linear, kiln._C.conv2d, ...). kiln._C.dispatch reaches
// every op too, but by name with a dict of attributes that it converts and
// checks on each call; these go straight to the C++ API functions (which hold
// their OpDef in a static), so the path from a layer's forward to the kernel
// is one nanobind call. kiln.nn's layers and functional use them; nothing
// here holds logic. Also here: the functions that are compositions, not ops
// of the table (einsum, scatter's in-place and index forms, the norms).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/einsum.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/mask.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/norms.h"
#include "kiln/ops/packed_weights.h"
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

// self.fn_(args...) for a C++ in-place function, returning self's object.
template <typename... Args>
auto in_place(const Tensor& (*fn)(const Tensor&, Args...)) {
  return [fn](nb::handle self, Args... args) {
    fn(nb::cast<const Tensor&>(self), std::forward<Args>(args)...);
    return nb::borrow(self);
  };
}

// scatter and the indexing compositions (ops/indexing.h); their PyTorch
// argument forms are python/kiln/_math_forms.py's.
void bind_scatter(nb::module_& m) {
  using TensorSrc =
      Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&, const std::string&);
  using ScalarSrc = Tensor (*)(const Tensor&, int64_t, const Tensor&, Scalar, const std::string&);
  using TensorSrc_ =
      const Tensor& (*)(const Tensor&, int64_t, const Tensor&, const Tensor&, const std::string&);
  using ScalarSrc_ =
      const Tensor& (*)(const Tensor&, int64_t, const Tensor&, Scalar, const std::string&);
  m.def("scatter", static_cast<TensorSrc>(&scatter), arg("input"), arg("dim"), arg("index"),
        arg("src"), arg("reduce"));
  m.def("scatter", static_cast<ScalarSrc>(&scatter), arg("input"), arg("dim"), arg("index"),
        arg("value"), arg("reduce"));
  m.def("scatter_", in_place(static_cast<TensorSrc_>(&scatter_)), arg("input"), arg("dim"),
        arg("index"), arg("src"), arg("reduce"));
  m.def("scatter_", in_place(static_cast<ScalarSrc_>(&scatter_)), arg("input"), arg("dim"),
        arg("index"), arg("value"), arg("reduce"));
}

void bind_index_writes(nb::module_& m) {
  using FillTensor = Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);
  using FillScalar = Tensor (*)(const Tensor&, int64_t, const Tensor&, Scalar);
  using FillTensor_ = const Tensor& (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);
  using FillScalar_ = const Tensor& (*)(const Tensor&, int64_t, const Tensor&, Scalar);
  m.def("index_fill", static_cast<FillTensor>(&index_fill), arg("input"), arg("dim"), arg("index"),
        arg("value"));
  m.def("index_fill", static_cast<FillScalar>(&index_fill), arg("input"), arg("dim"), arg("index"),
        arg("value"));
  m.def("index_fill_", in_place(static_cast<FillTensor_>(&index_fill_)), arg("input"), arg("dim"),
        arg("index"), arg("value"));
  m.def("index_fill_", in_place(static_cast<FillScalar_>(&index_fill_)), arg("input"), arg("dim"),
        arg("index"), arg("value"));
  m.def("index_copy", &index_copy, arg("input"), arg("dim"), arg("index"), arg("source"));
  m.def("index_copy_", in_place(&index_copy_), arg("input"), arg("dim"), arg("index"),
        arg("source"));
  m.def("take_along_dim", &take_along_dim, arg("input"), arg("indices"),
        arg("dim").none() = nb::none());
  m.def("masked_select", &masked_select, arg("input"), arg("mask"));
  m.def("masked_scatter", &masked_scatter, arg("input"), arg("mask"), arg("source"));
  m.def("masked_scatter_", in_place(&masked_scatter_), arg("input"), arg("mask"), arg("source"));
}

// lerp, the norms and cdist (ops/norms.h) and the OpenMP thread count.
void bind_lerp_norms_threads(nb::module_& m) {
  using TensorWeight = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
  using ScalarWeight = Tensor (*)(const Tensor&, const Tensor&, Scalar);
  m.def("lerp", static_cast<TensorWeight>(&lerp), arg("input"), arg("end"), arg("weight"));
  m.def("lerp", static_cast<ScalarWeight>(&lerp), arg("input"), arg("end"), arg("weight"));
  using TensorWeight_ = const Tensor& (*)(const Tensor&, const Tensor&, const Tensor&);
  using ScalarWeight_ = const Tensor& (*)(const Tensor&, const Tensor&, Scalar);
  m.def("lerp_", in_place(static_cast<TensorWeight_>(&lerp_)), arg("input"), arg("end"),
        arg("weight"));
  m.def("lerp_", in_place(static_cast<ScalarWeight_>(&lerp_)), arg("input"), arg("end"),
        arg("weight"));
  m.def("vector_norm", &vector_norm, arg("x"), arg("ord"), arg("dim"), arg("keepdim"),
        arg("dtype").none());
  m.def("matrix_norm", &matrix_norm, arg("A"), arg("ord"), arg("dim"), arg("keepdim"),
        arg("dtype").none());
  m.def("linalg_norm", &linalg_norm, arg("A"), arg("ord").none(), arg("dim").none(), arg("keepdim"),
        arg("dtype").none());
  m.def("norm", &norm, arg("input"), arg("p").none(), arg("dim").none(), arg("keepdim"),
        arg("dtype").none());
  m.def("cdist", &cdist, arg("x1"), arg("x2"), arg("p"));
  m.def("set_num_threads", &cpu::set_num_threads, arg("num"));
  m.def("get_num_threads", &cpu::max_threads);
  m.def("set_team_busy_fallback", &cpu::set_team_busy_fallback, arg("on"));
  m.def("team_busy_fallback", &cpu::team_busy_fallback);
  m.def("team_busy_fallbacks", &cpu::team_busy_fallbacks);
  m.def("team_busy", &cpu::team_busy);
  m.def("prefer_one_thread_for", &cpu::prefer_one_thread_for, arg("ns"));
  m.def("set_eager_weight_cache_limit", &set_eager_weight_cache_limit, arg("max_bytes"));
  m.def("clear_eager_weight_cache", &clear_eager_weight_cache);
  m.def("eager_weight_cache_stats", [] {
    const EagerWeightCacheStats s = eager_weight_cache_stats();
    nb::dict d;
    d["hits"] = s.hits;
    d["packs"] = s.packs;
    d["entries"] = s.entries;
    d["bytes"] = s.bytes;
    d["max_bytes"] = s.max_bytes;
    return d;
  });
}

}  // namespace

void bind_ops(nb::module_& m) {
  bind_activations(m);
  bind_linear_conv_pool(m);
  bind_shapes(m);
  bind_einsum_masked_fill(m);
  bind_scatter(m);
  bind_index_writes(m);
  bind_lerp_norms_threads(m);
}

}  // namespace kiln::python
