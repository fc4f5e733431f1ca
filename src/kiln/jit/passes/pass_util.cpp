#include "kiln/jit/passes/pass_util.h"

namespace kiln::jit {

bool writes_inputs(const Node& node) {
  const OpDef& op = node.op();
  if (!op.has_side_effects || !op.mutated_inputs) return false;
  for (int i : op.mutated_inputs(node.attrs())) {
    if (size_t(i) < node.inputs().size() && node.input(size_t(i))) return true;
  }
  return false;
}

bool writes_input(const Node& node, size_t index) {
  const OpDef& op = node.op();
  if (!op.has_side_effects || !op.mutated_inputs) return false;
  for (int i : op.mutated_inputs(node.attrs())) {
    if (size_t(i) == index) return true;
  }
  return false;
}

bool is_written(const Value& value) {
  for (const Use& use : value.uses()) {
    if (writes_input(*use.user, use.index)) return true;
    if (use.user->op().kind != OpKind::View) continue;
    for (const Value* view : use.user->outputs()) {
      if (is_written(*view)) return true;
    }
  }
  return false;
}

bool has_effects(const Node& node) {
  const OpDef& op = node.op();
  if (op.is_random) return true;
  if (!op.has_side_effects) return false;
  // A declared side effect other than writing inputs counts whatever the attrs.
  return !op.mutated_inputs || writes_inputs(node);
}

bool graph_writes_inputs(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    if (writes_inputs(*node)) return true;
  }
  return false;
}

bool is_used(const Value& value) {
  return !value.uses().empty() || value.graph().output_uses(&value) > 0;
}

bool is_dead(const Node& node) {
  if (has_effects(node)) return false;
  for (const Value* out : node.outputs()) {
    if (is_used(*out)) return false;
  }
  return true;
}

bool can_replace(const Value& value, const Value& replacement) {
  return &value != &replacement && value.dtype() == replacement.dtype() &&
         value.shape() == replacement.shape() && !replacement.type().wrapped_number;
}

bool is_known_contiguous(const Value& value) {
  const Node* producer = value.producer();
  return producer == nullptr || producer->op().kind != OpKind::View;
}

void forward_and_erase(Value* from, Value* to) {
  Node* node = from->producer();
  from->replace_all_uses_with(to);
  if (node && is_dead(*node)) node->graph().erase(node);
}

}  // namespace kiln::jit
