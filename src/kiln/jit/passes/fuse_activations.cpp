// Operator fusion, producer + activation:
//   %z = linear(%x, %w, %b)            %y = linear_act(%x, %w, %b) {activation=relu}
//   %y = relu(%z)               ->
// (and conv2d -> conv2d_act), when the activation is the producer's only
// user. The fused op runs the producer's kernel and then the activation's
// over the output while it is in cache, one step instead of two and one
// buffer instead of two; its results are the same bits (see
// ops/fused_ops.cpp), so this pass keeps eager's rounding.
//
// Each candidate left unfused is noted with the reason: the producer's
// output is read elsewhere too (fusing would lose the pre-activation value),
// or the activation is not one a fused op carries.
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

// The fused op standing for `producer` followed by an activation, or null.
const OpDef* fused_op_for(const OpDef& producer) {
  static const OpDef& linear_act = op("linear_act");
  static const OpDef& conv2d_act = op("conv2d_act");
  if (producer.name == "linear") return &linear_act;
  if (producer.name == "conv2d") return &conv2d_act;
  return nullptr;
}

// The node producing the activation's input, when it is a producer that
// has a fused form.
Node* producer_of(const Node& activation) {
  const Value* in = activation.input(0);
  Node* producer = in ? in->producer() : nullptr;
  if (!producer || !fused_op_for(producer->op())) return nullptr;
  return producer;
}

// Why `producer -> activation` cannot become one op, or "" when it can.
std::string rejection(const Node& producer, const Node& activation) {
  const std::string pair = producer.op().name + " -> " + activation.op().name;
  if (!activation.op().fuses_after_producer()) {
    return pair + ": not fused, " + activation.op().name +
           " is not an activation a fused op carries (its backward reads its input, or it has "
           "attributes)";
  }
  const Value& z = *producer.output();
  if (z.uses().size() != 1 || producer.graph().output_uses(&z) != 0) {
    return pair + ": not fused, the " + producer.op().name +
           "'s output is also read elsewhere (fusing would lose it)";
  }
  if (activation.output()->dtype() != z.dtype()) {
    return pair + ": not fused, the activation changes the dtype";
  }
  return "";
}

void fuse(Graph& graph, Node* producer, Node* activation) {
  Attrs attrs = producer->attrs();
  attrs.set("activation", activation->op().name);
  std::vector<Value*> inputs = producer->inputs();
  Node* fused = graph.insert_before(activation, *fused_op_for(producer->op()), inputs, attrs);
  activation->output()->replace_all_uses_with(fused->output());
  graph.erase(activation);
  graph.erase(producer);
}

}  // namespace

bool fuse_activations(Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (!node->op().is_activation) continue;
    Node* producer = producer_of(*node);
    if (!producer) continue;
    if (std::string why = rejection(*producer, *node); !why.empty()) {
      context.note(why);
      continue;
    }
    context.count_rule("fuse " + producer->op().name + " + " + node->op().name);
    fuse(graph, producer, node);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::jit
