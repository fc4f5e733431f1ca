// The export driver: unfuse, name the inputs and weights, translate node by
// node (the export_*.cpp tables), name the outputs, serialize.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <unordered_set>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/rebatch.h"
#include "kiln/onnx/export_context.h"
#include "kiln/onnx/export_widen.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Graph;
using jit::Node;
using jit::Value;

// linear_act(x, W, b) -> act(linear(x, W, b)); conv2d_act likewise.
void unfuse_with_activation(Graph& graph, Node* node, const std::string& base) {
  Attrs attrs;
  for (const auto& [name, value] : node->attrs().items())
    if (name != "activation") attrs.set(name, value);
  Node* producer = graph.insert_before(node, op(base), node->inputs(), attrs);
  Node* activation =
      graph.insert_before(node, op(node->attrs().get_string("activation")), {producer->output()});
  node->output()->replace_all_uses_with(activation->output());
  graph.erase(node);
}

// The activation of a conv2d_fused over v, as the ops the fusion pass found
// (ops/conv_fused_ops.cpp gives alpha and beta their meanings).
Value* unfused_activation(Graph& graph, Node* node, Value* v) {
  const Attrs& attrs = node->attrs();
  const std::string& name = attrs.get_string("activation");
  const double alpha = attrs.get_float("alpha"), beta = attrs.get_float("beta");
  auto emit = [&](const char* op_name, std::vector<Value*> inputs, const Attrs& op_attrs = {}) {
    return graph.insert_before(node, op(op_name), std::move(inputs), op_attrs)->output();
  };
  auto number = [&](double value) {
    return graph.add_constant(full({}, Scalar(value), TensorOptions{v->dtype()}));
  };
  auto hardsigmoid = [&] {
    Value* shifted = emit("add", {emit("mul", {v, number(alpha)}), number(beta)});
    return emit("clamp", {shifted}, {{"min", 0.0}, {"max", 1.0}});
  };
  if (name == "none") return v;
  if (name == "relu" || name == "sigmoid" || name == "tanh") return emit(name.c_str(), {v});
  if (name == "clamp") {
    auto bound = [](double b) {
      return std::isinf(b) ? AttrValue(std::monostate{}) : AttrValue(b);
    };
    return emit("clamp", {v}, {{"min", bound(alpha)}, {"max", bound(beta)}});
  }
  if (name == "hardsigmoid") return hardsigmoid();
  if (name == "leaky_relu") {
    Value* leaky = emit("leaky_relu", {v}, {{"negative_slope", alpha}});
    return std::isinf(beta) ? leaky : emit("maximum", {leaky, number(beta)});
  }
  if (name == "hardswish") return emit("mul", {v, hardsigmoid()});
  KILN_CHECK(name == "silu", "onnx export: conv2d_fused with activation '", name, "'");
  return emit("mul", {v, emit("sigmoid", {v})});
}

// conv2d_fused(x, w, b, r) -> activation(conv2d(x, w, b) + r) * scale_after
// + shift_after; with layout nhwc, between transposes to NCHW and back.
void unfuse_conv_epilogue(Graph& graph, Node* node) {
  Attrs attrs;
  for (const auto& [name, value] : node->attrs().items())
    if (name != "activation" && name != "alpha" && name != "beta" && name != "scale_after" &&
        name != "shift_after" && name != "layout") {
      attrs.set(name, value);
    }
  const bool nhwc = node->attrs().get_string("layout") == "nhwc";
  auto layout = [&](Value* v, IntList dims) {
    if (!nhwc) return v;
    return graph.insert_before(node, op("permute"), {v}, {{"dims", std::move(dims)}})->output();
  };
  std::vector<Value*> conv_inputs{layout(node->input(0), {0, 3, 1, 2}), node->input(1)};
  if (node->inputs().size() > 2 && node->input(2)) conv_inputs.push_back(node->input(2));
  Value* v = graph.insert_before(node, op("conv2d"), conv_inputs, attrs)->output();
  v = layout(v, {0, 2, 3, 1});
  if (node->inputs().size() > 3 && node->input(3)) {
    v = graph.insert_before(node, op("add"), {v, node->input(3)})->output();
  }
  v = unfused_activation(graph, node, v);
  const double scale = node->attrs().get_float("scale_after");
  const double shift = node->attrs().get_float("shift_after");
  auto number = [&](double value) {
    return graph.add_constant(full({}, Scalar(value), TensorOptions{v->dtype()}));
  };
  if (scale != 1.0) v = graph.insert_before(node, op("mul"), {v, number(scale)})->output();
  if (shift != 0.0) v = graph.insert_before(node, op("add"), {v, number(shift)})->output();
  node->output()->replace_all_uses_with(v);
  graph.erase(node);
}

