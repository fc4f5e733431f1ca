// kiln._C.onnx: ONNX export and import (kiln/onnx in C++; kiln/onnx.py wraps
// them).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "jit.h"
#include "kiln/jit/compile/compiled.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/onnx/onnx_import.h"

namespace kiln::python {

void bind_onnx(nb::module_& m) {
  m.def(
      "export",
      [](const jit::CompiledFunction& compiled, const std::string& path, int64_t opset_version,
         bool dynamic_batch, const std::vector<std::string>& output_names,
         const std::vector<std::string>& input_names, bool export_params,
         bool keep_initializers_as_inputs) {
        onnx::ExportOptions options{.opset_version = opset_version,
                                    .dynamic_batch = dynamic_batch,
                                    .input_names = input_names,
                                    .output_names = output_names,
                                    .export_params = export_params,
                                    .keep_initializers_as_inputs = keep_initializers_as_inputs};
        nb::gil_scoped_release released;
        onnx::export_model(compiled.graph(), compiled.num_outputs(), path, options);
      },
      nb::arg("compiled"), nb::arg("path"), nb::arg("opset_version") = 17,
      nb::arg("dynamic_batch") = false, nb::arg("output_names") = std::vector<std::string>(),
      nb::arg("input_names") = std::vector<std::string>(), nb::arg("export_params") = true,
      nb::arg("keep_initializers_as_inputs") = false);
  m.def("can_export", &onnx::can_export, nb::arg("op"));
  // The model compiled with the default passes, and its input and output names.
  m.def(
      "load",
      [](const std::string& path, const std::map<std::string, IntList>& input_shapes,
         const std::map<std::string, Tensor>& constant_inputs) {
        nb::gil_scoped_release released;
        onnx::Imported imported = onnx::import_model(
            path, {.input_shapes = input_shapes, .constant_inputs = constant_inputs});
        jit::Capture capture;
        capture.graph = imported.graph;
        capture.num_outputs = imported.num_outputs;
        return std::make_tuple(jit::CompiledFunction(std::move(capture)), imported.input_names,
                               imported.output_names);
      },
      nb::arg("path"), nb::arg("input_shapes") = std::map<std::string, IntList>(),
      nb::arg("constant_inputs") = std::map<std::string, Tensor>());
  m.def("importable_ops", &onnx::importable_ops);
}

}  // namespace kiln::python
