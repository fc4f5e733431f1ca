// kiln._C.onnx: ONNX export and import (kiln/onnx in C++; kiln/onnx.py wraps
// them).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "jit.h"
#include "kiln/jit/trace/compiled.h"
#include "kiln/onnx/onnx_export.h"

namespace kiln::python {

void bind_onnx(nb::module_& m) {
  m.def(
      "export",
      [](const jit::CompiledFunction& compiled, const std::string& path, int64_t opset_version,
         bool dynamic_batch, const std::vector<std::string>& output_names) {
        onnx::ExportOptions options{.opset_version = opset_version,
                                    .dynamic_batch = dynamic_batch,
                                    .output_names = output_names};
        nb::gil_scoped_release released;
        onnx::export_model(compiled.graph(), compiled.num_outputs(), path, options);
      },
      nb::arg("compiled"), nb::arg("path"), nb::arg("opset_version") = 17,
      nb::arg("dynamic_batch") = false, nb::arg("output_names") = std::vector<std::string>());
  m.def("can_export", &onnx::can_export, nb::arg("op"));
}

}  // namespace kiln::python