// max_pool2d_nhwc(x) -> permute(max_pool2d(permute(x))).
void unfuse_channels_last_pool(Graph& graph, Node* node) {
  auto permute = [&](Value* v, IntList dims) {
    return graph.insert_before(node, op("permute"), {v}, {{"dims", std::move(dims)}})->output();
  };
  Value* nchw = permute(node->input(0), {0, 3, 1, 2});
  Value* pooled = graph.insert_before(node, op("max_pool2d"), {nchw}, node->attrs())->output();
  node->output()->replace_all_uses_with(permute(pooled, {0, 2, 3, 1}));
  graph.erase(node);
}

// fused_elementwise -> the ops of its program, in order.
void unfuse_program(Graph& graph, Node* node) {
  const Program& program = parse_program(node->attrs().get_string("program"));
  std::vector<Value*> results;
  for (const Instruction& instruction : program.instructions) {
    std::vector<Value*> operands;
    for (const Operand& operand : instruction.operands)
      operands.push_back(operand.is_result ? results.at(operand.index)
                                           : node->input(operand.index));
    results.push_back(
        graph.insert_before(node, *instruction.op, operands, instruction.attrs)->output());
  }
  node->output()->replace_all_uses_with(results.back());
  graph.erase(node);
}

// The fused ops are kiln's own; ONNX gets the ops they stand for.
void unfuse(Graph& graph) {
  for (Node* node : graph.nodes()) {
    const std::string& name = node->op().name;
    if (name == "linear_act") unfuse_with_activation(graph, node, "linear");
    if (name == "conv2d_act") unfuse_with_activation(graph, node, "conv2d");
    if (name == "conv2d_fused") unfuse_conv_epilogue(graph, node);
    if (name == "max_pool2d_nhwc") unfuse_channels_last_pool(graph, node);
    if (name == "fused_elementwise") unfuse_program(graph, node);
  }
}

// Symbolic attributes export where the op's exporter computes them in the
// graph (exports_symbolic_attrs); any other is refused here, by name, rather
// than deep inside an exporter.
void check_symbolic_attrs(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    if (exports_symbolic_attrs(node->op().name)) continue;
    for (const auto& [name, value] : node->attrs().items()) {
      KILN_CHECK(!attr_is_symbolic(value), "onnx export: attribute '", name, "' of ",
                 node->op().name, " (node %", node->output()->id(), ") is the symbolic size ",
                 attr_to_string(value), ", which the ONNX export of ", node->op().name,
                 " cannot compute in the graph");
    }
  }
}

// A graph with symbolic sizes names its own dims; dynamic_batch (made for
// static graphs) is accepted when it says no more than they do.
bool use_dynamic_batch(const Graph& graph, const ExportOptions& options) {
  if (!options.dynamic_batch || !graph.is_symbolic()) return options.dynamic_batch;
  for (const Value* input : graph.inputs()) {
    KILN_CHECK_VALUE(input->shape().empty() || input->shape()[0].is_symbolic(),
                     "onnx export: dynamic_batch on a graph with symbolic sizes, whose input '",
                     input->name(), "' has the static first dim ", input->shape()[0],
                     " (the graph's own symbols are exported; leave dynamic_batch off)");
  }
  return false;
}

