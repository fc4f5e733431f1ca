// kiln._C.Tensor: a handle to kiln::Tensor. Metadata, NumPy export, autograd
// entry points and the operators, each one call into the C++ API.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"

namespace kiln::python {
namespace {

nb::dlpack::dtype dlpack_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return nb::dtype<bool>();
    case DType::Int32:
      return nb::dtype<int32_t>();
    case DType::Int64:
      return nb::dtype<int64_t>();
    case DType::Float64:
      return nb::dtype<double>();
    case DType::Float32:
      break;
  }
  return nb::dtype<float>();
}

// A NumPy array over the tensor's memory; the capsule holds a handle to the
// tensor, so the storage lives as long as the array does.
nb::object to_numpy(const Tensor& t) {
  KILN_CHECK(!t.requires_grad(),
             "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
             "instead.");
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  nb::capsule owner(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<nb::numpy> array(t.data_ptr(), shape.size(), shape.data(), owner, t.strides().data(),
                               dlpack_dtype_of(t.dtype()));
  return array.cast();
}

nb::tuple shape_of(const Tensor& t) {
  nb::list dims;
  for (int64_t d : t.shape())
    dims.append(d);
  return nb::tuple(dims);
}

std::optional<Tensor> grad_of(const Tensor& t) {
  Tensor g = grad(t);
  if (!g.defined()) return std::nullopt;
  return g;
}

void run_backward(const Tensor& t, std::optional<Tensor> gradient, bool retain_graph,
                  bool create_graph) {
  nb::gil_scoped_release no_gil;
  backward(t, gradient.value_or(Tensor()), retain_graph, create_graph);
}

// Binary operators: a Tensor or a Python number on the other side; anything
// else returns NotImplemented (nb::is_operator), as Python expects.
template <typename Fn>
void def_binary(nb::class_<Tensor>& cls, const char* name, const char* rname, Fn fn) {
  cls.def(
      name, [fn](const Tensor& a, const Tensor& b) { return fn(a, b); }, nb::is_operator());
  cls.def(
      name, [fn](const Tensor& a, Scalar b) { return fn(a, wrap_scalar(b)); }, nb::is_operator());
  if (rname) {
    cls.def(
        rname, [fn](const Tensor& a, Scalar b) { return fn(wrap_scalar(b), a); },
        nb::is_operator());
  }
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor");
  cls.def(nb::init<const Tensor&>())  // a new handle on the same tensor (nn.Parameter)
      .def_prop_ro("shape", &shape_of)
      .def("size", &shape_of)
      .def("size", [](const Tensor& t, int64_t dim) { return t.size(dim); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) { return t.size(0); })
      .def("stride", [](const Tensor& t) { return t.strides(); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("item", [](const Tensor& t) { return t.item(); })
      .def("numpy", &to_numpy)
      .def("_to_string", &Tensor::to_string)
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      .def("_is_same", &Tensor::is_same)
      .def("_version", &Tensor::version);

  cls.def_prop_rw("requires_grad", &Tensor::requires_grad,
                  [](const Tensor& t, bool value) { requires_grad_(t, value); })
      .def(
          "requires_grad_", [](const Tensor& t, bool value) { return requires_grad_(t, value); },
          nb::arg("requires_grad") = true)
      .def_prop_rw(
          "grad", &grad_of,
          [](const Tensor& t, std::optional<Tensor> g) { set_grad(t, g.value_or(Tensor())); },
          nb::arg("grad").none())
      .def_prop_ro("is_leaf", [](const Tensor& t) { return is_leaf(t); })
      .def_prop_ro("_grad_fn_name", [](const Tensor& t) { return grad_fn_name(t); })
      .def("backward", &run_backward, nb::arg("gradient").none() = nb::none(),
           nb::arg("retain_graph") = false, nb::arg("create_graph") = false)
      .def("detach", [](const Tensor& t) { return detach(t); })
      .def("clone", [](const Tensor& t) { return clone(t); })
      .def("contiguous", [](const Tensor& t) { return contiguous(t); })
      .def("to", [](const Tensor& t, DType dtype) { return to(t, dtype); });

  def_binary(cls, "__add__", "__radd__",
             [](const Tensor& a, const Tensor& b) { return add(a, b); });
  def_binary(cls, "__sub__", "__rsub__",
             [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  def_binary(cls, "__mul__", "__rmul__",
             [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  def_binary(cls, "__truediv__", "__rtruediv__",
             [](const Tensor& a, const Tensor& b) { return div(a, b); });
  def_binary(cls, "__pow__", "__rpow__",
             [](const Tensor& a, const Tensor& b) { return pow(a, b); });
  def_binary(cls, "__eq__", nullptr, [](const Tensor& a, const Tensor& b) { return eq(a, b); });
  def_binary(cls, "__ne__", nullptr, [](const Tensor& a, const Tensor& b) { return ne(a, b); });
  def_binary(cls, "__lt__", nullptr, [](const Tensor& a, const Tensor& b) { return lt(a, b); });
  def_binary(cls, "__le__", nullptr, [](const Tensor& a, const Tensor& b) { return le(a, b); });
  def_binary(cls, "__gt__", nullptr, [](const Tensor& a, const Tensor& b) { return gt(a, b); });
  def_binary(cls, "__ge__", nullptr, [](const Tensor& a, const Tensor& b) { return ge(a, b); });
  cls.def(
      "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
      nb::is_operator());
  cls.def("__neg__", [](const Tensor& a) { return neg(a); });
}

}  // namespace kiln::python
