// ONNX translations of the control-flow ops (jit/ir/control_flow.h) and of
// the fused recurrent cells that run inside kiln's RNN layers:
//
//   cond(pred, operands...)              -> If: then_branch and else_branch
//                                           read the operands by their outer
//                                           names (ONNX sub-graphs may)
//   while_loop(carried..., captures...)  -> the cond block once before the
//                                           loop, for Loop's cond input;
//                                           Loop(M, cond, carried...) whose
//                                           body is the body block, then the
//                                           cond block on what it returns
//   scan(init..., xs..., captures...)    -> Scan (directions 1 when reversed);
//                                           a scan without xs (a static
//                                           fori_loop) -> Loop with a trip
//                                           count, its ys flipped if reversed
//   lstm_cell_pointwise, gru_cell_pointwise -> Split, Sigmoid, Tanh, Mul, Add
//
// Scan rather than Loop for scans: ONNX Runtime slices Scan's inputs and
// writes its outputs in place, where a Loop gathers each step's slice and
// concatenates the per-step outputs at the end; Scan ran as fast or faster
// (docs/onnx.md has timings). One direction of an nn.LSTM / nn.GRU layer (an
// input projection feeding a scan whose step is one cell) is written as
// ONNX's LSTM / GRU op instead (export_rnn.cpp), faster again.
//
// A while_loop's max_iterations is Loop's trip count M: kiln raises an error
// when a loop would run past it, where ONNX stops there.
#include <climits>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Graph;
using jit::Node;
using jit::Value;
using Names = std::vector<std::string>;
using Table = std::unordered_map<std::string, ExportFn>;

// A node attribute holding a sub-graph, to be written.
pb::GraphProto& graph_attr(pb::NodeProto& node, const std::string& name, ExportContext& c) {
  pb::AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(pb::AttributeProto_AttributeType_GRAPH);
  pb::GraphProto* graph = attr->mutable_g();
  graph->set_name(c.fresh(name));
  return *graph;
}

// Writes `block`'s nodes into `c`, its inputs read as `inputs`; returns the
// names of its outputs.
Names write_block(const Graph& block, const Names& inputs, ExportContext& c) {
  KILN_CHECK(inputs.size() == block.inputs().size(), "onnx export: a block of ",
             block.owner() ? block.owner()->op().name : "a node", " takes ", block.inputs().size(),
             " inputs, given ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    c.bind(block.inputs()[i], inputs[i]);
  export_nodes(block, c);
  Names outputs;
  for (const Value* output : block.outputs())
    outputs.push_back(c.name(output));
  return outputs;
}

bool with_dims(const ExportContext& c) {
  // A re-batched static graph has other sizes at run time than its types say.
  return !c.dynamic_batch();
}

// A formal input of a sub-graph, typed as `value`.
void add_formal_input(pb::GraphProto& graph, const std::string& name, const Value* value,
                      const ExportContext& c) {
  pb::ValueInfoProto* info = graph.add_input();
  info->set_name(name);
  set_value_type(*info, value, with_dims(c));
}

// Fresh names for the formal inputs of a body, typed as `values`.
Names formal_inputs(pb::GraphProto& graph, const std::vector<Value*>& values, const char* base,
                    ExportContext& sub) {
  Names names;
  for (const Value* value : values) {
    names.push_back(sub.fresh(base));
    add_formal_input(graph, names.back(), value, sub);
  }
  return names;
}

// The scalar formal inputs of a Loop body: iteration number and condition.
void add_scalar_input(pb::GraphProto& graph, const std::string& name,
                      pb::TensorProto_DataType type) {
  pb::ValueInfoProto* info = graph.add_input();
  info->set_name(name);
  pb::TypeProto_Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(type);
  tensor->mutable_shape();  // rank 0
}

// Lists `names` as the sub-graph's outputs, typed as `values`. ONNX Runtime
// wants a sub-graph's outputs computed in it: a name that is a formal input,
// an outer value or an initializer, or one listed twice, goes through an
// Identity.
void set_outputs(pb::GraphProto& graph, ExportContext& sub, const Names& names,
                 const std::vector<const Value*>& values) {
  std::unordered_set<std::string> listed;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string name = names[i];
    if (!sub.produced_here(name) || !listed.insert(name).second) {
      name = sub.temp("Identity", {name});
      listed.insert(name);
    }
    pb::ValueInfoProto* info = graph.add_output();
    info->set_name(name);
    set_value_type(*info, values[i], with_dims(sub));
  }
}

std::vector<const Value*> const_values(const std::vector<Value*>& values) {
  return {values.begin(), values.end()};
}

// Fresh names for the node's outputs, bound to them.
Names bind_outputs(const Node& node, ExportContext& c) {
  Names names;
  for (const Value* output : node.outputs()) {
    names.push_back(c.fresh(str("v", output->id())));
    c.bind(output, names.back());
  }
  return names;
}

