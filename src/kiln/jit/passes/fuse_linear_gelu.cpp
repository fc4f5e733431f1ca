// Operator fusion, linear + gelu (a transformer's feed-forward block):
//   %z = linear(%x, %w, %b)                 %y = linear_act(%x, %w, %b) {activation="gelu"}
//   %y = gelu(%z) {approximate="none"}  ->
// when the gelu is the linear's only reader. fuse_activations leaves gelu
// alone (its backward reads its input, which the fused op does not keep);
// linear_act's gelu backward computes linear(x, w, b) again instead
// (ops/fused_ops.cpp). The fused op runs gelu's own kernel over the
// product while it is in cache, so the bits are eager's.
//
// The tanh form (approximate="tanh") stays unfused for now: the ONNX
// exporter unfuses linear_act into linear and the op its activation
// names, with no attributes (gelu's default is the erf form).
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

// The linear whose only reader is `gelu`, or null.
Node* sole_linear_before(const Node& gelu) {
  static const OpDef& linear = op("linear");
  const Value* z = gelu.input(0);
  Node* producer = z ? z->producer() : nullptr;
  if (!producer || &producer->op() != &linear) return nullptr;
  if (z->uses().size() != 1 || producer->graph().output_uses(z) != 0) return nullptr;
  return producer;
}

}  // namespace

bool fuse_linear_gelu(Graph& graph, PassContext& context) {
  static const OpDef& gelu = op("gelu");
  static const OpDef& linear_act = op("linear_act");
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (&node->op() != &gelu) continue;
    Node* linear = sole_linear_before(*node);
    if (!linear) continue;
    if (node->attrs().get_string("approximate") != "none") {
      context.note(
          "linear -> gelu(approximate=tanh): not fused (the ONNX export unfuses "
          "linear_act into a gelu without attributes: the erf form)");
      continue;
    }
    Attrs attrs = linear->attrs();
    attrs.set("activation", std::string("gelu"));
    Node* fused = graph.insert_before(node, linear_act, linear->inputs(), attrs);
    node->output()->replace_all_uses_with(fused->output());
    graph.erase(node);
    graph.erase(linear);
    context.count_rule("fuse linear + gelu");
    changed = true;
  }
  return changed;
}

void register_transformer_passes(PassRegistry& registry) {
  registry.add({.name = "fuse_linear_gelu",
                .run = fuse_linear_gelu,
                .summary = "linear + gelu become linear_act {activation=gelu}"});
  registry.add({.name = "fuse_attention",
                .run = fuse_attention,
                .summary = "matmul, scale, mask, softmax, matmul become one fused attention",
                .may_change_rounding = true});
}

}  // namespace kiln::jit
