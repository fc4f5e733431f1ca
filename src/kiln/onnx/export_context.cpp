#include "kiln/onnx/export_context.h"

#include <cstring>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/util/error.h"

namespace kiln::onnx {

pb::TensorProto_DataType onnx_dtype(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return pb::TensorProto_DataType_BOOL;
    case DType::Int8:
      return pb::TensorProto_DataType_INT8;
    case DType::UInt8:
      return pb::TensorProto_DataType_UINT8;
    case DType::Int16:
      return pb::TensorProto_DataType_INT16;
    case DType::Int32:
      return pb::TensorProto_DataType_INT32;
    case DType::Int64:
      return pb::TensorProto_DataType_INT64;
    case DType::Float32:
      return pb::TensorProto_DataType_FLOAT;
    case DType::Float64:
      return pb::TensorProto_DataType_DOUBLE;
  }
  return pb::TensorProto_DataType_UNDEFINED;
}

IntList static_shape(const jit::Node& node, const jit::Value* value) {
  const DimList& dims = value->shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    KILN_CHECK(dims[i].is_static(), "onnx export: ", node.op().name, " (node %",
               node.output()->id(), ") needs a concrete size for dim ", i, " of ", to_string(dims),
               ", got the symbolic size ", dims[i]);
  }
  return to_static(dims);
}

ExportContext::ExportContext(pb::GraphProto& graph, const ExportContext& outer)
    : graph_(graph),
      root_(outer.root_),
      opset_(outer.opset_),
      dynamic_batch_(outer.dynamic_batch_),
      batch_(outer.batch_),
      names_in_use_(outer.names_in_use_),
      symbol_sources_(outer.symbol_sources_),
      size_names_(outer.size_names_),
      input_shapes_(outer.input_shapes_) {}

std::string ExportContext::fresh(const std::string& base) {
  for (;;) {
    int count = names_in_use_->counters[base]++;
    std::string name = count == 0 ? base : base + "_" + std::to_string(count);
    if (names_in_use_->taken.insert(name).second) return name;
  }
}

void ExportContext::bind(const jit::Value* value, std::string name) {
  names_in_use_->taken.insert(name);
  names_[value] = std::move(name);
}

std::string ExportContext::name(const jit::Value* value) {
  if (!value) return "";
  auto found = names_.find(value);
  if (found != names_.end()) return found->second;
  // Constants are written the first time a node reads them.
  KILN_CHECK(value->kind() == jit::ValueKind::Constant, "onnx export: value %", value->id(),
             " is read before it is written");
  std::string name = initializer(value->data(), fresh("const"));
  names_[value] = name;
  return name;
}

std::string ExportContext::initializer(const Tensor& data, const std::string& name) {
  Tensor dense = contiguous(data);
  pb::TensorProto* tensor = root_.add_initializer();
  std::string chosen = name.empty() ? fresh("const") : name;
  tensor->set_name(chosen);
  tensor->set_data_type(onnx_dtype(dense.dtype()));
  for (int64_t dim : dense.shape())
    tensor->add_dims(dim);
  tensor->set_raw_data(dense.data_ptr(), size_t(dense.numel()) * element_size(dense.dtype()));
  return chosen;
}

std::string ExportContext::ints(const std::vector<int64_t>& values) {
  Tensor data = empty({int64_t(values.size())}, DType::Int64);
  if (!values.empty()) std::memcpy(data.data_ptr(), values.data(), values.size() * 8);
  return initializer(data);
}

std::string ExportContext::scalar(double value, DType dtype) {
  return initializer(full({}, value, dtype));
}

std::string ExportContext::cast(const std::string& input, DType dtype) {
  pb::NodeProto* made = nullptr;
  std::string out = temp("Cast", {input}, &made);
  set_attr(*made, "to", int64_t(onnx_dtype(dtype)));
  return out;
}

