// kiln._C: the module. Errors, dtypes, the generic dispatch, factories, grad
// mode and NumPy import. Every function here only converts arguments and
// calls the C++ API; kiln/ (the Python package) shapes it like PyTorch.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "jit.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/allocator.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/random.h"

namespace kiln::python {

void bind_nn_attention(nb::module_& m);  // nn_attention.cpp
void bind_autograd(nb::module_ m);       // autograd.cpp
void bind_nn_utils(nb::module_& m);      // nn_utils.cpp
void bind_nn_layers(nb::module_& m);     // nn_layers.cpp
void bind_nn_more(nb::module_& m);       // nn_more.cpp
void bind_profiler(nb::module_& m);      // profiler.cpp
void bind_engine(nb::module_& m);        // engine.cpp
void bind_distributed(nb::module_& m);   // distributed.cpp

namespace {

PyObject* python_exception_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Value:
      return PyExc_ValueError;
    case ErrorKind::Type:
      return PyExc_TypeError;
    case ErrorKind::Index:
      return PyExc_IndexError;
    case ErrorKind::NotImplemented:
      return PyExc_NotImplementedError;
    case ErrorKind::Runtime:
      break;
  }
  return PyExc_RuntimeError;
}

void translate_error(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    PyErr_SetString(python_exception_of(e.kind()), e.what());
  }
}

[[noreturn]] void unsupported_attr(nb::handle value, const AttrSpec* spec) {
  std::string type_name = nb::cast<std::string>(nb::type_name(value.type()));
  throw nb::type_error(("attribute '" + (spec ? spec->name : std::string("?")) +
                        "' got an unsupported value of type " + type_name)
                           .c_str());
}

AttrValue attr_of_python(nb::handle value, const AttrSpec* spec) {
  if (value.is_none()) return std::monostate{};
  if (nb::isinstance<DType>(value)) return nb::cast<DType>(value);
  if (PyBool_Check(value.ptr())) return nb::cast<bool>(value);
  if (nb::isinstance<nb::str>(value)) {
    std::string text = nb::cast<std::string>(value);
    if (spec && spec->kind == AttrKind::DType) return dtype_from_string(text);
    return text;
  }
  if (PyLong_Check(value.ptr())) {
    if (spec && spec->kind == AttrKind::Float) return nb::cast<double>(value);
    return nb::cast<int64_t>(value);
  }
  if (PyFloat_Check(value.ptr())) return nb::cast<double>(value);
  if (nb::isinstance<Dim>(value)) return canonical_attr(nb::cast<Dim>(value));
  // A tensor is a Python sequence too: it must not reach the int-list cast.
  if (nb::isinstance<Tensor>(value)) unsupported_attr(value, spec);
  // Sizes a trace keeps symbolic: x.view(x.shape[0], -1). Before the int-list
  // cast, which would read each SymInt as an int (specializing the trace).
  if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
    bool any_symbolic = false, sizes = true;
    for (nb::handle item : value) {
      any_symbolic = any_symbolic || nb::isinstance<Dim>(item);
      sizes = sizes && is_size(item);
    }
    if (any_symbolic && sizes) return canonical_attr(dims_of(value));
  }
  IntList list;
  if (nb::try_cast(value, list)) return list;
  unsupported_attr(value, spec);
}

// One Tensor for a one-output op, else a tuple (max_pool2d's indices, split).
nb::object results_of(const OpDef& def, std::vector<Tensor> outputs) {
  if (def.num_outputs == 1 && outputs.size() == 1) return nb::cast(std::move(outputs[0]));
  nb::list out;
  for (Tensor& t : outputs)
    out.append(nb::cast(std::move(t)));
  return nb::tuple(out);
}

nb::object run_dispatch(const OpDef& def, nb::handle inputs, nb::handle attrs) {
  std::vector<Tensor> operands = to_operands(inputs);
  Attrs typed = attrs.is_none() ? Attrs() : to_attrs(def, attrs);
  return results_of(def, dispatch(def, std::move(operands), typed));
}

