// Types an ONNX op lacks: kiln has int8, uint8 and int16 everywhere, while
// ONNX ops take only some integer types (Pow, ReduceSum and Neg have no
// uint8; ReduceMax no int16 before opset 18), and ONNX Runtime has kernels
// for fewer still (Max, Where, ArgMax and Clip of int16 load and then find no
// kernel). So an op that computes on an 8- or 16-bit integer operand computes
// in the narrowest type of its schema's that holds every value (int32), and
// its results are cast back; ops that only move data (Reshape, Gather,
// Concat...) run on every type and are left alone. The schema is ONNX's own,
// read per node, rather than a list kept here by hand. Integer arithmetic in
// int32 then cast back wraps modulo 2^8 or 2^16 as the small type's does,
// and comparisons, maxima and floor division of values that fit are
// unchanged. One difference stays, as it is for int32 and int64 tensors
// already: an integer Pow whose power overflows saturates in ONNX Runtime
// where torch and kiln wrap.
#include "kiln/onnx/export_widen.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace kiln::onnx {
namespace {

using ElemType = pb::TensorProto_DataType;

std::string tensor_type_str(int elem_type) {
  static const std::map<int, std::string> kNames = {
      {pb::TensorProto_DataType_FLOAT, "float"},   {pb::TensorProto_DataType_DOUBLE, "double"},
      {pb::TensorProto_DataType_INT8, "int8"},     {pb::TensorProto_DataType_UINT8, "uint8"},
      {pb::TensorProto_DataType_INT16, "int16"},   {pb::TensorProto_DataType_INT32, "int32"},
      {pb::TensorProto_DataType_INT64, "int64"},   {pb::TensorProto_DataType_BOOL, "bool"},
      {pb::TensorProto_DataType_UINT16, "uint16"}, {pb::TensorProto_DataType_UINT32, "uint32"}};
  auto found = kNames.find(elem_type);
  return found == kNames.end() ? "" : "tensor(" + found->second + ")";
}

// The types that hold every value of `elem_type`, narrowest first.
std::vector<int> wider_types(int elem_type) {
  switch (elem_type) {
    case pb::TensorProto_DataType_INT8:
    case pb::TensorProto_DataType_UINT8:
    case pb::TensorProto_DataType_INT16:
      return {pb::TensorProto_DataType_INT32, pb::TensorProto_DataType_INT64};
    case pb::TensorProto_DataType_INT32:
      return {pb::TensorProto_DataType_INT64};
    default:
      return {};
  }
}

// The exporter names every value afresh across a model, sub-graphs
// included, so one map serves them all.
void add_element_types(const pb::GraphProto& graph, std::unordered_map<std::string, int>& types) {
  for (const pb::TensorProto& init : graph.initializer())
    types[init.name()] = init.data_type();
  auto add = [&](const auto& infos) {
    for (const pb::ValueInfoProto& info : infos) {
      if (info.type().has_tensor_type()) types[info.name()] = info.type().tensor_type().elem_type();
    }
  };
  add(graph.input());
  add(graph.value_info());
  add(graph.output());
  for (const pb::NodeProto& node : graph.node()) {
    for (const pb::AttributeProto& attr : node.attribute()) {
      if (attr.has_g()) add_element_types(attr.g(), types);
      for (const pb::GraphProto& body : attr.graphs())
        add_element_types(body, types);
    }
  }
}

// The element type of every tensor the model names, as ONNX's own shape
// inference (run on a copy, so the model keeps no inferred value_info) sees
// it.
std::unordered_map<std::string, int> element_types(const pb::ModelProto& model) {
  pb::ModelProto inferred = model;
  try {
    ::onnx::shape_inference::InferShapes(inferred);
  } catch (const std::exception&) {
    // What inference could not type keeps its operands as they are: the
    // checker names the problem if there is one.
  }
  std::unordered_map<std::string, int> types;
  add_element_types(inferred.graph(), types);
  return types;
}

bool is_small_int(int elem_type) {
  return elem_type == pb::TensorProto_DataType_INT8 ||
         elem_type == pb::TensorProto_DataType_UINT8 || elem_type == pb::TensorProto_DataType_INT16;
}

// Ops ONNX Runtime runs on every type, as they only move or view data.
const std::unordered_set<std::string> kMovesDataOnly = {
    "Cast",    "CastLike", "Identity", "Reshape", "Transpose", "Squeeze",  "Unsqueeze",
    "Flatten", "Concat",   "Split",    "Slice",   "Gather",    "GatherND", "GatherElements",
    "Expand",  "Tile",     "Shape",    "Size",    "If",        "Loop",     "Scan"};

const ::onnx::OpSchema::FormalParameter* formal_at(
    const std::vector<::onnx::OpSchema::FormalParameter>& formals, int k) {
  if (formals.empty()) return nullptr;
  if (size_t(k) < formals.size()) return &formals[size_t(k)];
  const auto& last = formals.back();
  return last.GetOption() == ::onnx::OpSchema::Variadic ? &last : nullptr;
}

// For each type parameter of `schema` that an operand of `node` has a type
// it does not allow: the type to compute in instead.
std::map<std::string, int> widened_params(const pb::NodeProto& node, const ::onnx::OpSchema& schema,
                                          const std::unordered_map<std::string, int>& types) {
  std::map<std::string, const std::vector<std::string>*> allowed;
  for (const auto& param : schema.typeConstraintParams())
    allowed[param.type_param_str] = &param.allowed_type_strs;
  auto allows = [&](const std::vector<std::string>& list, int elem_type) {
    std::string name = tensor_type_str(elem_type);
    return !name.empty() && std::find(list.begin(), list.end(), name) != list.end();
  };
  const bool moves_data_only = kMovesDataOnly.count(node.op_type()) > 0;
  std::map<std::string, int> widened;
  for (int k = 0; k < node.input_size(); ++k) {
    const auto* formal = formal_at(schema.inputs(), k);
    auto type = types.find(node.input(k));
    if (!formal || node.input(k).empty() || type == types.end()) continue;
    auto list = allowed.find(formal->GetTypeStr());
    if (list == allowed.end()) continue;
    bool computes_on_small_int = !moves_data_only && is_small_int(type->second);
    if (allows(*list->second, type->second) && !computes_on_small_int) continue;
    for (int wider : wider_types(type->second)) {
      if (!allows(*list->second, wider)) continue;
      widened.emplace(formal->GetTypeStr(), wider);
      break;
    }
  }
  return widened;
}

pb::NodeProto cast_node(const std::string& from, const std::string& to, int elem_type) {
  pb::NodeProto cast;
  cast.set_op_type("Cast");
  cast.add_input(from);
  cast.add_output(to);
  pb::AttributeProto* attr = cast.add_attribute();
  attr->set_name("to");
  attr->set_type(pb::AttributeProto::INT);
  attr->set_i(elem_type);
  return cast;
}

}  // namespace

