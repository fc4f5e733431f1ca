// kiln._C.distributed: the process group and its collectives
// (kiln/distributed in C++); kiln/distributed/__init__.py shapes them as
// torch.distributed. Every call that may wait releases the GIL, so other
// Python threads (and engine ops running Python callbacks) go on.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/distributed/distributed.h"

namespace kiln::python {

namespace nb = nanobind;

void bind_distributed(nb::module_& m) {
  namespace dist = kiln::distributed;
  using dist::ReduceOp;

  nb::enum_<ReduceOp>(m, "ReduceOp")
      .value("SUM", ReduceOp::Sum)
      .value("AVG", ReduceOp::Avg)
      .value("MAX", ReduceOp::Max)
      .value("MIN", ReduceOp::Min);

  nb::class_<dist::Work>(m, "Work")
      .def(
          "wait",
          [](dist::Work& work) {
            nb::gil_scoped_release released;
            work.wait();
            return true;
          },
          "waits until the call is done; raises its error")
      .def("is_completed", &dist::Work::is_completed)
      .def_prop_ro("started_ns", &dist::Work::started_ns)
      .def_prop_ro("finished_ns", &dist::Work::finished_ns);

  m.def("is_available", &dist::is_available);
  m.def(
      "init",
      [](const std::string& backend, double timeout_s) {
        nb::gil_scoped_release released;
        dist::init({.backend = backend, .timeout_s = timeout_s});
      },
      nb::arg("backend"), nb::arg("timeout_s"));
  m.def("is_initialized", &dist::is_initialized);
  m.def("rank", &dist::rank);
  m.def("world_size", &dist::world_size);
  m.def("timeout_seconds", &dist::timeout_seconds);
  m.def("set_timeout", &dist::set_timeout);
  m.def("abandon", &dist::abandon);
  m.def("is_broken", &dist::is_broken);
  m.def("broken_reason", &dist::broken_reason);
  m.def("stats", [] {
    dist::Stats s = dist::stats();
    return nb::make_tuple(s.collectives, s.completed);
  });

  // The calls that wait release the GIL; their tensor arguments were
  // converted before, and the C++ side holds its own references.
  m.def("destroy", &dist::destroy, nb::call_guard<nb::gil_scoped_release>());
  m.def("barrier", &dist::barrier, nb::call_guard<nb::gil_scoped_release>());
  m.def("all_reduce", &dist::all_reduce, nb::arg("tensor"), nb::arg("op"), nb::arg("async_op"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("broadcast", &dist::broadcast, nb::arg("tensor"), nb::arg("src"), nb::arg("async_op"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("all_gather", &dist::all_gather, nb::arg("outputs"), nb::arg("input"), nb::arg("async_op"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("all_gather_into_tensor", &dist::all_gather_into_tensor, nb::arg("output"),
        nb::arg("input"), nb::arg("async_op"), nb::call_guard<nb::gil_scoped_release>());
  m.def("reduce_scatter", &dist::reduce_scatter, nb::arg("output"), nb::arg("inputs"),
        nb::arg("op"), nb::arg("async_op"), nb::call_guard<nb::gil_scoped_release>());
  m.def("send", &dist::send, nb::arg("tensor"), nb::arg("dst"), nb::arg("tag"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("recv", &dist::recv, nb::arg("tensor"), nb::arg("src"), nb::arg("tag"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("isend", &dist::isend, nb::arg("tensor"), nb::arg("dst"), nb::arg("tag"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("irecv", &dist::irecv, nb::arg("tensor"), nb::arg("src"), nb::arg("tag"),
        nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::python
