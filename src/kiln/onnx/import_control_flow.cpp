// Translations of ONNX's If, Loop and Scan into kiln's cond, scan and
// while_loop (jit/ir/control_flow.h). Each ONNX sub-graph becomes a block
// of its own (ImportContext's sub-graph form): the outer values it reads by
// name become captures, extra inputs of the block that the node feeds.
//
//   If(c)                          -> cond(c, captures...); an If whose
//                                     condition is known at import is its
//                                     taken branch, inline; a branch that
//                                     cannot be imported makes the model
//                                     specialized on the condition's inputs
//   Loop(M, cond, v...)            -> with a trip count known at import (a
//     body(i, cond_in, v...)          number or a size) and a condition that
//       -> (cond_out, v..., ys...)    stays true (absent or true, passed
//                                     through or true in the body): a scan of
//                                     M steps carrying (i, cond, v...),
//                                     whose ys stack as Loop's do;
//                                     otherwise a while_loop carrying
//                                     (i, cond, v...) whose cond block is
//                                     cond && i < M (without scan outputs)
//   Loop whose body needs i        -> the body inline once per iteration,
//     at import (Slice at i)          i a constant (a trip count known at
//                                     import, or specialized on)
//   Scan                           -> import_scan.cpp
//
// kiln's loops keep each carried value's dtype and shape, and a cond's
// branches give equal types: an ONNX model that changes them is refused,
// naming the value.
#include <algorithm>
#include <limits>
#include <optional>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/onnx/import_blocks.h"
#include "kiln/onnx/import_context.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {

using jit::Value;
using Node = pb::NodeProto;
using Table = std::unordered_map<std::string, ImportFn>;

namespace {

std::string type_text(const TensorMeta& type) {
  return jit::type_to_text(type);
}

// A sub-graph that gives a sequence or an optional (held at import as its
// elements) is taken inline: a Loop unrolled, an If's condition known at
// import (specialized on, where the model's inputs give it).
void refuse_composites(const pb::NodeProto& node, const std::string& attr,
                       const std::vector<Value*>& outputs, ImportContext& sub, ImportContext& c) {
  bool composite = std::any_of(outputs.begin(), outputs.end(),
                               [&](const Value* value) { return sub.composite_of(value); });
  if (!composite) return;
  if (node.op_type() == "Loop") sub.request_unroll();
  bool specialized = node.op_type() == "If" && c.request_at_import({c.input(node, 0)});
  KILN_CHECK(false, "onnx import: ", node.op_type(), "'s ", attr,
             " gives a sequence or an optional, which kiln holds as its elements, known at import",
             node.op_type() == "If" ? ": the If's condition must be known then" : "",
             specialized ? "; it comes from the model's inputs, on which onnx::Model "
                           "(kiln.onnx.load) specializes the graph per call"
                         : "");
}

}  // namespace

const pb::GraphProto& graph_attr(const pb::NodeProto& node, const std::string& name) {
  const pb::AttributeProto* attr = find_attr(node, name);
  KILN_CHECK(attr && attr->has_g(), "onnx import: ", node.op_type(), " without its '", name,
             "' sub-graph");
  return attr->g();
}

Block import_block(const pb::NodeProto& node, const std::string& attr,
                   const std::vector<TensorMeta>& formal, ImportContext& c) {
  const pb::GraphProto& body = graph_attr(node, attr);
  KILN_CHECK(size_t(body.input_size()) == formal.size(), "onnx import: ", node.op_type(), "'s ",
             attr, " takes ", body.input_size(), " inputs, where the node gives it ",
             formal.size());
  Block block{std::make_unique<jit::Graph>(), {}, {}};
  ImportContext sub(*block.graph, c);
  for (size_t i = 0; i < formal.size(); ++i)
    sub.define(body.input(int(i)).name(), block.graph->add_input(formal[i]));
  if (node.op_type() == "Loop") {
    sub.mark_nonnegative(block.graph->inputs().at(0));
    sub.mark_iteration(block.graph->inputs().at(0));
  }
  block.outputs = import_subgraph(body, sub);
  refuse_composites(node, attr, block.outputs, sub, c);
  sub.finish(block.outputs);
  block.captures = sub.captures();
  return block;
}

