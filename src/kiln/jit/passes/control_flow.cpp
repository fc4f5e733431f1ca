// Control flow (jit/ir/control_flow.h), four rewrites:
//   cond(const pred, ...)            -> the taken branch's nodes, inline
//   a carried value the body returns  -> read through a new capture, and
//     unchanged                          the loop's result is its input
//   loop body node over captures only -> computed once before the loop,
//                                        entering as a new capture
//   an input no block reads           -> removed from the node and its blocks
// ONNX's Loop has no captures of its own kind: exporters (paddle2onnx's
// SLANet) carry weights and the encoder's output through every iteration
// unchanged, so the second rewrite is what lets the third hoist their
// products (a [1, 256, 96] x [96, 256] matmul per decoded token).
// Loop invariants: a node of a while_loop's blocks or a scan's step whose
// inputs are constants and captures (weights, activations from before the
// loop) and that has no effects. Passes reach inside blocks through the
// pipeline's walk; these work on the nodes that own them.
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"

namespace kiln::jit {
namespace {

// The node input feeding block input j (the same for every block of a node).
size_t node_input_of(const Node& node, size_t j) {
  return node.op().name == "cond" ? j + 1 : j;
}

// Block inputs from here on are captures: what the node reads, not what it
// carries, scans over or (for a cond) is typed by.
size_t first_capture(const Node& node) {
  const std::string& name = node.op().name;
  if (name == "cond") return 0;
  if (name == "while_loop") return size_t(node.attrs().get_int("num_carried"));
  const ScanLayout layout = scan_layout(node);
  return layout.num_carry + layout.num_xs;
}

// The enclosing graph's value for `v` of `block`: a block input's feed, or a
// copy of a block constant.
Value* outer_value(Node& owner, const Graph& block, Value* v) {
  if (v == nullptr) return nullptr;
  if (v->kind() == ValueKind::Constant)
    return owner.graph().add_constant(v->data(), v->type().wrapped_number);
  const auto& inputs = block.inputs();
  size_t j = size_t(std::find(inputs.begin(), inputs.end(), v) - inputs.begin());
  KILN_ASSERT(j < inputs.size(), "control flow: a value of no block input or constant");
  return owner.input(node_input_of(owner, j));
}

bool inline_constant_cond(Node& node, PassContext& context) {
  const Value* pred = node.input(0);
  if (pred->kind() != ValueKind::Constant) return false;
  const bool taken = *static_cast<const bool*>(pred->data().data_ptr());
  Graph& branch = node.block(taken ? 0 : 1);
  std::unordered_map<const Value*, Value*> mapped;
  auto map = [&](Value* v) -> Value* {
    if (v == nullptr) return nullptr;
    auto it = mapped.find(v);
    if (it != mapped.end()) return it->second;
    return mapped[v] = outer_value(node, branch, v);
  };
  for (Node* inner : branch.nodes()) {
    std::vector<Value*> inputs;
    for (Value* v : inner->inputs())
      inputs.push_back(map(v));
    Node* copy = node.graph().insert_copy_before(&node, *inner, std::move(inputs));
    for (size_t i = 0; i < inner->outputs().size(); ++i)
      mapped[inner->output(i)] = copy->output(i);
  }
  for (size_t i = 0; i < node.outputs().size(); ++i)
    node.output(i)->replace_all_uses_with(map(branch.outputs()[i]));
  context.count_rule(taken ? "inline the then branch of a constant cond"
                           : "inline the else branch of a constant cond");
  node.graph().erase(&node);
  return true;
}

bool hoistable(const Node& inner, const Graph& block, size_t captures_from) {
  if (inner.num_blocks() || has_effects(inner)) return false;
  const auto& inputs = block.inputs();
  return std::all_of(inner.inputs().begin(), inner.inputs().end(), [&](const Value* v) {
    if (v == nullptr || v->kind() == ValueKind::Constant) return true;
    auto it = std::find(inputs.begin(), inputs.end(), v);
    return it != inputs.end() && size_t(it - inputs.begin()) >= captures_from;
  });
}

// Moves `inner` (a node of block `b` of `node`) before `node`; its results
// enter every block of `node` as new captures.
void hoist(Node& node, size_t b, Node& inner, PassContext& context) {
  Graph& block = node.block(b);
  std::vector<Value*> inputs;
  for (Value* v : inner.inputs())
    inputs.push_back(outer_value(node, block, v));
  Node* outside = node.graph().insert_copy_before(&node, inner, std::move(inputs));
  for (size_t i = 0; i < inner.outputs().size(); ++i) {
    node.append_input(outside->output(i));
    for (size_t other = 0; other < node.num_blocks(); ++other) {
      Value* captured = node.block(other).add_input(outside->output(i)->type());
      if (other == b) inner.output(i)->replace_all_uses_with(captured);
    }
  }
  context.count_rule("hoist " + inner.op().name + " out of " + node.op().name);
  block.erase(&inner);
}

bool hoist_invariants(Node& node, PassContext& context) {
  if (node.op().name == "cond") return false;  // a branch may not run: nothing to gain
  bool changed = false;
  for (size_t b = 0; b < node.num_blocks(); ++b) {
    Graph& block = node.block(b);
    for (Node* inner : block.nodes()) {
      if (!hoistable(*inner, block, first_capture(node))) continue;
      hoist(node, b, *inner, context);
      changed = true;
    }
  }
  return changed;
}

// A while_loop's carried value k that the body returns as it got it: the
// loop's result k is its input k; and when a node of a block could leave
// the loop but for reading such values, the blocks read them through new
// captures (the carried slots stay, returned unchanged), so that
// hoist_invariants moves the node. A carried value that only feeds what
// changes (a loop bound compared with the counter) stays as it is.
bool capture_unchanged_carried(Node& node, PassContext& context) {
  if (node.op().name != "while_loop") return false;
  const size_t carried = size_t(node.attrs().get_int("num_carried"));
  const Graph& body = node.block(1);
  std::vector<bool> unchanged(carried, false);
  bool changed = false;
  for (size_t k = 0; k < carried; ++k) {
    unchanged[k] = body.outputs()[k] == body.inputs()[k];
    if (!unchanged[k] || !is_used(*node.output(k))) continue;
    node.output(k)->replace_all_uses_with(node.input(k));
    changed = true;
  }
  // The unchanged values that a would-be invariant node reads, by index.
  std::vector<bool> wanted(carried, false);
  for (size_t b = 0; b < node.num_blocks(); ++b) {
    const Graph& block = node.block(b);
    const auto& inputs = block.inputs();
    for (const Node* inner : block.nodes()) {
      if (inner->num_blocks() || has_effects(*inner)) continue;
      std::vector<size_t> reads;
      bool invariant = true;
      for (const Value* v : inner->inputs()) {
        if (v == nullptr || v->kind() == ValueKind::Constant) continue;
        const size_t j = size_t(std::find(inputs.begin(), inputs.end(), v) - inputs.begin());
        if (j < carried && unchanged[j]) {
          reads.push_back(j);
        } else if (j >= inputs.size() || j < carried) {
          invariant = false;
        }
      }
      if (!invariant) continue;
      for (size_t j : reads)
        wanted[j] = true;
    }
  }
  for (size_t k = 0; k < carried; ++k) {
    if (!wanted[k]) continue;
    node.append_input(node.input(k));
    for (size_t b = 0; b < node.num_blocks(); ++b) {
      Graph& block = node.block(b);
      Value* captured = block.add_input(node.input(k)->type());
      std::vector<Value*> outputs = block.outputs();
      block.inputs()[k]->replace_all_uses_with(captured);
      block.set_outputs(std::move(outputs));  // the body still returns its input k
    }
    context.count_rule("read an unchanged carried value of while_loop through a capture");
    changed = true;
  }
  return changed;
}

bool drop_unread_inputs(Node& node, PassContext& context) {
  bool changed = false;
  const size_t count = node.block(0).inputs().size();
  for (size_t j = count; j-- > first_capture(node);) {
    bool read = false;
    for (size_t b = 0; b < node.num_blocks(); ++b)
      read |= is_used(*node.block(b).inputs()[j]);
    if (read) continue;
    for (size_t b = 0; b < node.num_blocks(); ++b)
      node.block(b).remove_unused(node.block(b).inputs()[j]);
    node.erase_input(node_input_of(node, j));
    context.count_rule("drop an input no block of " + node.op().name + " reads");
    changed = true;
  }
  return changed;
}

}  // namespace

bool simplify_control_flow(Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!is_control_flow(node->op())) continue;
    if (node->op().name == "cond" && inline_constant_cond(*node, context)) {
      changed = true;
      continue;
    }
    changed |= capture_unchanged_carried(*node, context);
    changed |= hoist_invariants(*node, context);
    changed |= drop_unread_inputs(*node, context);
  }
  return changed;
}

}  // namespace kiln::jit
