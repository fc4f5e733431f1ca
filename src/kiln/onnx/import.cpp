// The import driver: parse the model, make inputs and initializers graph
// values (symbolic dims as size symbols), translate node by node
// (import_*.cpp), set the outputs.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_table.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

// The version of the default op set; 0 when the model imports none (its
// nodes may all be of other domains, which import_node then names).
int64_t default_opset(const pb::ModelProto& model) {
  for (const pb::OperatorSetIdProto& opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return opset.version();
  return 0;
}

DType input_dtype(const pb::ValueInfoProto& input) {
  return dtype_from_onnx(input.type().tensor_type().elem_type(), "input '" + input.name() + "'");
}

// The size symbols of the inputs' unknown dims. A dim_param names a symbol
// (the same name on two inputs is the same size), spelled as an identifier
// the IR reads (`p2o.DynamicDimension.0` becomes `p2o_DynamicDimension_0`).
// A dim with no dim_param, a negative dim_value, or a dim_param that names
// nothing ("?", which some exporters write for every unknown dim) is a
// size of its own: `<input>_<axis>`.
class InputSymbols {
 public:
  Dim dim(const pb::ValueInfoProto& input, int axis) {
    const pb::TensorShapeProto_Dimension& dim = input.type().tensor_type().shape().dim(axis);
    if (dim.has_dim_value() && dim.dim_value() >= 0) return dim.dim_value();
    if (dim.has_dim_param() && names_something(dim.dim_param())) {
      auto [found, added] = by_param_.emplace(dim.dim_param(), "");
      if (added) found->second = unique(identifier(dim.dim_param()));
      return Dim::symbol(found->second);
    }
    return Dim::symbol(unique(identifier(input.name() + "_" + std::to_string(axis))));
  }

 private:
  static bool names_something(const std::string& text) {
    return std::any_of(text.begin(), text.end(),
                       [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)); });
  }

  // [A-Za-z_][A-Za-z0-9_]*, other than the functions max and min.
  static std::string identifier(const std::string& text) {
    std::string out;
    for (char ch : text)
      out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
    if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
    if (out == "max" || out == "min") out += "_";
    return out;
  }

  std::string unique(const std::string& base) {
    std::string name = base;
    for (int i = 2; !taken_.insert(name).second; ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }

  std::map<std::string, std::string> by_param_;
  std::set<std::string> taken_;
};

DimList input_shape(const pb::ValueInfoProto& input, const ImportOptions& options,
                    InputSymbols& symbols) {
  auto given = options.input_shapes.find(input.name());
  if (given != options.input_shapes.end()) return to_dims(given->second);
  KILN_CHECK(input.type().has_tensor_type() && input.type().tensor_type().has_shape(),
             "onnx import: input '", input.name(),
             "' has no tensor shape; give one in input_shapes");
  DimList shape;
  for (int axis = 0; axis < input.type().tensor_type().shape().dim_size(); ++axis)
    shape.push_back(symbols.dim(input, axis));
  return shape;
}

// Whether an input may be specialized on (Note [Value inputs] in
// import_context.cpp): a scalar or a vector (shapes, axes, bounds,
// Resize's scales), or an integer or bool input of few elements; a call
// checks the count it gives. A float input of more dims is data.
bool may_hold_a_value(const TensorMeta& type) {
  if (type.shape.size() <= 1) return true;
  if (is_floating(type.dtype) || !is_static(type.shape)) return false;
  int64_t count = 1;
  for (int64_t size : to_static(type.shape))
    count *= size;
  return count <= kMaxValueInputElements;
}

void import_node(const pb::NodeProto& node, ImportContext& context) {
  std::string where = "onnx import: node '" + node.name() + "' (" + node.op_type() + ")";
  const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
  KILN_CHECK(context.opset() > 0 || !default_domain, where,
             ": the model imports no version of the default ONNX op set, which the node is of");
  ImportFn importer = find_importer(node);
  KILN_CHECK(importer, "onnx import: op '", table_key(node), "' (node '", node.name(),
             "') has no kiln translation");
  try {
    // Sizes the model needs equal and kiln cannot prove so (after two
    // resizes, `(h - 1) // 16 + 1` and `2*((h - 1) // 32) + 2`) are
    // assumed, as guards every call checks: ONNX Runtime checks them when
    // it runs, and so does the imported graph.
    jit::GraphAssumptions assumptions(context.root_graph(), where);
    if (!import_on_sizes(node, context)) importer(node, context);
    assumptions.commit();
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.rfind("onnx import: ", 0) == 0) message = message.substr(13);
    throw Error(e.kind(), where + ": " + message);
  }
}

}  // namespace