// Static dims as dim_value; a symbolic one as dim_param, named by its text
// (`batch`, `2*batch`): ONNX runtimes take equal names for equal sizes.
void set_type(pb::ValueInfoProto& info, const Value* value, bool dynamic_batch,
              const std::map<std::string, int64_t>& pinned) {
  pb::TypeProto_Tensor* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_dtype(value->dtype()));
  pb::TensorShapeProto* shape = tensor->mutable_shape();
  const DimList& dims = value->shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    pb::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (i == 0 && dynamic_batch) {
      dim->set_dim_param("batch");
    } else if (dims[i].is_symbolic()) {
      const std::vector<std::string> symbols = dims[i].expr().symbols();
      if (std::all_of(symbols.begin(), symbols.end(),
                      [&](const std::string& s) { return pinned.count(s) > 0; })) {
        dim->set_dim_value(dims[i].expr().evaluate(pinned));
      } else {
        dim->set_dim_param(dims[i].to_string());
      }
    } else {
      dim->set_dim_value(dims[i].static_value());
    }
  }
}

// The run-time source of each symbol: the first input dim that is it alone.
void add_symbol_sources(const Value* input, const std::string& name, ExportContext& context) {
  const DimList& dims = input->shape();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (std::string symbol = lone_symbol(dims[d]); !symbol.empty())
      context.add_symbol_source(symbol, name, int64_t(d));
  }
}

// Every name the sub-graphs of `node` read (their own and outer ones).
void add_subgraph_reads(const pb::NodeProto& node, std::unordered_set<std::string>& read) {
  for (const pb::AttributeProto& attr : node.attribute()) {
    std::vector<const pb::GraphProto*> graphs;
    if (attr.has_g()) graphs.push_back(&attr.g());
    for (const pb::GraphProto& graph : attr.graphs())
      graphs.push_back(&graph);
    for (const pb::GraphProto* graph : graphs) {
      for (const pb::NodeProto& inner : graph->node()) {
        read.insert(inner.input().begin(), inner.input().end());
        add_subgraph_reads(inner, read);
      }
      for (const pb::ValueInfoProto& output : graph->output())
        read.insert(output.name());
    }
  }
}

// Drops the model graph's nodes nothing reads: what a translation made
// redundant (the input projection an LSTM op computes itself,
// export_rnn.cpp). Then the initializers no kept node reads (a module's
// buffers an inference graph never uses, such as a batch norm's
// num_batches_tracked: ONNX Runtime warns about each). Initializers that are
// also graph inputs (keep_initializers_as_inputs) stay, being the
// signature.
void remove_dead_nodes(pb::GraphProto& graph, bool prune_initializers) {
  std::unordered_set<std::string> read;
  for (const pb::ValueInfoProto& output : graph.output())
    read.insert(output.name());
  std::vector<bool> live(size_t(graph.node_size()), false);
  for (int k = graph.node_size() - 1; k >= 0; --k) {
    const pb::NodeProto& node = graph.node(k);
    bool needed = false;
    for (const std::string& output : node.output())
      needed = needed || read.count(output) > 0;
    if (!needed) continue;
    live[size_t(k)] = true;
    read.insert(node.input().begin(), node.input().end());
    add_subgraph_reads(node, read);
  }
  pb::GraphProto kept_nodes;
  for (int k = 0; k < graph.node_size(); ++k)
    if (live[size_t(k)]) kept_nodes.add_node()->Swap(graph.mutable_node(k));
  graph.mutable_node()->Swap(kept_nodes.mutable_node());
  if (!prune_initializers) return;
  pb::GraphProto kept_initializers;
  for (pb::TensorProto& initializer : *graph.mutable_initializer())
    if (read.count(initializer.name()) > 0) kept_initializers.add_initializer()->Swap(&initializer);
  graph.mutable_initializer()->Swap(kept_initializers.mutable_initializer());
}

std::string output_name(const ExportOptions& options, size_t i) {
  if (i < options.output_names.size()) return options.output_names[i];
  return i == 0 ? "output" : "output_" + std::to_string(i);
}

}  // namespace

bool can_export(const std::string& op_name) {
  if (op_name == "linear_act" || op_name == "conv2d_act" || op_name == "conv2d_fused" ||
      op_name == "max_pool2d_nhwc" || op_name == "fused_elementwise")
    return true;
  return find_exporter(op_name) != nullptr;
}

