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
#include "kiln/onnx/onnx_model.h"

namespace kiln::python {
namespace {

jit::CompiledFunction compiled(const onnx::Imported& imported) {
  jit::Capture capture;
  capture.graph = imported.graph->clone();
  capture.num_outputs = imported.num_outputs;
  return jit::CompiledFunction(std::move(capture));
}

}  // namespace

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
  // onnx::Model; its graphs are compiled with the default passes, each
  // from a copy (the passes rewrite the graph they compile).
  nb::class_<onnx::Model>(m, "Model")
      .def(
          "__init__",
          [](onnx::Model* self, const std::string& path,
             const std::map<std::string, IntList>& input_shapes,
             const std::map<std::string, Tensor>& constant_inputs, size_t max_specializations) {
            nb::gil_scoped_release released;
            new (self) onnx::Model(
                path, {.input_shapes = input_shapes, .constant_inputs = constant_inputs},
                [](const onnx::Imported& imported) -> onnx::Model::Runner {
                  auto run = std::make_shared<jit::CompiledFunction>(compiled(imported));
                  return [run](const std::vector<Tensor>& inputs) { return run->run(inputs); };
                },
                max_specializations);
          },
          nb::arg("path"), nb::arg("input_shapes") = std::map<std::string, IntList>(),
          nb::arg("constant_inputs") = std::map<std::string, Tensor>(),
          nb::arg("max_specializations") = onnx::Model::kDefaultMaxSpecializations)
      .def_prop_ro("input_names", &onnx::Model::input_names)
      .def_prop_ro("output_names", &onnx::Model::output_names)
      .def_prop_ro("num_outputs", &onnx::Model::num_outputs)
      .def_prop_ro("value_inputs", &onnx::Model::value_inputs)
      .def_prop_ro("shape_inputs", &onnx::Model::shape_inputs)
      .def_prop_ro("num_specializations", &onnx::Model::num_specializations)
      .def_prop_ro("max_specializations", &onnx::Model::max_specializations)
      .def(
          "run",
          [](onnx::Model& model, const std::vector<Tensor>& inputs) {
            nb::gil_scoped_release released;
            return model(inputs);
          },
          nb::arg("inputs"))
      // A call with inputs of sequence or optional type: their tensors
      // flat, one form per input (onnx_model.h); gives the outputs'
      // tensors and forms.
      .def(
          "call",
          [](onnx::Model& model, const std::vector<Tensor>& tensors,
             const std::vector<int64_t>& forms) {
            nb::gil_scoped_release released;
            onnx::Model::Flat outputs = model.call(tensors, forms);
            return std::make_tuple(outputs.tensors, outputs.forms);
          },
          nb::arg("tensors"), nb::arg("forms"))
      .def_prop_ro("has_composites", &onnx::Model::has_composites)
      // The graph of a model without value inputs, compiled.
      .def("compiled",
           [](const onnx::Model& model) {
             KILN_CHECK(model.single(), "onnx.Model.compiled: the model specializes on ",
                        "its value inputs; use compiled_for(inputs)");
             nb::gil_scoped_release released;
             return compiled(*model.single());
           })
      // The graph a call with `inputs` runs, compiled: it takes the inputs
      // less the value inputs.
      .def(
          "compiled_for",
          [](onnx::Model& model, const std::vector<Tensor>& inputs,
             const std::vector<int64_t>& forms) {
            nb::gil_scoped_release released;
            return compiled(*model.import_for(inputs, forms));
          },
          nb::arg("inputs"), nb::arg("forms") = std::vector<int64_t>());
  m.def("importable_ops", &onnx::importable_ops);
}

}  // namespace kiln::python
