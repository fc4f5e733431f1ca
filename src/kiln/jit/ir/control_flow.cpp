#include "kiln/jit/ir/control_flow.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {
namespace {

Tensors concat(Tensors a, const Tensors& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool numel_is_one(const DimList& shape) {
  return std::all_of(shape.begin(), shape.end(),
                     [](const Dim& d) { return d.is_static() && d.static_value() == 1; });
}

std::string type_text(const TensorMeta& t) {
  return type_to_text(t);
}

bool same_type(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && same_dims(a.shape, b.shape);
}

std::vector<TensorMeta> types_of(const std::vector<Value*>& values) {
  std::vector<TensorMeta> types;
  for (const Value* v : values) {
    KILN_CHECK(v != nullptr, "control flow: an input may not be absent");
    types.push_back(v->type());
  }
  return types;
}

// `block`'s inputs are exactly `expected` (count and types).
void check_block_inputs(const Node& node, size_t b, const std::vector<TensorMeta>& expected) {
  const Graph& block = node.block(b);
  const std::string& name = node.op().blocks[b];
  KILN_CHECK(block.params().empty(), node.op().name, ": block '", name,
             "' has parameters; a block reads weights through its inputs");
  KILN_CHECK(block.inputs().size() == expected.size(), node.op().name, ": block '", name,
             "' takes ", block.inputs().size(), " inputs, the node gives it ", expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    KILN_CHECK(same_type(block.inputs()[i]->type(), expected[i]), node.op().name, ": block '", name,
               "' input ", i, " is ", type_text(block.inputs()[i]->type()), ", the node gives it ",
               type_text(expected[i]));
  }
}

std::vector<TensorMeta> output_types(const Graph& block) {
  return types_of(block.outputs());
}

std::vector<TensorMeta> infer_cond(const Node& node) {
  KILN_CHECK(!node.inputs().empty(), "cond: the node has no predicate input");
  const TensorMeta& pred = node.input(0)->type();
  KILN_CHECK(pred.dtype == DType::Bool && numel_is_one(pred.shape),
             "cond: the predicate must be a one-element bool tensor, got ", type_text(pred));
  std::vector<TensorMeta> operands = types_of(node.inputs());
  operands.erase(operands.begin());
  check_block_inputs(node, 0, operands);
  check_block_inputs(node, 1, operands);
  std::vector<TensorMeta> then_out = output_types(node.block(0));
  std::vector<TensorMeta> else_out = output_types(node.block(1));
  KILN_CHECK(then_out.size() == else_out.size(), "cond: the branches return ", then_out.size(),
             " and ", else_out.size(), " values");
  for (size_t i = 0; i < then_out.size(); ++i) {
    KILN_CHECK(same_type(then_out[i], else_out[i]), "cond: result ", i, " is ",
               type_text(then_out[i]), " in the then branch but ", type_text(else_out[i]),
               " in the else branch");
  }
  return then_out;
}

std::vector<TensorMeta> infer_while(const Node& node) {
  const int64_t num_carried = node.attrs().get_int("num_carried");
  KILN_CHECK(num_carried >= 0 && size_t(num_carried) <= node.inputs().size(),
             "while_loop: num_carried=", num_carried, " but the node has ", node.inputs().size(),
             " inputs");
  std::vector<TensorMeta> inputs = types_of(node.inputs());
  check_block_inputs(node, 0, inputs);
  check_block_inputs(node, 1, inputs);
  std::vector<TensorMeta> pred = output_types(node.block(0));
  KILN_CHECK(pred.size() == 1 && pred[0].dtype == DType::Bool && numel_is_one(pred[0].shape),
             "while_loop: block 'cond' must return one one-element bool tensor");
  std::vector<TensorMeta> carried(inputs.begin(), inputs.begin() + num_carried);
  std::vector<TensorMeta> next = output_types(node.block(1));
  KILN_CHECK(next.size() == carried.size(), "while_loop: block 'body' returns ", next.size(),
             " values for ", carried.size(), " carried");
  for (size_t i = 0; i < carried.size(); ++i) {
    KILN_CHECK(same_type(carried[i], next[i]), "while_loop: the body changes carried value ", i,
               " from ", type_text(carried[i]), " to ", type_text(next[i]));
  }
  return carried;
}

std::vector<TensorMeta> infer_scan(const Node& node) {
  const ScanLayout layout = scan_layout(node);
  std::vector<TensorMeta> inputs = types_of(node.inputs());
  const Dim length = node.attrs().get_dim("length");
  std::vector<TensorMeta> step_inputs(inputs.begin(), inputs.begin() + layout.num_carry);
  for (size_t k = 0; k < layout.num_xs; ++k) {
    TensorMeta x = inputs[layout.num_carry + k];
    KILN_CHECK(!x.shape.empty() && same_dims({x.shape[0]}, {length}), "scan: xs[", k, "] is ",
               type_text(x), "; its leading dim must be the scan's length ", length);
    x.shape.erase(x.shape.begin());
    step_inputs.push_back(std::move(x));
  }
  step_inputs.insert(step_inputs.end(), inputs.end() - std::ptrdiff_t(layout.num_captures),
                     inputs.end());
  check_block_inputs(node, 0, step_inputs);
  std::vector<TensorMeta> step_out = output_types(node.block(0));
  KILN_CHECK(step_out.size() >= layout.num_carry, "scan: the step returns ", step_out.size(),
             " values, fewer than its ", layout.num_carry, " carried");
  std::vector<TensorMeta> outputs;
  for (size_t i = 0; i < step_out.size(); ++i) {
    if (i < layout.num_carry) {
      // A carry keeps its type; sizes equal only by a graph's assumption
      // (two batch symbols of an imported LSTM's states) are that type too.
      KILN_CHECK(step_out[i].dtype == inputs[i].dtype &&
                     equal_or_assumed(step_out[i].shape, inputs[i].shape),
                 "scan: the step changes carry ", i, " from ", type_text(inputs[i]), " to ",
                 type_text(step_out[i]));
      outputs.push_back(inputs[i]);
      continue;
    }
    TensorMeta y = step_out[i];
    y.shape.insert(y.shape.begin(), length);
    outputs.push_back(std::move(y));
  }
  return outputs;
}

}  // namespace

ScanLayout scan_layout(const Node& node) {
  const int64_t num_carry = node.attrs().get_int("num_carry");
  const int64_t num_xs = node.attrs().get_int("num_xs");
  const size_t n = node.inputs().size();
  KILN_CHECK(num_carry >= 0 && num_xs >= 0 && size_t(num_carry + num_xs) <= n,
             "scan: num_carry=", num_carry, " and num_xs=", num_xs, " but the node has ", n,
             " inputs");
  const size_t outputs = node.num_blocks() ? node.block(0).outputs().size() : 0;
  return ScanLayout{size_t(num_carry), size_t(num_xs), n - size_t(num_carry + num_xs),
                    outputs >= size_t(num_carry) ? outputs - size_t(num_carry) : 0};
}

std::vector<TensorMeta> infer_control_flow(const Node& node) {
  const std::string& name = node.op().name;
  KILN_CHECK(node.num_blocks() == node.op().blocks.size(), name, ": the node has ",
             node.num_blocks(), " blocks, the op ", node.op().blocks.size());
  if (name == "cond") return infer_cond(node);
  if (name == "while_loop") return infer_while(node);
  if (name == "scan") return infer_scan(node);
  KILN_CHECK(false, "op '", name, "' has blocks but no control-flow rule");
  return {};
}

std::vector<TensorMeta> infer_node_types(const Node& node) {
  if (is_control_flow(node.op())) return infer_control_flow(node);
  return infer_types(node.op(), node.inputs(), node.attrs());
}

std::vector<Tensor> run_control_flow(const Node& node, std::span<const Tensor> inputs,
                                     const BlockRunner& run_block) {
  const std::string& name = node.op().name;
  if (name == "cond") {
    Tensors operands(inputs.begin() + 1, inputs.end());
    return kiln::cond(
        inputs[0], [&](const Tensors& values) { return run_block(0, values); },
        [&](const Tensors& values) { return run_block(1, values); }, operands, {});
  }
  if (name == "while_loop") {
    const size_t n = size_t(node.attrs().get_int("num_carried"));
    const int64_t max_iterations = node.attrs().get_int("max_iterations");
    Tensors carried(inputs.begin(), inputs.begin() + std::ptrdiff_t(n));
    Tensors captures(inputs.begin() + std::ptrdiff_t(n), inputs.end());
    return kiln::while_loop(
        [&](const Tensors& values) { return run_block(0, concat(values, captures)).at(0); },
        [&](const Tensors& values) { return run_block(1, concat(values, captures)); }, carried,
        max_iterations < 0 ? std::nullopt : std::optional<int64_t>(max_iterations), {});
  }
  KILN_CHECK(name == "scan", "op '", name, "' has blocks but no executor");
  const ScanLayout layout = scan_layout(node);
  auto begin = inputs.begin();
  Tensors init(begin, begin + std::ptrdiff_t(layout.num_carry));
  Tensors xs(begin + std::ptrdiff_t(layout.num_carry),
             begin + std::ptrdiff_t(layout.num_carry + layout.num_xs));
  Tensors captures(begin + std::ptrdiff_t(layout.num_carry + layout.num_xs), inputs.end());
  ScanResult result = kiln::scan(
      [&](const Tensors& carry, const Tensors& slices) {
        Tensors out = run_block(0, concat(concat(carry, slices), captures));
        Tensors next(out.begin(), out.begin() + std::ptrdiff_t(layout.num_carry));
        Tensors ys(out.begin() + std::ptrdiff_t(layout.num_carry), out.end());
        return std::make_pair(std::move(next), std::move(ys));
      },
      init, xs, node.attrs().get_bool("reverse"),
      layout.num_xs ? std::nullopt : std::optional<int64_t>(node.attrs().get_int("length")), {});
  // No step ran: the ys are empty, of the types the node declares.
  for (size_t j = result.ys.size(); j < layout.num_ys; ++j) {
    const Value* y = node.output(layout.num_carry + j);
    result.ys.push_back(zeros(to_static(y->shape(), "scan"), y->dtype()));
  }
  return concat(std::move(result.carry), result.ys);
}

std::vector<Tensor> evaluate(const Graph& graph, std::span<const Tensor> inputs) {
  KILN_CHECK_VALUE(inputs.size() == graph.inputs().size(), "graph: expected ",
                   graph.inputs().size(), " inputs, got ", inputs.size());
  std::unordered_map<const Value*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i)
    values[graph.inputs()[i]] = inputs[i];
  for (const auto* list : {&graph.params(), &graph.constants()}) {
    for (const Value* v : *list)
      values[v] = v->data();
  }
  for (const Node* node : graph.nodes()) {
    std::vector<Tensor> args;
    for (const Value* v : node->inputs())
      args.push_back(v ? values.at(v) : Tensor());
    std::vector<Tensor> results =
        node->num_blocks() == 0
            ? dispatch(node->op(), std::move(args), node->attrs())
            : run_control_flow(*node, args, [&](size_t b, const std::vector<Tensor>& in) {
                return evaluate(node->block(b), in);
              });
    for (size_t i = 0; i < results.size(); ++i)
      values[node->output(i)] = std::move(results[i]);
  }
  std::vector<Tensor> outputs;
  for (const Value* v : graph.outputs())
    outputs.push_back(values.at(v));
  return outputs;
}

}  // namespace kiln::jit