std::optional<DType> dtype_of_ndarray(const nb::dlpack::dtype& dt) {
  if (dt == nb::dtype<float>()) return DType::Float32;
  if (dt == nb::dtype<double>()) return DType::Float64;
  if (dt == nb::dtype<int32_t>()) return DType::Int32;
  if (dt == nb::dtype<int64_t>()) return DType::Int64;
  if (dt == nb::dtype<int16_t>()) return DType::Int16;
  if (dt == nb::dtype<int8_t>()) return DType::Int8;
  if (dt == nb::dtype<uint8_t>()) return DType::UInt8;
  if (dt == nb::dtype<bool>()) return DType::Bool;
  return std::nullopt;
}

// Shares the array's memory; the array stays alive (held by the storage's
// release callback) until the last kiln view of it is gone. from_dlpack takes
// any object with __dlpack__ (a torch tensor, a NumPy array) on the CPU.
template <typename Array>
Tensor from_array(Array array) {
  std::optional<DType> dtype = dtype_of_ndarray(array.dtype());
  KILN_CHECK_TYPE(dtype.has_value(),
                  "can't convert np.ndarray of this dtype. The only supported types are: "
                  "float64, float32, int64, int32, int16, int8, uint8, and bool.");
  IntList shape(array.shape_ptr(), array.shape_ptr() + array.ndim());
  IntList strides(array.stride_ptr(), array.stride_ptr() + array.ndim());
  auto* keep_alive = new Array(array);
  auto release = [keep_alive] {
    if (!Py_IsInitialized()) return;  // interpreter gone: nothing left to free
    nb::gil_scoped_acquire gil;
    delete keep_alive;
  };
  return kiln::from_blob(array.data(), shape, *dtype, release, strides);
}

TensorOptions options_of(std::optional<DType> dtype, bool requires_grad, DType fallback) {
  TensorOptions options(dtype.value_or(fallback));
  options.requires_grad = requires_grad;
  return options;
}

void bind_factories(nb::module_& m) {
  using OptDType = std::optional<DType>;
  m.def("zeros", [](const IntList& shape, OptDType dtype, bool requires_grad) {
    return zeros(shape, options_of(dtype, requires_grad, kDefaultFloat));
  });
  m.def("ones", [](const IntList& shape, OptDType dtype, bool requires_grad) {
    return ones(shape, options_of(dtype, requires_grad, kDefaultFloat));
  });
  m.def("empty", [](const IntList& shape, OptDType dtype, bool requires_grad) {
    return empty(shape, options_of(dtype, requires_grad, kDefaultFloat));
  });
  m.def("full", [](const IntList& shape, Scalar value, OptDType dtype, bool requires_grad) {
    DType fallback = value.kind() == DType::Float64 ? kDefaultFloat : value.kind();
    return full(shape, value, options_of(dtype, requires_grad, fallback));
  });
  m.def("arange", [](Scalar start, Scalar end, Scalar step, OptDType dtype, bool requires_grad) {
    if (!dtype && !requires_grad) return arange(start, end, step);
    Tensor natural = arange(start, end, step);
    return arange(start, end, step, options_of(dtype, requires_grad, natural.dtype()));
  });
  m.def("linspace",
        [](double start, double end, int64_t steps, OptDType dtype, bool requires_grad) {
          return linspace(start, end, steps, options_of(dtype, requires_grad, kDefaultFloat));
        });
  m.def("eye", [](int64_t n, int64_t cols, OptDType dtype, bool requires_grad) {
    return eye(n, cols, options_of(dtype, requires_grad, kDefaultFloat));
  });
  // generator: None draws from the default generator through the random
  // ops (ops/random.h); a kiln.Generator draws from it at once.
  m.def(
      "rand",
      [](const IntList& shape, OptDType dtype, bool requires_grad, Generator* gen) {
        return rand(shape, options_of(dtype, requires_grad, kDefaultFloat), gen);
      },
      nb::arg("shape"), nb::arg("dtype").none(), nb::arg("requires_grad"),
      nb::arg("generator").none() = nb::none());
  m.def(
      "randn",
      [](const IntList& shape, OptDType dtype, bool requires_grad, Generator* gen) {
        return randn(shape, options_of(dtype, requires_grad, kDefaultFloat), gen);
      },
      nb::arg("shape"), nb::arg("dtype").none(), nb::arg("requires_grad"),
      nb::arg("generator").none() = nb::none());
  m.def(
      "randint",
      [](int64_t low, int64_t high, const IntList& shape, OptDType dtype, Generator* gen) {
        return randint(low, high, shape, options_of(dtype, false, DType::Int64), gen);
      },
      nb::arg("low"), nb::arg("high"), nb::arg("shape"), nb::arg("dtype").none(),
      nb::arg("generator").none() = nb::none());
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); });
  m.def("from_numpy", &from_array<nb::ndarray<nb::numpy, nb::device::cpu>>, nb::arg("array"));
  m.def("from_dlpack", &from_array<nb::ndarray<nb::device::cpu>>, nb::arg("ext_tensor"));
}

