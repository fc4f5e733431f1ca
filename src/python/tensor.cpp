// kiln._C.Tensor: a handle to kiln::Tensor. Metadata, NumPy export, autograd
// entry points and the operators, each one call into the C++ API.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/sym_shape.h"
#include "kiln/core/trace_hook.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/repeat.h"
#include "kiln/ops/view.h"

namespace kiln::python {
namespace {

nb::dlpack::dtype dlpack_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return nb::dtype<bool>();
    case DType::Int8:
      return nb::dtype<int8_t>();
    case DType::UInt8:
      return nb::dtype<uint8_t>();
    case DType::Int16:
      return nb::dtype<int16_t>();
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

// An array over the tensor's memory (a NumPy array, or nanobind's framework-
// free ndarray for DLPack and the buffer protocol); the capsule holds a
// handle to the tensor, so the storage lives as long as the array does.
template <typename... Framework>
nb::object export_tensor(const Tensor& t, const char* what) {
  KILN_CHECK(!t.requires_grad(), "Can't call ", what,
             " on Tensor that requires grad. Use tensor.detach().", what, " instead.");
  // A trace recording on this thread reports the read; the Python caller's
  // line is the Python warning's, so no C++ location is given.
  report_host_read(t, what, std::source_location());
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  nb::capsule owner(new Tensor(t), [](void* p) noexcept {
    auto* lent = static_cast<Tensor*>(p);
    lent->storage()->end_loan();
    delete lent;
  });
  // Lent while the array lives, as it may be written through (Note [Eager
  // packed weights], ops/packed_weights.cpp); the capsule ends the loan.
  t.storage()->lend();
  nb::ndarray<Framework...> array(t.data_ptr(), shape.size(), shape.data(), owner,
                                  t.strides().data(), dlpack_dtype_of(t.dtype()),
                                  nb::device::cpu::value);
  return array.cast();
}

nb::object to_numpy(const Tensor& t) {
  return export_tensor<nb::numpy>(t, "numpy()");
}

// __dlpack__(stream=None, max_version=None, dl_device=None, copy=None): the
// DLPack capsule of the framework-free ndarray over the tensor.
nb::object to_dlpack(const Tensor& t, nb::kwargs kwargs) {
  return export_tensor<nb::array_api>(t, "__dlpack__()").attr("__dlpack__")(**kwargs);
}

// The buffer protocol (memoryview(x), np.asarray(x) without __array__): the
// request goes to the ndarray over the tensor, which becomes the buffer's
// owner (view->obj), so releasing the buffer releases that ndarray.
int get_buffer(PyObject* self, Py_buffer* view, int flags) noexcept {
  try {
    nb::object array =
        export_tensor<nb::array_api>(nb::cast<const Tensor&>(nb::handle(self)), "memoryview()");
    return PyObject_GetBuffer(array.ptr(), view, flags);
  } catch (nb::python_error& e) {  // a TraceError from the trace-warning handler
    e.restore();
    return -1;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
}

PyType_Slot tensor_slots[] = {{Py_bf_getbuffer, (void*)get_buffer}, {0, nullptr}};

// item() under another name for the trace report ("bool()" for `if x:`).
Scalar item_as(const Tensor& t, const std::string& what) {
  report_host_read(t, what.c_str(), std::source_location());
  KILN_CHECK(t.numel() == 1, what, ": a tensor with ", t.numel(),
             " elements cannot be converted to a scalar (shape ", t.shape(), ")");
  return read_element(t, 0);
}

nb::tuple tuple_of(const IntList& values) {
  nb::list out;
  for (int64_t v : values)
    out.append(v);
  return nb::tuple(out);
}

nb::object size_of(const Tensor& t, int64_t dim) {
  if (!trace_hook()) return nb::int_(t.size(dim));
  return size_to_python(sym_size(t, dim));
}

// len(x) must be an int (Python's rule): a symbolic first dim is specialized.
int64_t len_of(const Tensor& t) {
  KILN_CHECK(t.dim() > 0, "len() of a 0-d tensor");
  if (!trace_hook()) return t.size(0);
  return size_as_int(sym_size(t, 0), "len() (use x.shape[0] to keep the size symbolic)",
                     std::source_location());
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

// A NumPy array or scalar on the other side of an operator, as a kiln
// operand (kiln/_tensor.py's _numpy_operand converts it: an array with
// kiln.tensor's rules, a NumPy scalar as the Python number it holds); null
// for anything else, which gets NotImplemented.
std::optional<Tensor> numpy_operand(nb::handle obj) {
  // Looked up on each call (operands other than tensors and numbers are
  // rare): a cached reference would outlive the interpreter, and nanobind
  // reports everything it keeps alive as leaked at exit.
  nb::object converted = nb::module_::import_("kiln._tensor").attr("_numpy_operand")(obj);
  if (converted.is_none()) return std::nullopt;
  if (nb::isinstance<Tensor>(converted)) return nb::cast<Tensor>(converted);
  return wrap_scalar(nb::cast<Scalar>(converted));
}

nb::object not_implemented() {
  return nb::borrow(nb::handle(Py_NotImplemented));
}

// Binary operators: a Tensor or a Python number on the other side, or a
// NumPy array or scalar (NumPy defers to kiln: Tensor.__array_priority__, so
// `array + tensor` reaches __radd__ here and gives a Tensor); anything else
// returns NotImplemented (nb::is_operator), as Python expects.
template <typename Fn>
void def_binary(nb::class_<Tensor>& cls, const char* name, const char* rname, Fn fn) {
  cls.def(
      name, [fn](const Tensor& a, const Tensor& b) { return fn(a, b); }, nb::is_operator());
  cls.def(
      name, [fn](const Tensor& a, Scalar b) { return fn(a, wrap_scalar(b)); }, nb::is_operator());
  cls.def(
      name,
      [fn](const Tensor& a, nb::handle b) {
        std::optional<Tensor> other = numpy_operand(b);
        return other ? nb::cast(fn(a, *other)) : not_implemented();
      },
      nb::is_operator());
  if (!rname) return;
  cls.def(
      rname, [fn](const Tensor& a, Scalar b) { return fn(wrap_scalar(b), a); }, nb::is_operator());
  cls.def(
      rname,
      [fn](const Tensor& a, nb::handle b) {
        std::optional<Tensor> other = numpy_operand(b);
        return other ? nb::cast(fn(*other, a)) : not_implemented();
      },
      nb::is_operator());
}

// In-place methods and operators (x.add_(y), x += y): the C++ in-place call
// on the tensor inside `self`, then `self` itself, so `x += y` keeps x the
// same Python object, as in PyTorch.
template <typename Fn>
void def_inplace(nb::class_<Tensor>& cls, const char* name, const char* iname, Fn fn) {
  auto with_tensor = [fn](nb::handle self, const Tensor& b) {
    fn(nb::cast<const Tensor&>(self), b);
    return nb::borrow(self);
  };
  auto with_scalar = [fn](nb::handle self, Scalar b) {
    fn(nb::cast<const Tensor&>(self), wrap_scalar(b));
    return nb::borrow(self);
  };
  auto with_array = [fn](nb::handle self, nb::handle b) {
    std::optional<Tensor> other = numpy_operand(b);
    if (!other) return not_implemented();
    fn(nb::cast<const Tensor&>(self), *other);
    return nb::borrow(self);
  };
  cls.def(name, with_tensor).def(name, with_scalar);
  cls.def(iname, with_tensor, nb::is_operator())
      .def(iname, with_scalar, nb::is_operator())
      .def(iname, with_array, nb::is_operator());
}

// The in-place form of an op of the table by its OpDef (kiln/_tensor.py
// makes x.sqrt_(), x.remainder_(y), x.clamp_(min, max) from it).
nb::object apply_inplace_of(nb::handle self, const OpDef& def, nb::handle others,
                            nb::handle attrs) {
  std::vector<Tensor> operands = to_operands(others);
  Attrs typed = attrs.is_none() ? Attrs() : to_attrs(def, attrs);
  apply_inplace(def, nb::cast<const Tensor&>(self), std::move(operands), typed);
  return nb::borrow(self);
}

// a + alpha * b / a - alpha * b in place, alpha a keyword as in PyTorch.
template <const Tensor& (*Write)(const Tensor&, const Tensor&, Scalar)>
void def_inplace_alpha(nb::class_<Tensor>& cls, const char* name) {
  cls.def(
      name,
      [](nb::handle self, nb::handle other, Scalar alpha) {
        Write(nb::cast<const Tensor&>(self), to_operand(other), alpha);
        return nb::borrow(self);
      },
      nb::arg("other"), nb::kw_only(), nb::arg("alpha"));
}

// PyTorch's functions whose output shape depends on the data
// (ops/data_dependent.h), the repeats (ops/repeat.h), and add / sub with
// alpha; kiln/_torch_forms.py gives them PyTorch's argument forms.
void bind_tensor_functions(nb::module_& m) {
  m.def(
      "nonzero", [](const Tensor& x) { return nonzero(x); }, nb::arg("input"));
  m.def("nonzero_tuple", &nonzero_tuple, nb::arg("input"));
  m.def("argwhere", &argwhere, nb::arg("input"));
  m.def(
      "unique",
      [](const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
         std::optional<int64_t> dim) {
        UniqueResult r = unique(x, sorted, return_inverse, return_counts, dim);
        return nb::make_tuple(r.values, or_none(r.inverse), or_none(r.counts));
      },
      nb::arg("input"), nb::arg("sorted"), nb::arg("return_inverse"), nb::arg("return_counts"),
      nb::arg("dim").none());
  m.def(
      "bincount",
      [](const Tensor& x, OptTensor weights, int64_t minlength) {
        return bincount(x, or_undefined(weights), minlength);
      },
      nb::arg("input"), nb::arg("weights").none(), nb::arg("minlength"));
  m.def(
      "repeat_interleave",
      [](const Tensor& x, int64_t repeats, std::optional<int64_t> dim,
         std::optional<int64_t> output_size) {
        return repeat_interleave(x, repeats, dim, output_size);
      },
      nb::arg("input"), nb::arg("repeats"), nb::arg("dim").none(), nb::arg("output_size").none());
  m.def(
      "repeat_interleave",
      [](const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
         std::optional<int64_t> output_size) {
        return repeat_interleave(x, repeats, dim, output_size);
      },
      nb::arg("input"), nb::arg("repeats"), nb::arg("dim").none(), nb::arg("output_size").none());
  m.def(
      "repeat_interleave_indices",
      [](const Tensor& repeats, std::optional<int64_t> output_size) {
        return repeat_interleave(repeats, output_size);
      },
      nb::arg("repeats"), nb::arg("output_size").none());
  m.def("repeat", &repeat, nb::arg("input"), nb::arg("repeats"));
  m.def("tile", &tile, nb::arg("input"), nb::arg("dims"));
  m.def("expand_as", &expand_as, nb::arg("input"), nb::arg("other"));
  m.def(
      "add_alpha",
      [](nb::handle a, nb::handle b, Scalar alpha) {
        return add(to_operand(a), to_operand(b), alpha);
      },
      nb::arg("input"), nb::arg("other"), nb::arg("alpha"));
  m.def(
      "sub_alpha",
      [](nb::handle a, nb::handle b, Scalar alpha) {
        return sub(to_operand(a), to_operand(b), alpha);
      },
      nb::arg("input"), nb::arg("other"), nb::arg("alpha"));
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor", nb::type_slots(tensor_slots));
  cls.def(nb::init<const Tensor&>())  // a new handle on the same tensor (nn.Parameter)
      .def_prop_ro("shape", &shape_to_python)
      .def("size", &shape_to_python)
      .def("size", &size_of)
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", &len_of)
      .def("stride", [](const Tensor& t) { return tuple_of(t.strides()); })
      .def("stride", [](const Tensor& t, int64_t dim) { return t.stride(dim); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr",
           [](const Tensor& t) {
             // An address given out may be written through at any time.
             t.storage()->lend();
             return reinterpret_cast<uintptr_t>(t.data_ptr());
           })
      .def("item", [](const Tensor& t) { return t.item(std::source_location()); })
      .def("numpy", &to_numpy)
      // numpy() for kiln's own Python code, reported to a trace as `what`
      // (boolean-mask indexing: "x[mask] (its size depends on the data)").
      .def(
          "_numpy_as",
          [](const Tensor& t, const std::string& what) {
            return export_tensor<nb::numpy>(t, what.c_str());
          },
          nb::arg("what"))
      .def("__dlpack__", &to_dlpack)
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); })  // kDLCPU
      // repr()/str() and bool()/float()/int() from Python: a trace recording
      // on this thread reports the read under the name the user wrote.
      .def("_to_string",
           [](const Tensor& t) {
             report_host_read(t, "print()/repr()", std::source_location());
             return detail::render(t);
           })
      .def("_item_as", &item_as, nb::arg("what"))
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      .def("_is_same", &Tensor::is_same)
      .def("_version", &Tensor::version)
      .def("_bump_version", &Tensor::bump_version);

  cls.def_prop_rw("requires_grad", &Tensor::requires_grad,
                  [](const Tensor& t, bool value) { requires_grad_(t, value); })
      .def(
          "requires_grad_",
          [](nb::handle self, bool value) {
            requires_grad_(nb::cast<const Tensor&>(self), value);
            return nb::borrow(self);
          },
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
      .def("to", [](const Tensor& t, DType dtype) { return to(t, dtype); })
      // Not ops of the table (they are reshape and transpose), so not among
      // the op methods kiln/_tensor.py installs.
      .def("flatten", &flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def("t", &kiln::t);

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
  def_binary(cls, "__mod__", "__rmod__",
             [](const Tensor& a, const Tensor& b) { return remainder(a, b); });
  def_binary(cls, "__floordiv__", "__rfloordiv__",
             [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); });
  def_binary(cls, "__and__", "__rand__",
             [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); });
  def_binary(cls, "__or__", "__ror__",
             [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); });
  def_binary(cls, "__xor__", "__rxor__",
             [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); });
  def_binary(cls, "__lshift__", "__rlshift__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_left_shift");
    return dispatch1(def, {a, b});
  });
  def_binary(cls, "__rshift__", "__rrshift__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_right_shift");
    return dispatch1(def, {a, b});
  });
  // matmul takes no Python number; __rmatmul__ serves `ndarray @ tensor`.
  def_binary(cls, "__matmul__", nullptr,
             [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  cls.def(
      "__rmatmul__",
      [](const Tensor& a, nb::handle b) {
        std::optional<Tensor> other = numpy_operand(b);
        return other ? nb::cast(matmul(*other, a)) : not_implemented();
      },
      nb::is_operator());
  cls.def("__neg__", [](const Tensor& a) { return neg(a); });
  cls.def("__invert__", [](const Tensor& a) { return bitwise_not(a); });

  def_inplace(cls, "add_", "__iadd__", [](const Tensor& a, const Tensor& b) { add_(a, b); });
  def_inplace(cls, "sub_", "__isub__", [](const Tensor& a, const Tensor& b) { sub_(a, b); });
  def_inplace(cls, "mul_", "__imul__", [](const Tensor& a, const Tensor& b) { mul_(a, b); });
  def_inplace(cls, "div_", "__itruediv__", [](const Tensor& a, const Tensor& b) { div_(a, b); });
  def_inplace(cls, "remainder_", "__imod__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("remainder");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "floor_divide_", "__ifloordiv__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("floor_divide");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "bitwise_and_", "__iand__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_and");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "bitwise_or_", "__ior__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_or");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "bitwise_xor_", "__ixor__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_xor");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "bitwise_left_shift_", "__ilshift__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_left_shift");
    apply_inplace(def, a, {b});
  });
  def_inplace(cls, "bitwise_right_shift_", "__irshift__", [](const Tensor& a, const Tensor& b) {
    static const OpDef& def = op("bitwise_right_shift");
    apply_inplace(def, a, {b});
  });
  def_inplace_alpha<&add_>(cls, "add_");
  def_inplace_alpha<&sub_>(cls, "sub_");
  cls.def("_apply_inplace", &apply_inplace_of, nb::arg("op"), nb::arg("others"),
          nb::arg("attrs").none());
  cls.def("zero_",
          [](nb::handle self) {
            zero_(nb::cast<const Tensor&>(self));
            return nb::borrow(self);
          })
      .def("fill_",
           [](nb::handle self, Scalar value) {
             fill_(nb::cast<const Tensor&>(self), value);
             return nb::borrow(self);
           })
      .def("copy_", [](nb::handle self, const Tensor& src) {
        copy_(nb::cast<const Tensor&>(self), src);
        return nb::borrow(self);
      });
  bind_tensor_functions(m);
}

}  // namespace kiln::python
