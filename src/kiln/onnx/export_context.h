// What the exporters of single ops (export_ops*.cpp) write through: the
// names of kiln values in the ONNX graph, new nodes, and initializers.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::onnx {

namespace pb = ::onnx;

pb::TensorProto_DataType onnx_dtype(DType dtype);

// The integer shape of a value. ONNX export writes static shapes only for
// now; a symbolic dim is an error naming it (export_model_bytes checks the
// whole graph first, so this is the exporters' safety net).
IntList static_shape(const jit::Value* value);

class ExportContext {
 public:
  ExportContext(pb::GraphProto& graph, int64_t opset, bool dynamic_batch, int64_t batch)
      : graph_(graph), opset_(opset), dynamic_batch_(dynamic_batch), batch_(batch) {}

  int64_t opset() const { return opset_; }
  bool dynamic_batch() const { return dynamic_batch_; }
  int64_t batch() const { return batch_; }

  // The ONNX name of a kiln value (absent optional input: "").
  std::string name(const jit::Value* value);
  void bind(const jit::Value* value, std::string name);
  // A name never used before, made from `base`.
  std::string fresh(const std::string& base);

  // The value as `dtype`: itself, a converted initializer for a constant,
  // or a Cast node.
  std::string as_dtype(const jit::Value* value, DType dtype);
  std::string cast(const std::string& input, DType dtype);

  // Initializers.
  std::string initializer(const Tensor& data, const std::string& name = "");
  std::string ints(const std::vector<int64_t>& values);  // 1-D int64
  std::string scalar(double value, DType dtype);         // 0-d

  // Appends a node; returns it so the caller can add attributes.
  pb::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs);
  // One output named after `value` (the kiln value it computes).
  pb::NodeProto& node_for(const jit::Value* value, const std::string& op_type,
                          const std::vector<std::string>& inputs);
  // A one-output node with a fresh output name, returned.
  std::string temp(const std::string& op_type, const std::vector<std::string>& inputs,
                   pb::NodeProto** made = nullptr);

  // A shape for Reshape/Expand: with a dynamic batch, a first dimension
  // equal to the batch (taken from an input whose first dimension is the
  // batch) is written as 0 ("copy it from the input") for Reshape.
  std::vector<int64_t> reshape_target(const IntList& shape, const jit::Value* input) const;

 private:
  pb::GraphProto& graph_;
  int64_t opset_;
  bool dynamic_batch_;
  int64_t batch_;
  std::unordered_map<const jit::Value*, std::string> names_;  // lookups only
  std::unordered_map<std::string, int> counters_;             // lookups only
  std::unordered_set<std::string> taken_;                     // lookups only
};

void set_attr(pb::NodeProto& node, const std::string& name, int64_t value);
void set_attr(pb::NodeProto& node, const std::string& name, float value);
void set_attr(pb::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
void set_attr(pb::NodeProto& node, const std::string& name, const std::string& value);

using ExportFn = void (*)(const jit::Node& node, ExportContext& context);
// The exporter of an op by name, or null.
ExportFn find_exporter(const std::string& op_name);

// Each file of exporters adds its own to the table.
void add_elementwise_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_tensor_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_nn_exporters(std::unordered_map<std::string, ExportFn>& table);

}  // namespace kiln::onnx