// torch.autograd.grad: None where an input got no gradient.
std::vector<std::optional<Tensor>> autograd_grad(const std::vector<Tensor>& outputs,
                                                 const std::vector<Tensor>& inputs,
                                                 const std::vector<Tensor>& grad_outputs,
                                                 bool retain_graph, bool create_graph,
                                                 bool allow_unused) {
  std::vector<Tensor> grads;
  {
    nb::gil_scoped_release no_gil;
    grads = grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused);
  }
  std::vector<std::optional<Tensor>> out;
  for (Tensor& g : grads) {
    out.push_back(g.defined() ? std::optional<Tensor>(std::move(g)) : std::nullopt);
  }
  return out;
}

nb::list op_schemas() {
  nb::list out;
  for (const OpDef* def : op_registry().all()) {
    // Control flow takes functions, not tensors: kiln.cond and friends
    // (kiln/_control_flow.py), never a dispatched op.
    if (!def->blocks.empty()) continue;
    nb::list attrs;
    for (const AttrSpec& spec : def->attrs) {
      attrs.append(nb::make_tuple(spec.name, to_string(spec.kind), spec.optional));
    }
    out.append(
        nb::make_tuple(def->name, def->min_inputs, def->max_inputs, def->num_outputs, attrs));
  }
  return out;
}

}  // namespace

Tensor to_operand(nb::handle obj) {
  if (obj.is_none()) return Tensor();
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  return wrap_scalar(nb::cast<Scalar>(obj));
}

std::vector<Tensor> to_operands(nb::handle sequence) {
  std::vector<Tensor> out;
  for (nb::handle item : sequence)
    out.push_back(to_operand(item));
  return out;
}

Attrs to_attrs(const OpDef& op, nb::handle dict) {
  Attrs out;
  for (auto [key, value] : nb::borrow<nb::dict>(dict)) {
    std::string name = nb::cast<std::string>(key);
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : op.attrs) {
      if (s.name == name) spec = &s;
    }
    out.set(name, attr_of_python(value, spec));
  }
  return out;
}

nb::object dim_to_python(const Dim& dim) {
  if (dim.is_static()) return nb::int_(dim.static_value());
  return nb::str(dim.to_string().c_str());
}

nb::tuple dims_to_python(const DimList& dims) {
  nb::list out;
  for (const Dim& dim : dims)
    out.append(dim_to_python(dim));
  return nb::tuple(out);
}

}  // namespace kiln::python

