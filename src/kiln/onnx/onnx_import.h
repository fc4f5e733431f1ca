// ONNX import: an ONNX model file read into a kiln graph (initializers
// become named parameters), which a CompiledFunction then optimizes and
// runs (kiln.onnx.load in Python does both).
//
//   onnx::Imported model = onnx::import_model("mobilenet.onnx");
//   jit::CompiledFunction run(jit::Capture{model.graph, model.num_outputs});
//
// A symbolic input dimension stays symbolic (a dim_param names its size
// symbol; `input_shapes` fixes it instead), and the graph runs at any size.
// Nodes whose inputs are all known at import time (Shape, and the shape
// arithmetic models do on it) are computed then: with kiln's own kernels
// when static, on size expressions when symbolic (import_sizes.cpp). An op
// without a translation, an unsupported attribute or data type, a size a
// translation needs as a number but has as a symbol, and a malformed file
// raise kiln::Error naming what; external data must lie inside the
// model's folder. A model that feeds a shape, axes or a bound from an input
// is run by onnx::Model (onnx_model.h), which imports it per value.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::onnx {

// How a model input or output is given at a call, flat: one tensor
// (kTensorForm), an absent optional (kAbsentForm, no tensor), or a
// sequence of n >= 0 tensors (n).
constexpr int64_t kTensorForm = -1;
constexpr int64_t kAbsentForm = -2;

// What a call gives for an input of ONNX sequence or optional type: its
// form and the shapes of its tensors.
struct CompositeInput {
  int64_t form = kTensorForm;
  std::vector<IntList> shapes;
};

struct ImportOptions {
  // Fixed shapes for inputs, by name, in place of the file's (symbolic)
  // ones: a static graph.
  std::map<std::string, IntList> input_shapes = {};
  // Inputs bound to fixed values at import: they become constants and leave
  // the model's inputs. onnx::Model binds a model's value inputs (shapes,
  // axes, bounds given as inputs) this way per call.
  std::map<std::string, Tensor> constant_inputs = {};
  // The values given for inputs of ONNX sequence or optional type, which
  // kiln's graph holds as tensors known in number (import_sequences.cpp).
  std::map<std::string, CompositeInput> composite_inputs = {};
};

struct Imported {
  std::shared_ptr<jit::Graph> graph;
  size_t num_outputs = 0;
  // The graph's inputs (the model's, less constant_inputs) and outputs.
  std::vector<std::string> input_names, output_names;
  int64_t opset = 0;
  // try_import_model_bytes only: the inputs whose values the translation
  // needs and did not have (a Reshape's shape, a TopK's k fed from an
  // input), in input order, with the error of the first translation that
  // asked; `graph` is then null. onnx::Model (onnx_model.h) imports such a
  // model per distinct tuple of their values.
  std::vector<std::string> value_inputs;
  std::string value_inputs_reason;
  // The same for inputs whose shapes the translation needs as numbers (a
  // comparison of sizes that decides the graph's form): onnx::Model
  // imports such a model per distinct tuple of their shapes (input_shapes).
  std::vector<std::string> shape_inputs;
  // The inputs of ONNX sequence or optional type, in input order: the
  // graph takes their tensors (none when absent) where the model takes
  // each, and without their forms (composite_inputs) the import gives no
  // graph. Per output, its form (kTensorForm, ...): the graph's outputs are
  // the outputs' tensors in order.
  std::vector<std::string> composite_inputs;
  std::vector<int64_t> output_forms;
};

// The most elements an input may hold to be specialized on.
constexpr int64_t kMaxValueInputElements = 256;

// A model whose graph depends on its inputs' values is an error naming
// them (onnx::Model runs it; constant_inputs binds them).
Imported import_model(const std::string& path, const ImportOptions& options = {});
// From the bytes of a model; external data is resolved against `folder`.
Imported import_model_bytes(const std::string& bytes, const std::string& folder,
                            const ImportOptions& options = {});
// The same, except that a model whose graph depends on values of its
// inputs gives their names (value_inputs) and no graph.
Imported try_import_model_bytes(const std::string& bytes, const std::string& folder,
                                const ImportOptions& options = {});

// The ONNX op types import_model translates.
std::vector<std::string> importable_ops();

}  // namespace kiln::onnx
