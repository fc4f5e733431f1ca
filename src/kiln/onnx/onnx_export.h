// ONNX export: a kiln graph written as an ONNX model (protobuf, through
// Debian's libonnx), which ONNX Runtime and other runtimes run.
//
//   onnx::export_model(compiled.graph(), compiled.num_outputs(), "mlp.onnx",
//                      {.opset_version = 17, .dynamic_batch = true});
//
// Parameters become initializers under their state_dict names, graph inputs
// keep their names. Fused ops (linear_act, conv2d_act, conv2d_fused,
// fused_elementwise) are written as the ops they stand for. Every op of the table either has a
// translation (export_*.cpp, export_generic.cpp) or export fails naming it.
//
// A graph with symbolic sizes (issue 21) exports as it is: its symbolic
// dims become dim_params named by their text (`batch`, `seq`, `2*batch`),
// and sizes its ops take as attributes (a reshape to [batch, seq, 2, 8], a
// slice end seq // 2) are computed in the ONNX graph from the inputs'
// shapes (Shape -> Gather -> arithmetic -> Concat; export_sizes.cpp). A
// symbolic attribute of an op whose export cannot compute it is an error
// naming the op and the attribute.
//
// dynamic_batch, for static graphs, names the first dimension of every
// input and output "batch" (as dynamic_axes={"x": {0: "batch"}} does in
// torch.onnx.export); the graph's reshapes then follow the batch. On a
// symbolic graph it is accepted when every input's first dim is symbolic
// already, and changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::onnx {

struct ExportOptions {
  int64_t opset_version = 17;  // 13 to 17
  bool dynamic_batch = false;
  // Names for the graph inputs (their traced names when empty or short)
  // and outputs ("output", "output_1", ... when empty), as PyTorch's
  // input_names / output_names.
  std::vector<std::string> input_names = {};
  std::vector<std::string> output_names = {};
  // false: the weights are graph inputs the caller feeds, not initializers
  // (PyTorch's export_params=False).
  bool export_params = true;
  // The initializers are listed as graph inputs too, so a runtime may
  // override them (PyTorch's keep_initializers_as_inputs).
  bool keep_initializers_as_inputs = false;
};

// The model's serialized bytes; throws kiln::Error naming an op without a
// translation, or one whose attributes ONNX cannot express.
std::string export_model_bytes(const jit::Graph& graph, size_t num_outputs,
                               const ExportOptions& options = {});
void export_model(const jit::Graph& graph, size_t num_outputs, const std::string& path,
                  const ExportOptions& options = {});

// Whether export_model has a translation for this op.
bool can_export(const std::string& op_name);

}  // namespace kiln::onnx