NB_MODULE(_C, m) {
  namespace nb = nanobind;
  using namespace kiln;
  using namespace kiln::python;
  nb::register_exception_translator(&translate_error);
  init_autograd();

  nb::enum_<DType>(m, "dtype")
      .value("bool", DType::Bool)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("int8", DType::Int8)
      .value("uint8", DType::UInt8)
      .value("int16", DType::Int16)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .def_prop_ro("is_floating_point", [](DType d) { return is_floating(d); })
      .def_prop_ro("is_signed", [](DType d) { return d != DType::Bool && !is_unsigned(d); })
      .def_prop_ro("itemsize", [](DType d) { return element_size(d); })
      .def("__repr__", [](DType d) { return "kiln." + to_string(d); })
      .def("__str__", [](DType d) { return "kiln." + to_string(d); });
  m.def("promote_types", &promote_types, nb::arg("type1"), nb::arg("type2"));

  bind_sym_int(m);
  bind_engine(m);
  bind_tensor(m);
  bind_ops(m);
  bind_factories(m);
  bind_autograd(m.def_submodule("autograd", "custom Functions and tensor hooks"));
  bind_optim(m);
  bind_control_flow(m);
  bind_nn_rnn(m);
  nb::module_ nn = m.def_submodule("nn", "kiln/nn's functional math: losses");
  bind_nn_functional(nn);
  bind_nn_attention(nn);
  bind_nn_utils(nn);
  bind_nn_layers(nn);
  bind_nn_more(nn);
  bind_random(m, nn);
  nb::module_ jit = m.def_submodule("jit", "the tracer, compiled functions and the graph IR");
  bind_jit(jit);
  nb::module_ io = m.def_submodule("io", "model files, safetensors state dicts, .npy files");
  bind_io(io, jit);
  nb::module_ onnx = m.def_submodule("onnx", "ONNX export and import");
  bind_onnx(onnx);
  nb::module_ profiler = m.def_submodule("profiler", "profiles: events, averages, tables, traces");
  bind_profiler(profiler);
  nb::module_ distributed =
      m.def_submodule("distributed", "the process group and its collectives, over MPI");
  bind_distributed(distributed);

  // An entry of the op table, by reference (the table lives as long as the
  // process): kiln._ops looks each op up once and dispatches through it.
  nb::class_<OpDef>(m, "OpDef").def_ro("name", &OpDef::name).def("__repr__", [](const OpDef& def) {
    return "<kiln op " + def.name + ">";
  });
  m.def(
      "op", [](const std::string& name) -> const OpDef& { return op(name); }, nb::arg("name"),
      nb::rv_policy::reference);
  m.def("dispatch", &run_dispatch, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::none(),
        "Runs op `op` (an OpDef from kiln._C.op(name), or its name) on `inputs` (tensors, "
        "Python numbers or None) with `attrs` (a dict); returns a Tensor, or a tuple for "
        "ops with several outputs.");
  m.def(
      "dispatch",
      [](const std::string& name, nb::handle inputs, nb::handle attrs) {
        return run_dispatch(op(name), inputs, attrs);
      },
      nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::none());
  m.def("op_schemas", &op_schemas);
  m.def("autograd_grad", &autograd_grad, nb::arg("outputs"), nb::arg("inputs"),
        nb::arg("grad_outputs"), nb::arg("retain_graph") = false, nb::arg("create_graph") = false,
        nb::arg("allow_unused") = false);
  m.def("_allocator_live_bytes", [] { return allocator_stats().live_bytes; });
  m.def(
      "memory_stats",
      [] {
        const AllocatorStats s = allocator_stats();
        nb::dict d;
        d["live_bytes"] = s.live_bytes;
        d["peak_bytes"] = s.peak_bytes;
        d["live_blocks"] = s.live_blocks;
        d["total_allocations"] = s.total_allocations;
        d["cached_bytes"] = s.cached_bytes;
        d["cache_hits"] = s.cache_hits;
        return d;
      },
      "The CPU allocator's counters: bytes live and at peak, blocks live, allocations ever "
      "made, and the freed large blocks kept for reuse (cached_bytes, cache_hits).");
  m.def("release_cached_memory", &release_cached_blocks,
        "Frees the large blocks the allocator keeps for reuse (see memory_stats()).");
  m.def("is_grad_enabled", &grad_mode_enabled);
  m.def("set_grad_enabled", &set_grad_mode, nb::arg("mode"));
}
