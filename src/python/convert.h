// Conversions between Python objects and kiln values, shared by the binding
// files: Python numbers <-> kiln::Scalar (a nanobind type caster), operands
// and attribute dicts for dispatch.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>

#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"
#include "kiln/ops/op.h"

namespace nanobind::detail {

// bool is checked first: in Python, True is also an int.
template <>
struct type_caster<kiln::Scalar> {
  NB_TYPE_CASTER(kiln::Scalar, const_name("float | int | bool"))

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    PyObject* obj = src.ptr();
    if (PyBool_Check(obj)) {
      value = kiln::Scalar(obj == Py_True);
      return true;
    }
    if (PyLong_Check(obj)) {
      long long v = PyLong_AsLongLong(obj);
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = kiln::Scalar(int64_t(v));
      return true;
    }
    if (PyFloat_Check(obj)) {
      value = kiln::Scalar(PyFloat_AS_DOUBLE(obj));
      return true;
    }
    return false;
  }

  static handle from_cpp(const kiln::Scalar& s, rv_policy, cleanup_list*) noexcept {
    if (s.kind() == kiln::DType::Bool) return PyBool_FromLong(s.to_bool());
    if (s.kind() == kiln::DType::Float64) return PyFloat_FromDouble(s.to_double());
    return PyLong_FromLongLong(s.to_int());
  }
};

}  // namespace nanobind::detail

namespace kiln::python {

namespace nb = nanobind;

// An op operand: a Tensor, a Python number (a wrapped 0-d tensor, so it
// promotes like a number), or None (an absent optional input).
Tensor to_operand(nb::handle obj);
std::vector<Tensor> to_operands(nb::handle sequence);
// A dict of Python values to the op's typed attributes: the op's declaration
// says whether 2 means 2.0 and whether "float32" names a dtype.
Attrs to_attrs(const OpDef& op, nb::handle dict);
// A dim as Python sees it: an int when static, its text ("batch",
// "2*seq") when symbolic; a shape as a tuple of those.
nb::object dim_to_python(const Dim& dim);
nb::tuple dims_to_python(const DimList& dims);
// Sizes in traced Python code (sym_int.cpp): an int, or a SymInt for a size
// a trace with dynamic shapes keeps symbolic.
nb::object size_to_python(const Dim& dim);
bool is_size(nb::handle value);              // an int (not a bool) or a SymInt
DimList dims_of(nb::handle sequence);        // ints and SymInts
nb::tuple shape_to_python(const Tensor& t);  // x.shape: SymInts where symbolic
void bind_sym_int(nb::module_& m);

// An optional tensor argument (Python None) as kiln's C++ API takes it: an
// undefined Tensor; and back.
using OptTensor = std::optional<Tensor>;
inline Tensor or_undefined(const OptTensor& t) {
  return t ? *t : Tensor();
}
inline OptTensor or_none(const Tensor& t) {
  return t.defined() ? OptTensor(t) : std::nullopt;
}

void bind_tensor(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_optim(nb::module_& m);
void bind_control_flow(nb::module_& m);
void bind_nn_rnn(nb::module_& m);
void bind_nn_functional(nb::module_& m);
void bind_random(nb::module_& m, nb::module_& nn);  // kiln.Generator, draws, nn.init

}  // namespace kiln::python
