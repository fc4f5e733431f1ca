// kiln._C.SymInt: a size that a trace with dynamic shapes keeps symbolic.
// x.shape gives them for the dims the trace made symbolic; arithmetic on
// them builds size expressions (x.shape[0] * 2), comparisons are decided
// from the traced call's sizes and become guards of the graph, and an op
// given one records it as a symbolic attribute. Reading one as a plain
// int (int(), range(), an index) specializes the trace to its value and is
// reported at the user's line.
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "convert.h"
#include "kiln/core/sym_shape.h"
#include "kiln/core/trace_hook.h"

namespace kiln::python {
namespace {

// The kiln package's directory, whose frames are not the user's.
const std::string& kiln_dir() {
  static const std::string dir = [] {
    std::string file = nb::cast<std::string>(nb::module_::import_("kiln").attr("__file__"));
    return file.substr(0, file.find_last_of('/') + 1);
  }();
  return dir;
}

// "model.py:12": the innermost Python line outside kiln, for the reason of
// a guard (the line that compared or read the size).
std::string python_line() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame) Py_INCREF(frame);
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    std::string file = nb::cast<std::string>(nb::handle(code->co_filename));
    Py_DECREF(code);
    if (file.rfind(kiln_dir(), 0) != 0) {
      int line = PyFrame_GetLineNumber(frame);
      Py_DECREF(frame);
      return file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(line);
    }
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  return "";
}

// An int or a SymInt as a Dim; a TypeError otherwise.
Dim dim_of(nb::handle value) {
  if (nb::isinstance<Dim>(value)) return nb::cast<Dim>(value);
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) return nb::cast<int64_t>(value);
  throw nb::type_error(("a size must be an int or a SymInt, got " +
                        nb::cast<std::string>(nb::type_name(value.type())))
                           .c_str());
}

// The operand of a binary operator, or nullopt for NotImplemented.
std::optional<Dim> operand(nb::handle value) {
  if (nb::isinstance<Dim>(value)) return nb::cast<Dim>(value);
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) return nb::cast<int64_t>(value);
  return std::nullopt;
}

nb::object result(const Dim& d) {
  return size_to_python(d);
}

int64_t as_int(const Dim& d, const std::string& what) {
  std::string line = python_line();
  std::string reason = line.empty() ? what : what + " at " + line;
  return size_as_int(d, reason.c_str(), std::source_location());
}

// A comparison decided by the trace's ShapeEnv; its guard names the line.
template <typename Compare>
nb::object compare(const Dim& a, nb::handle b, Compare cmp) {
  std::optional<Dim> other = operand(b);
  if (!other) return nb::borrow(Py_NotImplemented);
  ShapeEnv* env = current_shape_env();
  if (env) env->set_context("at " + python_line());
  return nb::bool_(cmp(a, *other));
}

template <typename Op>
nb::object binary(const Dim& a, nb::handle b, Op op) {
  std::optional<Dim> other = operand(b);
  if (!other) return nb::borrow(Py_NotImplemented);
  return result(op(a, *other));
}

// // and % need a static, positive divisor.
int64_t divisor(const Dim& d, const char* op) {
  KILN_CHECK_VALUE(d.is_static() && d.static_value() > 0, "SymInt ", op,
                   ": the divisor must be a positive int, got ", d);
  return d.static_value();
}

}  // namespace

nb::object size_to_python(const Dim& dim) {
  if (dim.is_static()) return nb::int_(dim.static_value());
  return nb::cast(dim);
}

bool is_size(nb::handle value) {
  return nb::isinstance<Dim>(value) || (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr()));
}

DimList dims_of(nb::handle sequence) {
  DimList out;
  for (nb::handle item : sequence)
    out.push_back(dim_of(item));
  return out;
}

nb::tuple shape_to_python(const Tensor& t) {
  nb::list out;
  // Outside a trace no hook is installed: the shape is the ints.
  if (!trace_hook()) {
    for (int64_t v : t.shape())
      out.append(v);
    return nb::tuple(out);
  }
  for (const Dim& d : sym_shape(t))
    out.append(size_to_python(d));
  return nb::tuple(out);
}