namespace {

struct Rewriter {
  const std::unordered_map<std::string, int>& types;
  std::unordered_set<std::string>& names;
  int opset;
  int counter = 0;

  std::string fresh(const std::string& base) {
    std::string name;
    do {
      name = base + "_widened" + std::to_string(counter++);
    } while (!names.insert(name).second);
    return name;
  }

  void rewrite(pb::GraphProto& graph) {
    pb::GraphProto rewritten;
    for (pb::NodeProto& node : *graph.mutable_node()) {
      for (pb::AttributeProto& attr : *node.mutable_attribute()) {
        if (attr.has_g()) rewrite(*attr.mutable_g());
        for (pb::GraphProto& body : *attr.mutable_graphs())
          rewrite(body);
      }
      const ::onnx::OpSchema* schema =
          node.domain().empty() ? ::onnx::OpSchemaRegistry::Schema(node.op_type(), opset) : nullptr;
      std::map<std::string, int> widened;
      if (schema) widened = widened_params(node, *schema, types);
      if (widened.empty()) {
        rewritten.add_node()->Swap(&node);
        continue;
      }
      widen(node, *schema, widened, rewritten);
    }
    graph.mutable_node()->Swap(rewritten.mutable_node());
  }

  // Casts before `node` for its operands of a widened type parameter, the
  // node, then casts of its results of such a parameter back.
  void widen(pb::NodeProto& node, const ::onnx::OpSchema& schema,
             const std::map<std::string, int>& widened, pb::GraphProto& out) {
    for (int k = 0; k < node.input_size(); ++k) {
      const auto* formal = formal_at(schema.inputs(), k);
      if (!formal || node.input(k).empty()) continue;
      auto wide = widened.find(formal->GetTypeStr());
      if (wide == widened.end()) continue;
      std::string cast_name = fresh(node.input(k));
      *out.add_node() = cast_node(node.input(k), cast_name, wide->second);
      node.set_input(k, cast_name);
    }
    std::vector<pb::NodeProto> casts_back;
    for (int k = 0; k < node.output_size(); ++k) {
      const auto* formal = formal_at(schema.outputs(), k);
      auto type = types.find(node.output(k));
      if (!formal || node.output(k).empty() || type == types.end()) continue;
      if (widened.count(formal->GetTypeStr()) == 0) continue;
      std::string wide_name = fresh(node.output(k));
      casts_back.push_back(cast_node(wide_name, node.output(k), type->second));
      node.set_output(k, wide_name);
    }
    out.add_node()->Swap(&node);
    for (pb::NodeProto& cast : casts_back)
      out.add_node()->Swap(&cast);
  }
};

}  // namespace

void widen_types_onnx_lacks(pb::ModelProto& model, int opset) {
  const std::unordered_map<std::string, int> types = element_types(model);
  std::unordered_set<std::string> names;
  for (const auto& [name, type] : types)
    names.insert(name);
  Rewriter rewriter{types, names, opset};
  rewriter.rewrite(*model.mutable_graph());
}

}  // namespace kiln::onnx
