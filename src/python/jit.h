// Shared by the binding files of kiln._C.jit.
#pragma once

#include <memory>

#include <nanobind/nanobind.h>

#include "kiln/jit/ir/graph.h"

namespace kiln::python {

namespace nb = nanobind;

// A graph as Python holds it: shared with whatever else holds it, and read
// only when it belongs to a compiled function (which assumes it never changes).
struct GraphRef {
  std::shared_ptr<jit::Graph> graph;
  bool read_only = false;
};

void bind_jit(nb::module_& m);
void bind_jit_graph(nb::module_& m);
void bind_io(nb::module_& io, nb::module_& jit);
void bind_onnx(nb::module_& m);

}  // namespace kiln::python