void bind_sym_int(nb::module_& m) {
  nb::class_<Dim>(m, "SymInt",
                  "A size a trace with dynamic shapes keeps symbolic (x.shape[0] while "
                  "recording with dynamic=True): arithmetic gives size expressions, "
                  "comparisons become guards, int() specializes the trace.")
      .def("__repr__", [](const Dim& d) { return "SymInt(" + d.to_string() + ")"; })
      .def("__str__", &Dim::to_string)
      .def_prop_ro("expr", &Dim::to_string, "the size as text: 'batch', '2*seq'")
      .def_prop_ro(
          "hint",
          [](const Dim& d) -> std::optional<int64_t> {
            const ShapeEnv* env = current_shape_env();
            if (d.is_static()) return d.static_value();
            if (!env) return std::nullopt;
            for (const std::string& s : d.expr().symbols())
              if (!env->hint(s)) return std::nullopt;
            return d.expr().evaluate(env->hints());
          },
          "its value in the call being traced (no guard)")
      .def("__int__", [](const Dim& d) { return as_int(d, "int()"); })
      .def("__index__", [](const Dim& d) { return as_int(d, "use as an int"); })
      .def("__float__", [](const Dim& d) { return double(as_int(d, "float()")); })
      .def("__hash__", [](const Dim& d) { return as_int(d, "hash()"); })
      .def("__bool__", [](const Dim& d) { return compare(d, nb::int_(0), std::not_equal_to<>()); })
      .def("__neg__", [](const Dim& d) { return result(-d); })
      .def("__pos__", [](const Dim& d) { return result(d); })
      .def("__add__", [](const Dim& a, nb::handle b) { return binary(a, b, std::plus<>()); })
      .def("__radd__", [](const Dim& a, nb::handle b) { return binary(a, b, std::plus<>()); })
      .def("__sub__", [](const Dim& a, nb::handle b) { return binary(a, b, std::minus<>()); })
      .def("__rsub__",
           [](const Dim& a, nb::handle b) {
             return binary(a, b, [](const Dim& x, const Dim& y) { return y - x; });
           })
      .def("__mul__", [](const Dim& a, nb::handle b) { return binary(a, b, std::multiplies<>()); })
      .def("__rmul__", [](const Dim& a, nb::handle b) { return binary(a, b, std::multiplies<>()); })
      .def("__floordiv__",
           [](const Dim& a, nb::handle b) {
             return binary(
                 a, b, [](const Dim& x, const Dim& y) { return floordiv(x, divisor(y, "//")); });
           })
      .def("__mod__",
           [](const Dim& a, nb::handle b) {
             return binary(a, b,
                           [](const Dim& x, const Dim& y) { return mod(x, divisor(y, "%")); });
           })
      .def("__truediv__",
           [](const Dim& a, nb::handle b) -> nb::object {
             std::optional<Dim> other = operand(b);
             if (!other) {
               if (!PyFloat_Check(b.ptr())) return nb::borrow(Py_NotImplemented);
               return nb::float_(double(as_int(a, "/")) / nb::cast<double>(b));
             }
             return nb::float_(double(as_int(a, "/")) / double(as_int(*other, "/")));
           })
      .def("__rtruediv__",
           [](const Dim& a, nb::handle b) -> nb::object {
             // `eps / classes`: a float, so the size is specialized (reported).
             if (PyFloat_Check(b.ptr()))
               return nb::float_(nb::cast<double>(b) / double(as_int(a, "/")));
             std::optional<Dim> other = operand(b);
             if (!other) return nb::borrow(Py_NotImplemented);
             return nb::float_(double(as_int(*other, "/")) / double(as_int(a, "/")));
           })
      .def("__eq__", [](const Dim& a, nb::handle b) { return compare(a, b, std::equal_to<>()); })
      .def("__ne__",
           [](const Dim& a, nb::handle b) { return compare(a, b, std::not_equal_to<>()); })
      .def("__lt__", [](const Dim& a, nb::handle b) { return compare(a, b, std::less<>()); })
      .def("__le__", [](const Dim& a, nb::handle b) { return compare(a, b, std::less_equal<>()); })
      .def("__gt__", [](const Dim& a, nb::handle b) { return compare(a, b, std::greater<>()); })
      .def("__ge__",
           [](const Dim& a, nb::handle b) { return compare(a, b, std::greater_equal<>()); });
}

}  // namespace kiln::python