std::string ExportContext::as_dtype(const jit::Value* value, DType dtype) {
  if (value->dtype() == dtype) return name(value);
  if (value->kind() == jit::ValueKind::Constant) return initializer(to(value->data(), dtype));
  return cast(name(value), dtype);
}

pb::NodeProto& ExportContext::node(const std::string& op_type,
                                   const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs) {
  pb::NodeProto* made = graph_.add_node();
  made->set_op_type(op_type);
  made->set_name(fresh(op_type));
  for (const std::string& input : inputs)
    made->add_input(input);
  for (const std::string& output : outputs) {
    made->add_output(output);
    produced_.insert(output);
  }
  return *made;
}

pb::NodeProto& ExportContext::node_for(const jit::Value* value, const std::string& op_type,
                                       const std::vector<std::string>& inputs) {
  std::string out = fresh(str("v", value->id()));
  bind(value, out);
  return node(op_type, inputs, {out});
}

std::string ExportContext::temp(const std::string& op_type, const std::vector<std::string>& inputs,
                                pb::NodeProto** made) {
  std::string out = fresh("t");
  pb::NodeProto& created = node(op_type, inputs, {out});
  if (made) *made = &created;
  return out;
}

std::vector<int64_t> ExportContext::reshape_target(const IntList& shape,
                                                   const jit::Value* input) const {
  std::vector<int64_t> target(shape.begin(), shape.end());
  bool batch_first = input && !input->shape().empty() && input->shape()[0] == Dim(batch_);
  if (dynamic_batch_ && batch_first && !target.empty() && target[0] == batch_) target[0] = 0;
  return target;
}

void set_attr(pb::NodeProto& node, const std::string& name, int64_t value) {
  pb::AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(pb::AttributeProto_AttributeType_INT);
  attr->set_i(value);
}

void set_attr(pb::NodeProto& node, const std::string& name, float value) {
  pb::AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(pb::AttributeProto_AttributeType_FLOAT);
  attr->set_f(value);
}

void set_attr(pb::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  pb::AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(pb::AttributeProto_AttributeType_INTS);
  for (int64_t value : values)
    attr->add_ints(value);
}

void set_attr(pb::NodeProto& node, const std::string& name, const std::string& value) {
  pb::AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(pb::AttributeProto_AttributeType_STRING);
  attr->set_s(value);
}

ExportFn find_exporter(const std::string& op_name) {
  static const std::unordered_map<std::string, ExportFn> table = [] {
    std::unordered_map<std::string, ExportFn> all;
    add_elementwise_exporters(all);
    add_tensor_exporters(all);
    add_nn_exporters(all);
    add_random_exporters(all);
    add_resample_exporters(all);
    add_math_exporters(all);
    add_order_exporters(all);
    add_function_exporters(all);
    add_control_flow_exporters(all);
    add_generic_exporters(all);  // refuses an op that has a hand-written exporter too
    return all;
  }();
  auto found = table.find(op_name);
  return found == table.end() ? nullptr : found->second;
}

void export_nodes(const jit::Graph& graph, ExportContext& context) {
  for (const jit::Node* node : graph.nodes()) {
    ExportFn exporter = find_exporter(node->op().name);
    const std::string& why = node->op().onnx.not_exportable;
    KILN_CHECK(exporter, "onnx export: op '", node->op().name, "' has no ONNX translation (node %",
               node->output()->id(), ")", why.empty() ? "" : ": ", why);
    exporter(*node, context);
  }
}

void set_value_type(pb::ValueInfoProto& info, const jit::Value* value, bool with_dims) {
  pb::TypeProto_Tensor* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_dtype(value->dtype()));
  pb::TensorShapeProto* shape = tensor->mutable_shape();
  for (const Dim& dim : value->shape()) {
    pb::TensorShapeProto_Dimension* made = shape->add_dim();
    if (!with_dims) continue;
    if (dim.is_static()) {
      made->set_dim_value(dim.static_value());
    } else {
      made->set_dim_param(dim.to_string());
    }
  }
}

}  // namespace kiln::onnx