std::vector<jit::Value*> import_subgraph(const pb::GraphProto& graph, ImportContext& context) {
  for (const pb::TensorProto& proto : graph.initializer())
    context.define(proto.name(), context.constant(tensor_from_proto(proto, context.folder())));
  for (const pb::NodeProto& node : graph.node())
    import_node(node, context);
  std::vector<jit::Value*> outputs;
  for (const pb::ValueInfoProto& output : graph.output())
    outputs.push_back(context.value(output.name()));
  return outputs;
}

Imported try_import_model_bytes(const std::string& bytes, const std::string& folder,
                                const ImportOptions& options) {
  pb::ModelProto model;
  KILN_CHECK(model.ParseFromString(bytes),
             "onnx import: not an ONNX model (the protobuf does "
             "not parse)");
  KILN_CHECK(model.has_graph(), "onnx import: the model has no graph");
  const pb::GraphProto& graph = model.graph();
  check_every_op_translates(graph);  // one error naming every op kiln lacks
  Imported result;
  result.opset = default_opset(model);
  result.graph = std::make_shared<jit::Graph>();
  ImportContext context(*result.graph, result.opset, folder);

  // Weights (floating initializers) become named parameters; integer ones
  // (shapes, axes, indices) constants, which import-time folding reads.
  std::unordered_set<std::string> initialized;
  for (const pb::TensorProto& proto : graph.initializer()) {
    KILN_CHECK(!proto.name().empty() && initialized.insert(proto.name()).second,
               "onnx import: initializer names must be unique and non-empty ('", proto.name(),
               "')");
    Tensor data = tensor_from_proto(proto, folder);
    jit::Value* value =
        is_floating(data.dtype())
            ? result.graph->add_param(proto.name(), {data.dtype(), to_dims(data.shape())}, data)
            : context.constant(data);
    context.define(proto.name(), value);
  }
  InputSymbols symbols;
  std::vector<std::string> unformed;  // sequence and optional inputs given no form
  for (const pb::ValueInfoProto& input : graph.input()) {
    if (initialized.count(input.name())) continue;  // older models list initializers as inputs
    if (input.type().has_sequence_type() || input.type().has_optional_type()) {
      result.composite_inputs.push_back(input.name());
      result.input_names.push_back(input.name());
      if (!add_composite_input(input, options, context)) unformed.push_back(input.name());
      continue;
    }
    auto bound = options.constant_inputs.find(input.name());
    if (bound != options.constant_inputs.end()) {
      context.define(input.name(), context.constant(bound->second));
      continue;
    }
    jit::Value* value = result.graph->add_input(
        {input_dtype(input), input_shape(input, options, symbols)}, input.name());
    context.define(input.name(), value);
    if (may_hold_a_value(value->type())) context.add_value_candidate(value, input.name());
    result.input_names.push_back(input.name());
  }
  for (const pb::ValueInfoProto& output : graph.output())
    result.output_names.push_back(output.name());
  result.num_outputs = result.output_names.size();
  if (!unformed.empty()) {
    result.value_inputs_reason = "onnx import: input '" + unformed[0] +
                                 "' is a sequence or an optional, whose tensors the graph takes: "
                                 "onnx::Model (kiln.onnx.load) imports the model per number and "
                                 "shapes of them";
    result.graph = nullptr;
    return result;
  }
  try {
    for (const pb::NodeProto& node : graph.node())
      import_node(node, context);
  } catch (const Error& e) {
    const std::set<std::string>& requested = context.requested_inputs();
    const std::set<std::string>& shapes = context.requested_shapes();
    if (requested.empty() && shapes.empty()) throw;
    for (const std::string& name : result.input_names) {
      if (requested.count(name)) result.value_inputs.push_back(name);
      if (shapes.count(name)) result.shape_inputs.push_back(name);
    }
    result.value_inputs_reason = e.what();
    result.graph = nullptr;
    return result;
  }
  std::vector<jit::Value*> outputs = flat_outputs(graph, context, result.output_forms);
  result.graph->set_outputs(outputs);
  result.num_outputs = outputs.size();  // a sequence's tensors are outputs of their own
  context.finish();
  return result;
}

Imported import_model_bytes(const std::string& bytes, const std::string& folder,
                            const ImportOptions& options) {
  Imported result = try_import_model_bytes(bytes, folder, options);
  if (!result.graph) throw Error(ErrorKind::Runtime, result.value_inputs_reason);
  return result;
}

Imported import_model(const std::string& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "onnx import: cannot open '", path, "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string folder = std::filesystem::path(path).parent_path().string();
  try {
    return import_model_bytes(bytes.str(), folder, options);
  } catch (const Error& e) {
    throw Error(e.kind(), path + ": " + e.what());
  }
}

}  // namespace kiln::onnx
