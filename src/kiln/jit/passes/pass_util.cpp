#include "kiln/jit/passes/pass_util.h"

#include <algorithm>

#include "kiln/jit/ir/size_symbols.h"

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

namespace {

// The value whose memory `value` lives in: itself, or the base of the view
// chain it is the end of.
const Value* alias_base(const Value* value) {
  while (value->producer() && value->producer()->op().kind == OpKind::View)
    value = value->producer()->input(0);
  return value;
}

}  // namespace

WrittenMemory::WrittenMemory(const Graph& graph) {
  for (const Node* node : graph.nodes()) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      if (node->input(i) && writes_input(*node, i)) bases_.push_back(alias_base(node->input(i)));
    }
  }
}

bool WrittenMemory::aliases(const Value& value) const {
  if (bases_.empty()) return false;
  return std::find(bases_.begin(), bases_.end(), alias_base(&value)) != bases_.end();
}

bool has_effects(const Node& node) {
  const OpDef& op = node.op();
  if (op.is_random) return true;
  // Control flow has the effects of what its blocks run.
  for (size_t b = 0; b < node.num_blocks(); ++b) {
    for (const Node* inner : node.block(b).nodes()) {
      if (has_effects(*inner)) return true;
    }
  }
  if (!op.has_side_effects) return false;
  // A declared side effect other than writing inputs counts whatever the attrs.
  return !op.mutated_inputs || writes_inputs(node);
}

bool is_used(const Value& value) {
  return !value.uses().empty() || value.graph().output_uses(&value) > 0;
}

bool is_dead(const Node& node) {
  if (has_effects(node)) return false;
  // nonzero read only for its count (ones(idx.shape[0])): the count needs it.
  if (size_symbol_read_elsewhere(node)) return false;
  for (const Value* out : node.outputs()) {
    if (is_used(*out)) return false;
  }
  return true;
}

bool can_replace(const Value& value, const Value& replacement) {
  return &value != &replacement && value.dtype() == replacement.dtype() &&
         same_dims(value.shape(), replacement.shape()) && !replacement.type().wrapped_number;
}

bool is_known_contiguous(const Value& value) {
  const Node* producer = value.producer();
  return producer == nullptr || producer->op().kind != OpKind::View;
}

Tensor plain_data(const Value* value) {
  if (value == nullptr) return Tensor();
  const Tensor& t = value->data();
  auto impl =
      std::make_shared<TensorImpl>(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
  impl->wrapped_number = value->type().wrapped_number;
  return Tensor(std::move(impl));
}

std::optional<double> constant_number(const Value* value, bool frozen) {
  if (!value) return std::nullopt;
  const bool fixed = value->kind() == ValueKind::Constant ||
                     (frozen && value->kind() == ValueKind::Param && value->data().defined());
  if (!fixed) return std::nullopt;
  const Tensor& data = value->data();
  if (data.numel() != 1 || !is_floating(data.dtype())) return std::nullopt;
  return read_element(data, 0).to_double();
}

NoDispatchObserver::NoDispatchObserver() : saved_(dispatch_observer()) {
  set_dispatch_observer(nullptr);
}

NoDispatchObserver::~NoDispatchObserver() {
  set_dispatch_observer(saved_);
}

}  // namespace kiln::jit