std::string export_model_bytes(const Graph& source, size_t num_outputs,
                               const ExportOptions& options) {
  KILN_CHECK_VALUE(options.opset_version >= 13 && options.opset_version <= 17,
                   "onnx export: opset_version ", options.opset_version,
                   " is not one kiln writes (13 to 17)");
  KILN_CHECK_VALUE(num_outputs <= source.outputs().size(), "onnx export: ", num_outputs,
                   " outputs asked for, the graph has ", source.outputs().size());
  std::unique_ptr<Graph> graph = source.clone();
  // Unfusing infers the new nodes' types: over symbolic sizes it decides
  // as the trace did, from the graph's guards.
  jit::GraphShapeScope shape_scope(*graph);
  jit::for_each_graph(static_cast<const Graph&>(*graph), check_symbolic_attrs);
  jit::for_each_graph(*graph, unfuse);
  bool dynamic_batch = use_dynamic_batch(*graph, options);
  // Sizes a guard fixes (`features == 512`) are written as that value, so a
  // runtime refuses other sizes at the input instead of deep in the graph.
  const std::map<std::string, int64_t> pinned = graph->fixed_symbols();
  int64_t batch = dynamic_batch ? jit::batch_size_of(*graph) : -1;

  pb::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln");
  model.set_producer_version("0.1.0");
  pb::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset_version);
  pb::GraphProto& onnx_graph = *model.mutable_graph();
  onnx_graph.set_name("kiln");
  ExportContext context(onnx_graph, options.opset_version, dynamic_batch, batch);

  KILN_CHECK_VALUE(options.input_names.size() <= graph->inputs().size(),
                   "onnx export: ", options.input_names.size(),
                   " input names given for a graph of ", graph->inputs().size(), " inputs");
  for (size_t i = 0; i < graph->inputs().size(); ++i) {
    const Value* input = graph->inputs()[i];
    std::string base = input->name().empty() ? "input" : input->name();
    if (i < options.input_names.size()) base = options.input_names[i];
    std::string name = context.fresh(base);
    context.bind(input, name);
    pb::ValueInfoProto* info = onnx_graph.add_input();
    info->set_name(name);
    set_type(*info, input, dynamic_batch && !input->shape().empty(), pinned);
    add_symbol_sources(input, name, context);
  }
  for (const Value* param : graph->params()) {
    KILN_CHECK_VALUE(param->data().defined(), "onnx export: parameter '", param->name(),
                     "' has no weights");
    const std::string name = context.fresh(param->name());
    if (options.export_params) context.initializer(param->data(), name);
    context.bind(param, name);
    if (options.export_params && !options.keep_initializers_as_inputs) continue;
    pb::ValueInfoProto* info = onnx_graph.add_input();
    info->set_name(name);
    set_type(*info, param, false, pinned);
  }
  export_nodes(*graph, context);
  for (size_t i = 0; i < num_outputs; ++i) {
    const Value* value = graph->outputs()[i];
    std::string name = context.fresh(output_name(options, i));
    context.node("Identity", {context.name(value)}, {name});
    pb::ValueInfoProto* info = onnx_graph.add_output();
    info->set_name(name);
    set_type(*info, value, dynamic_batch && !value->shape().empty(), pinned);
  }
  remove_dead_nodes(onnx_graph, !options.keep_initializers_as_inputs);
  widen_types_onnx_lacks(model, options.opset_version);
  std::string bytes;
  KILN_CHECK(model.SerializeToString(&bytes),
             "onnx export: the model does not serialize "
             "(over protobuf's 2 GB limit?)");
  return bytes;
}

void export_model(const Graph& graph, size_t num_outputs, const std::string& path,
                  const ExportOptions& options) {
  std::string bytes = export_model_bytes(graph, num_outputs, options);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(out, "onnx export: cannot write '", path, "'");
  out.write(bytes.data(), std::streamsize(bytes.size()));
  KILN_CHECK(out.good(), "onnx export: cannot write '", path, "'");
}

}  // namespace kiln::onnx