std::vector<jit::Value*> join(std::vector<jit::Value*> a, const std::vector<jit::Value*>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<TensorMeta> types_of(const std::vector<jit::Value*>& values) {
  std::vector<TensorMeta> types;
  for (const jit::Value* value : values)
    types.push_back(value->type());
  return types;
}

void check_carried(const pb::NodeProto& node, const std::string& body, const jit::Value* before,
                   const jit::Value* after, const std::string& name) {
  KILN_CHECK(before->dtype() == after->dtype() && same_dims(before->shape(), after->shape()),
             "onnx import: ", node.op_type(), "'s ", body, " changes the loop-carried value '",
             name, "' from ", type_text(before->type()), " to ", type_text(after->type()),
             " (kiln's loops keep each carried value's dtype and shape)");
}

void check_tensors(ImportContext& c, const std::vector<jit::Value*>& values,
                   const std::string& why) {
  for (const jit::Value* value : values)
    c.require_tensor(value, why);
}

namespace {

bool is_true(const Value* value) {
  if (value->kind() != jit::ValueKind::Constant || value->dtype() != DType::Bool) return false;
  std::vector<bool> flags = value->data().to_vector<bool>();
  return !flags.empty() && std::all_of(flags.begin(), flags.end(), [](bool b) { return b; });
}

bool one_element(const DimList& shape) {
  return std::all_of(shape.begin(), shape.end(),
                     [](const Dim& d) { return d.is_static() && d.static_value() == 1; });
}

// A one-element bool condition as a 0-D one.
Value* as_scalar_condition(const Node& node, const std::string& what, Value* value,
                           jit::Graph& graph) {
  KILN_CHECK(value->dtype() == DType::Bool && one_element(value->shape()),
             "onnx import: ", node.op_type(), "'s ", what,
             " must be a one-element bool tensor, got ", type_text(value->type()));
  if (value->shape().empty()) return value;
  return graph.append(op("reshape"), {value}, {{"shape", DimList{}}})->output();
}

// ---- If ----

// Both branches take the captures of either, in one order: `operands`.
void align_inputs(Block& block, const std::vector<Value*>& operands) {
  std::vector<Value*> order;
  for (Value* operand : operands) {
    auto found = std::find(block.captures.begin(), block.captures.end(), operand);
    order.push_back(found == block.captures.end()
                        ? block.graph->add_input(operand->type())
                        : block.graph->inputs()[size_t(found - block.captures.begin())]);
  }
  block.graph->reorder_inputs(order);
}

// ONNX Runtime runs only the branch a call takes, so a branch that kiln
// cannot import at this import's sizes need not make the model wrong:
// silero VAD's 8 kHz branch gives its LSTM a 4-D input at 16 kHz sizes.
// Where the condition comes from the model's inputs, the import asks for
// them (Note [Value inputs] in import_context.cpp), and onnx::Model
// imports the branch each call takes, inline; elsewhere the error stands.
Block import_branch(const Node& node, const std::string& attr, ImportContext& c) {
  try {
    return import_block(node, attr, {}, c);
  } catch (const Error& e) {
    if (!c.request_at_import({c.input(node, 0)})) throw;
    throw Error(e.kind(), str(e.what(), "; the If's condition comes from the model's inputs, on ",
                              "which onnx::Model (kiln.onnx.load) specializes the graph per ",
                              "call, importing only the branch taken"));
  }
}

void if_op(const Node& node, ImportContext& c) {
  Value* pred = c.input(node, 0);
  KILN_CHECK(pred, "onnx import: If without its condition");
  if (c.is_constant(pred)) {  // decided at import: the taken branch, inline
    KILN_CHECK(pred->data().numel() == 1, "onnx import: If's condition must have one element");
    bool taken = pred->data().to_vector<bool>()[0];
    std::vector<Value*> results =
        import_subgraph(graph_attr(node, taken ? "then_branch" : "else_branch"), c);
    for (size_t k = 0; k < results.size() && int(k) < node.output_size(); ++k)
      c.define(node.output(int(k)), results[k]);
    return;
  }
  Block then_block = import_branch(node, "then_branch", c);
  Block else_block = import_branch(node, "else_branch", c);
  pred = as_scalar_condition(node, "condition", pred, c.graph());
  KILN_CHECK(then_block.outputs.size() == else_block.outputs.size(), "onnx import: If's branches ",
             "give ", then_block.outputs.size(), " and ", else_block.outputs.size(), " outputs");
  for (size_t k = 0; k < then_block.outputs.size(); ++k) {
    const TensorMeta& a = then_block.outputs[k]->type();
    const TensorMeta& b = else_block.outputs[k]->type();
    KILN_CHECK(a.dtype == b.dtype && same_dims(a.shape, b.shape), "onnx import: If's output ", k,
               " ('", k < size_t(node.output_size()) ? node.output(int(k)) : "", "') is ",
               type_text(a), " in then_branch and ", type_text(b),
               " in else_branch (kiln's cond needs equal types)");
  }
  std::vector<Value*> operands = then_block.captures;
  for (Value* value : else_block.captures)
    if (std::find(operands.begin(), operands.end(), value) == operands.end())
      operands.push_back(value);
  std::vector<TensorMeta> types = types_of(then_block.outputs);
  for (Block* block : {&then_block, &else_block}) {
    align_inputs(*block, operands);
    block->graph->set_outputs(block->outputs);
  }
  std::vector<std::unique_ptr<jit::Graph>> blocks;
  blocks.push_back(std::move(then_block.graph));
  blocks.push_back(std::move(else_block.graph));
  jit::Node* made = c.graph().append_with_blocks(op("cond"), join({pred}, operands), {}, types,
                                                 std::move(blocks));
  jit::infer_control_flow(*made);
  for (size_t k = 0; k < made->outputs().size() && int(k) < node.output_size(); ++k)
    c.define(node.output(int(k)), made->output(k));
}

// ---- Loop ----

// The trip count as the scan's length, where it is known at import.
std::optional<Dim> known_trip_count(Value* trip, ImportContext& c) {
  if (!trip) return std::nullopt;
  std::optional<DimList> sizes = c.known_sizes(trip);
  if (!sizes || sizes->size() != 1) return std::nullopt;
  Dim count = (*sizes)[0];
  if (count.is_static() && count.static_value() < 0) return Dim(0);
  return count;
}

// Loop as a scan of `length` steps carrying (i, v...), its condition true
// throughout: the body's outputs after (cond_out, v...) are its ys.
void loop_as_scan(const Node& node, ImportContext& c, Block body, const Dim& length,
                  const std::vector<Value*>& initial) {
  jit::Graph& step = *body.graph;
  Value* cond_in = step.inputs()[1];
  Value* always = step.add_constant(full({}, true, DType::Bool));
  cond_in->replace_all_uses_with(always);
  std::replace(body.outputs.begin(), body.outputs.end(), cond_in, always);
  step.remove_unused(cond_in);
  Value* i = step.inputs()[0];
  Value* one = step.add_constant(full({}, int64_t(1), DType::Int64));
  std::vector<Value*> outputs = {step.append(op("add"), {i, one})->output()};
  outputs.insert(outputs.end(), body.outputs.begin() + 1, body.outputs.end());
  step.set_outputs(outputs);
  std::vector<Value*> inputs = {c.constant(full({}, int64_t(0), DType::Int64))};
  inputs.insert(inputs.end(), initial.begin(), initial.end());
  const size_t num_carry = inputs.size();
  std::vector<TensorMeta> types = types_of(inputs);
  for (size_t k = num_carry; k < outputs.size(); ++k) {
    TensorMeta y = outputs[k]->type();
    y.shape.insert(y.shape.begin(), length);
    types.push_back(y);
  }
  std::vector<std::unique_ptr<jit::Graph>> blocks;
  blocks.push_back(std::move(body.graph));
  jit::Node* made = c.graph().append_with_blocks(op("scan"), join(inputs, body.captures),
                                                 {{"num_carry", int64_t(num_carry)},
                                                  {"num_xs", int64_t(0)},
                                                  {"reverse", false},
                                                  {"length", canonical_attr(length)}},
                                                 types, std::move(blocks));
  jit::infer_control_flow(*made);
  for (int k = 0; k < node.output_size(); ++k)
    c.define(node.output(k), made->output(size_t(k) + 1));
}

// The cond block of a Loop as a while_loop: cond && i < M (M a number, or
// the last input when known only at run time).
std::unique_ptr<jit::Graph> loop_condition(const std::vector<TensorMeta>& inputs, Value* trip,
                                           bool trip_is_input, ImportContext& c) {
  auto graph = std::make_unique<jit::Graph>();
  for (const TensorMeta& type : inputs)
    graph->add_input(type);
  Value* keep_going = graph->inputs()[1];
  if (trip) {
    Value* bound = trip_is_input ? graph->inputs().back()
                                 : graph->add_constant(c.constant_data(trip, "Loop's trip count"));
    Value* below = graph->append(op("lt"), {graph->inputs()[0], bound})->output();
    keep_going = graph->append(op("mul"), {keep_going, below})->output();
  }
  graph->set_outputs({keep_going});
  return graph;
}

void loop_as_while(const Node& node, ImportContext& c, Block body, Value* trip, Value* first,
                   const std::vector<Value*>& initial) {
  jit::Graph& graph = *body.graph;
  KILN_CHECK(
      body.outputs.size() == initial.size() + 1, "onnx import: Loop with ",
      body.outputs.size() - initial.size() - 1,
      " scan outputs whose condition is computed in its body or whose trip count is known only at "
      "run time: kiln's while_loop stacks no per-iteration outputs (a Loop whose trip count is "
      "known at import and whose condition stays true imports as a scan)");
  Value* i = graph.inputs()[0];
  Value* one = graph.add_constant(full({}, int64_t(1), DType::Int64));
  std::vector<Value*> outputs = {
      graph.append(op("add"), {i, one})->output(),
      as_scalar_condition(node, "body's cond_out", body.outputs[0], graph)};
  outputs.insert(outputs.end(), body.outputs.begin() + 1, body.outputs.end());
  graph.set_outputs(outputs);
  Value* keep_going = first ? as_scalar_condition(node, "condition", first, c.graph())
                            : c.constant(full({}, true, DType::Bool));
  std::vector<Value*> inputs = {c.constant(full({}, int64_t(0), DType::Int64)), keep_going};
  inputs.insert(inputs.end(), initial.begin(), initial.end());
  const size_t num_carried = inputs.size();
  inputs = join(inputs, body.captures);
  bool trip_is_input = trip && !c.is_constant(trip);
  if (trip_is_input) {
    KILN_CHECK(trip->dtype() == DType::Int64 && one_element(trip->shape()),
               "onnx import: Loop's trip count must be one int64, got ", type_text(trip->type()));
    c.require_tensor(trip, "a Loop with a condition reads its trip count as a tensor");
    inputs.push_back(trip);
    graph.add_input(trip->type());  // the body does not read it
  }
  std::vector<TensorMeta> types = types_of(inputs);
  std::vector<std::unique_ptr<jit::Graph>> blocks;
  blocks.push_back(loop_condition(types, trip, trip_is_input, c));
  blocks.push_back(std::move(body.graph));
  types.resize(num_carried);
  jit::Node* made = c.graph().append_with_blocks(
      op("while_loop"), inputs,
      {{"num_carried", int64_t(num_carried)}, {"max_iterations", int64_t(-1)}}, types,
      std::move(blocks));
  jit::infer_control_flow(*made);
  for (int k = 0; k < node.output_size(); ++k)
    c.define(node.output(k), made->output(size_t(k) + 2));
}

// INT64_MAX as M (torch.onnx's `while`) bounds nothing.
bool no_bound(Value* trip, ImportContext& c) {
  return c.is_constant(trip) && trip->data().numel() == 1 &&
         trip->data().to_vector<int64_t>()[0] == std::numeric_limits<int64_t>::max();
}

// The most iterations a Loop is unrolled to.
constexpr int64_t kMaxUnrolledIterations = 256;

// One iteration of an unrolled Loop, inline: the body's outputs for the
// iteration number `i` and the carried values `carried`.
std::vector<Value*> unrolled_iteration(const Node& node, ImportContext& c, int64_t i,
                                       const std::vector<Value*>& carried) {
  const pb::GraphProto& body = graph_attr(node, "body");
  ImportContext scope(c, ImportContext::Inline{});
  std::vector<Value*> formal = {c.constant(full({}, i, DType::Int64)),
                                c.constant(full({}, true, DType::Bool))};
  formal.insert(formal.end(), carried.begin(), carried.end());
  KILN_CHECK(size_t(body.input_size()) == formal.size(), "onnx import: Loop's body takes ",
             body.input_size(), " inputs, where the node gives it ", formal.size());
  for (size_t k = 0; k < formal.size(); ++k)
    scope.define(body.input(int(k)).name(), formal[k]);
  std::vector<Value*> outputs = import_subgraph(body, scope);
  scope.finish(outputs);
  return outputs;
}

// The scan outputs of an unrolled Loop that runs no iteration, empty:
// their types from the body imported once aside.
std::vector<Value*> no_iterations(const Node& node, ImportContext& c,
                                  const std::vector<Value*>& initial) {
  const pb::GraphProto& body = graph_attr(node, "body");
  if (body.output_size() <= int(initial.size()) + 1) return {};
  jit::Graph aside_graph;
  ImportContext aside(aside_graph, c);
  std::vector<Value*> formal = {aside.constant(full({}, int64_t(0), DType::Int64)),
                                aside.constant(full({}, true, DType::Bool))};
  for (const Value* value : initial)
    formal.push_back(aside_graph.add_input(value->type()));
  for (size_t k = 0; k < formal.size() && int(k) < body.input_size(); ++k)
    aside.define(body.input(int(k)).name(), formal[k]);
  std::vector<Value*> outputs = import_subgraph(body, aside);
  std::vector<Value*> empty;
  for (size_t k = initial.size() + 1; k < outputs.size(); ++k) {
    KILN_CHECK(is_static(outputs[k]->shape()), "onnx import: Loop of no iterations whose scan ",
               "output '", body.output(int(k)).name(), "' has the symbolic shape ",
               to_string(outputs[k]->shape()));
    IntList shape = to_static(outputs[k]->shape());
    shape.insert(shape.begin(), 0);
    empty.push_back(c.constant(zeros(shape, outputs[k]->dtype())));
  }
  return empty;
}

// A Loop whose body needs its iteration number at import (a Slice at
// `i`): the body once per iteration, inline, with i a constant. The trip
// count must be known then (from the model's inputs it is specialized
// on), the condition true until the body makes it a constant false.
void loop_unrolled(const Node& node, ImportContext& c, Value* trip, Value* first,
                   const std::vector<Value*>& initial) {
  const std::string why =
      "Loop's body needs its iteration number at import, so kiln unrolls it, which needs ";
  KILN_CHECK(trip, "onnx import: ", why, "a trip count");
  if (!c.is_constant(trip) || (first && !c.is_constant(first)))
    KILN_CHECK(!c.request_at_import({trip, first}), "onnx import: ", why,
               "its trip count and condition; they come from the model's inputs, on which "
               "onnx::Model (kiln.onnx.load) specializes the graph per call");
  KILN_CHECK(c.is_constant(trip) && (!first || c.is_constant(first)), "onnx import: ", why,
             "its trip count and condition known at import");
  const int64_t count = std::max<int64_t>(trip->data().to_vector<int64_t>().at(0), 0);
  KILN_CHECK(count <= kMaxUnrolledIterations, "onnx import: ", why, "at most ",
             kMaxUnrolledIterations, " iterations, got a trip count of ", count);
  std::vector<Value*> carried = initial;
  std::vector<std::vector<Value*>> stacked;  // per scan output, per iteration
  bool going = !first || is_true(first);
  for (int64_t i = 0; i < count && going; ++i) {
    std::vector<Value*> outputs = unrolled_iteration(node, c, i, carried);
    KILN_CHECK(outputs.size() >= initial.size() + 1, "onnx import: Loop's body gives ",
               outputs.size(), " outputs for ", initial.size(), " loop-carried values");
    KILN_CHECK(c.is_constant(outputs[0]), "onnx import: ", why,
               "a condition known at import, and the body computes it at run time");
    going = is_true(outputs[0]);
    for (size_t k = 0; k < initial.size(); ++k) {
      check_carried(node, "body", initial[k], outputs[k + 1], node.input(int(k) + 2));
      carried[k] = outputs[k + 1];
    }
    stacked.resize(outputs.size() - initial.size() - 1);
    for (size_t k = 0; k < stacked.size(); ++k)
      stacked[k].push_back(outputs[initial.size() + 1 + k]);
  }
  std::vector<Value*> ys;
  for (const std::vector<Value*>& per_iteration : stacked)
    ys.push_back(c.emit("stack", per_iteration, {{"dim", int64_t(0)}}));
  if (stacked.empty()) ys = no_iterations(node, c, initial);
  for (size_t k = 0; k < carried.size(); ++k)
    c.define(node.output(int(k)), carried[k]);
  for (size_t k = 0; k < ys.size() && int(carried.size() + k) < node.output_size(); ++k)
    c.define(node.output(int(carried.size() + k)), ys[k]);
}

void loop(const Node& node, ImportContext& c) {
  Value* trip = c.input(node, 0);
  if (trip && no_bound(trip, c)) trip = nullptr;
  Value* first = c.input(node, 1);
  std::vector<Value*> initial;
  for (int k = 2; k < node.input_size(); ++k) {
    KILN_CHECK(!node.input(k).empty(), "onnx import: Loop without loop-carried input ", k - 2);
    initial.push_back(c.input(node, k));
  }
  check_tensors(c, initial, "Loop carries it as a tensor, and kiln makes no tensor of sizes");
  std::vector<TensorMeta> formal = {{DType::Int64, {}}, {DType::Bool, {}}};
  for (const Value* value : initial)
    formal.push_back(value->type());
  Block body;
  try {
    body = import_block(node, "body", formal, c);
  } catch (const Error&) {
    if (!c.take_unroll_request()) throw;
    return loop_unrolled(node, c, trip, first, initial);
  }
  KILN_CHECK(body.outputs.size() >= initial.size() + 1, "onnx import: Loop's body gives ",
             body.outputs.size(), " outputs for ", initial.size(), " loop-carried values");
  for (size_t k = 0; k < initial.size(); ++k)
    check_carried(node, "body", initial[k], body.outputs[k + 1], node.input(int(k) + 2));
  Value* cond_in = body.graph->inputs()[1];
  bool runs_to_count =
      (!first || is_true(first)) && (body.outputs[0] == cond_in || is_true(body.outputs[0]));
  std::optional<Dim> length = known_trip_count(trip, c);
  if (runs_to_count && length) return loop_as_scan(node, c, std::move(body), *length, initial);
  bool body_keeps_going = body.outputs[0] == cond_in || is_true(body.outputs[0]);
  bool stacks = body.outputs.size() > initial.size() + 1;
  // Scan outputs need the scan form: a trip count and a first condition
  // that the model's inputs give are then specialized on.
  if (stacks && body_keeps_going && trip)
    KILN_CHECK(!c.request_at_import({trip, first}), "onnx import: Loop with scan outputs needs ",
               "its trip count and condition at import; they come from the model's inputs, on ",
               "which onnx::Model (kiln.onnx.load) specializes the graph per call");
  loop_as_while(node, c, std::move(body), trip, first, initial);
}

}  // namespace

void add_control_flow_importers(Table& table) {
  table["If"] = if_op;
  table["Loop"] = loop;
  add_scan_importers(table);
}

}  // namespace kiln::onnx