Names names_of(const std::vector<Value*>& values, size_t begin, size_t end, ExportContext& c) {
  Names names;
  for (size_t i = begin; i < end; ++i)
    names.push_back(c.name(values[i]));
  return names;
}

Names concat(Names a, const Names& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- cond -> If ----

void cond(const Node& node, ExportContext& c) {
  Names operands = names_of(node.inputs(), 1, node.inputs().size(), c);
  std::string pred = c.name(node.input(0));
  pb::NodeProto& made = c.node("If", {pred}, bind_outputs(node, c));
  for (size_t b = 0; b < 2; ++b) {
    pb::GraphProto& branch = graph_attr(made, b == 0 ? "then_branch" : "else_branch", c);
    ExportContext sub(branch, c);
    Names results = write_block(node.block(b), operands, sub);
    set_outputs(branch, sub, results, const_values(node.block(b).outputs()));
  }
}

// ---- while_loop -> Loop ----

void while_loop(const Node& node, ExportContext& c) {
  const size_t num_carried = size_t(node.attrs().get_int("num_carried"));
  const Graph& cond_block = node.block(0);
  const Graph& body_block = node.block(1);
  Names inputs = names_of(node.inputs(), 0, node.inputs().size(), c);
  Names captures(inputs.begin() + std::ptrdiff_t(num_carried), inputs.end());
  std::string first = write_block(cond_block, inputs, c).at(0);
  int64_t max_iterations = node.attrs().get_int("max_iterations");
  std::string trip_count =
      max_iterations < 0 ? "" : c.initializer(full({}, max_iterations, DType::Int64));
  Names loop_inputs = {trip_count, first};
  loop_inputs.insert(loop_inputs.end(), inputs.begin(),
                     inputs.begin() + std::ptrdiff_t(num_carried));
  pb::NodeProto& made = c.node("Loop", loop_inputs, bind_outputs(node, c));

  pb::GraphProto& body = graph_attr(made, "body", c);
  ExportContext sub(body, c);
  add_scalar_input(body, sub.fresh("i"), pb::TensorProto_DataType_INT64);
  add_scalar_input(body, sub.fresh("cond"), pb::TensorProto_DataType_BOOL);
  std::vector<Value*> carried(body_block.inputs().begin(),
                              body_block.inputs().begin() + std::ptrdiff_t(num_carried));
  Names next =
      write_block(body_block, concat(formal_inputs(body, carried, "carried", sub), captures), sub);
  std::string cond_out = write_block(cond_block, concat(next, captures), sub).at(0);
  std::vector<const Value*> types = {cond_block.outputs()[0]};
  for (const Value* value : body_block.outputs())
    types.push_back(value);
  set_outputs(body, sub, concat({cond_out}, next), types);
}

// ---- scan -> Scan, or Loop without xs ----

// A scan with no xs (fori_loop with static bounds): Loop with the trip count
// `length` and no condition; its per-step outputs come stacked in step
// order, which a reversed scan flips.
void scan_as_loop(const Node& node, ExportContext& c) {
  const jit::ScanLayout layout = jit::scan_layout(node);
  const Graph& step = node.block(0);
  Names inputs = names_of(node.inputs(), 0, node.inputs().size(), c);
  Names init(inputs.begin(), inputs.begin() + std::ptrdiff_t(layout.num_carry));
  Names captures(inputs.end() - std::ptrdiff_t(layout.num_captures), inputs.end());
  const Dim length = node.attrs().get_dim("length");
  std::string trip_count = length.is_static()
                               ? c.initializer(full({}, length.static_value(), DType::Int64))
                               : c.temp("Reshape", {c.size(length), c.ints({})});
  const bool reverse = node.attrs().get_bool("reverse");
  Names outputs = bind_outputs(node, c);
  Names loop_outputs = outputs;
  if (reverse) {  // the stacked ys, before the flip
    for (size_t k = layout.num_carry; k < outputs.size(); ++k)
      loop_outputs[k] = c.fresh("stacked");
  }
  pb::NodeProto& made = c.node("Loop", concat({trip_count, ""}, init), loop_outputs);
  pb::GraphProto& body = graph_attr(made, "body", c);
  ExportContext sub(body, c);
  add_scalar_input(body, sub.fresh("i"), pb::TensorProto_DataType_INT64);
  std::string cond_in = sub.fresh("cond");
  add_scalar_input(body, cond_in, pb::TensorProto_DataType_BOOL);
  std::vector<Value*> carry(step.inputs().begin(),
                            step.inputs().begin() + std::ptrdiff_t(layout.num_carry));
  Names results =
      write_block(step, concat(formal_inputs(body, carry, "carry", sub), captures), sub);
  std::string cond_out = sub.temp("Identity", {cond_in});
  pb::ValueInfoProto* info = body.add_output();
  info->set_name(cond_out);
  info->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto_DataType_BOOL);
  set_outputs(body, sub, results, const_values(step.outputs()));
  for (size_t k = layout.num_carry; reverse && k < outputs.size(); ++k) {
    c.node("Slice", {loop_outputs[k], c.ints({-1}), c.ints({INT64_MIN}), c.ints({0}), c.ints({-1})},
           {outputs[k]});
  }
}

