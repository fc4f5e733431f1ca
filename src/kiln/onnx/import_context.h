// What the translators of single ONNX nodes (import_ops*.cpp) build through:
// the kiln values of ONNX names, attribute readers, and emit(), which adds a
// kiln node or, when every input is known, computes it at once.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::onnx {

namespace pb = ::onnx;

// kiln's dtype for an ONNX data type; throws naming `what` when kiln has none.
DType dtype_from_onnx(int64_t type, const std::string& what);

// An ONNX tensor as a kiln tensor (raw or typed data, or external data
// under `folder`); throws naming it for types kiln lacks or bad sizes.
Tensor tensor_from_proto(const pb::TensorProto& proto, const std::string& folder);

class ImportContext {
 public:
  ImportContext(jit::Graph& graph, int64_t opset, std::string folder)
      : graph_(graph), opset_(opset), folder_(std::move(folder)) {}

  jit::Graph& graph() { return graph_; }
  int64_t opset() const { return opset_; }
  const std::string& folder() const { return folder_; }

  void define(const std::string& name, jit::Value* value);
  // The value of an ONNX name; null for "" (an absent optional input).
  jit::Value* value(const std::string& name) const;
  jit::Value* input(const pb::NodeProto& node, int i) const;  // null when absent
  // The data of a value known at import time (a constant), or throws
  // naming `what` ("Reshape's shape") as needing to be constant.
  const Tensor& constant_data(const jit::Value* value, const std::string& what) const;
  IntList constant_ints(const jit::Value* value, const std::string& what) const;
  jit::Value* constant(const Tensor& data);

  // A kiln op over values: a node, or its result at once when all inputs
  // are constants.
  jit::Value* emit(const std::string& op, const std::vector<jit::Value*>& inputs,
                   const Attrs& attrs = {});
  std::vector<jit::Value*> emit_multi(const std::string& op, const std::vector<jit::Value*>& inputs,
                                      const Attrs& attrs = {});

 private:
  jit::Graph& graph_;
  int64_t opset_;
  std::string folder_;
  std::unordered_map<std::string, jit::Value*> values_;  // lookups only
};

// Attribute readers; `fallback` when the node lacks the attribute.
int64_t attr_int(const pb::NodeProto& node, const std::string& name, int64_t fallback);
float attr_float(const pb::NodeProto& node, const std::string& name, float fallback);
std::string attr_string(const pb::NodeProto& node, const std::string& name,
                        const std::string& fallback);
IntList attr_ints(const pb::NodeProto& node, const std::string& name, const IntList& fallback);
bool has_attr(const pb::NodeProto& node, const std::string& name);
const pb::AttributeProto* find_attr(const pb::NodeProto& node, const std::string& name);

// Translates one node: defines its outputs in the context.
using ImportFn = void (*)(const pb::NodeProto& node, ImportContext& context);
ImportFn find_importer(const std::string& op_type);
void add_basic_importers(std::unordered_map<std::string, ImportFn>& table);
void add_nn_importers(std::unordered_map<std::string, ImportFn>& table);

}  // namespace kiln::onnx