void scan(const Node& node, ExportContext& c) {
  const jit::ScanLayout layout = jit::scan_layout(node);
  if (export_rnn_layer(node, c)) return;
  if (layout.num_xs == 0) return scan_as_loop(node, c);
  const Graph& step = node.block(0);
  const size_t num_states = layout.num_carry + layout.num_xs;
  Names inputs = names_of(node.inputs(), 0, node.inputs().size(), c);
  Names captures(inputs.begin() + std::ptrdiff_t(num_states), inputs.end());
  pb::NodeProto& made =
      c.node("Scan", Names(inputs.begin(), inputs.begin() + std::ptrdiff_t(num_states)),
             bind_outputs(node, c));
  set_attr(made, "num_scan_inputs", int64_t(layout.num_xs));
  if (node.attrs().get_bool("reverse")) {
    set_attr(made, "scan_input_directions", std::vector<int64_t>(layout.num_xs, 1));
    if (layout.num_ys > 0)
      set_attr(made, "scan_output_directions", std::vector<int64_t>(layout.num_ys, 1));
  }
  pb::GraphProto& body = graph_attr(made, "body", c);
  ExportContext sub(body, c);
  std::vector<Value*> carry(step.inputs().begin(),
                            step.inputs().begin() + std::ptrdiff_t(layout.num_carry));
  std::vector<Value*> slices(step.inputs().begin() + std::ptrdiff_t(layout.num_carry),
                             step.inputs().begin() + std::ptrdiff_t(num_states));
  Names formal = formal_inputs(body, carry, "carry", sub);  // in order: they add inputs
  formal = concat(formal, formal_inputs(body, slices, "x_t", sub));
  Names results = write_block(step, concat(formal, captures), sub);
  set_outputs(body, sub, results, const_values(step.outputs()));
}

// ---- the fused recurrent cells ----

// `input` split into `parts` equal pieces along axis 1 (opset 13's Split
// splits evenly when given no sizes).
Names split_gates(const std::string& input, size_t parts, ExportContext& c) {
  Names pieces;
  for (size_t k = 0; k < parts; ++k)
    pieces.push_back(c.fresh("gate"));
  auto& made = c.node("Split", {input}, pieces);
  set_attr(made, "axis", int64_t(1));
  return pieces;
}

// a = gi + gh = [i, f, g, o] (PyTorch's order);
// c' = sigmoid(f) c + sigmoid(i) tanh(g);  h' = sigmoid(o) tanh(c').
void lstm_cell_pointwise(const Node& node, ExportContext& c) {
  std::string sum = c.temp("Add", {c.name(node.input(0)), c.name(node.input(1))});
  Names a = split_gates(sum, 4, c);
  std::string i = c.temp("Sigmoid", {a[0]}), f = c.temp("Sigmoid", {a[1]});
  std::string g = c.temp("Tanh", {a[2]}), o = c.temp("Sigmoid", {a[3]});
  std::string kept = c.temp("Mul", {f, c.name(node.input(2))});
  c.node_for(node.output(1), "Add", {kept, c.temp("Mul", {i, g})});
  c.node_for(node.output(0), "Mul", {o, c.temp("Tanh", {c.name(node.output(1))})});
}

// [r, z, n] gates: r, z = sigmoid(gi + gh), n = tanh(gi_n + r gh_n);
// h' = n + z (h - n), as kiln's kernel computes it.
void gru_cell_pointwise(const Node& node, ExportContext& c) {
  Names x = split_gates(c.name(node.input(0)), 3, c);
  Names h = split_gates(c.name(node.input(1)), 3, c);
  std::string r = c.temp("Sigmoid", {c.temp("Add", {x[0], h[0]})});
  std::string z = c.temp("Sigmoid", {c.temp("Add", {x[1], h[1]})});
  std::string n = c.temp("Tanh", {c.temp("Add", {x[2], c.temp("Mul", {r, h[2]})})});
  std::string step = c.temp("Mul", {z, c.temp("Sub", {c.name(node.input(2)), n})});
  c.node_for(node.output(), "Add", {n, step});
}

}  // namespace

void add_control_flow_exporters(Table& table) {
  table["cond"] = cond;
  table["while_loop"] = while_loop;
  table["scan"] = scan;
  table["lstm_cell_pointwise"] = lstm_cell_pointwise;
  table["gru_cell_pointwise"] = gru_cell_pointwise;
}

}  // namespace kiln::onnx
