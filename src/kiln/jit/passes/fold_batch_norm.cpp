// Batch-norm folding (frozen graphs, eval mode):
//   %y = conv2d(%x, %w, %b)                %y2 = conv2d(%x, %w', %b')
//   %z, %m, %s = batch_norm(%y, %g, %beta, %rm, %rv) {training=false, eps}
//   ->  with s = g / sqrt(rv + eps):  w' = w * s (per output channel),
//                                      b' = (b - rm) * s + beta
// (and the same for linear followed by a batch_norm over its features).
// In eval mode batch_norm is an affine map per channel, so it folds into the
// weights of the op before it: one op less per call. The new weights are
// computed with the table's ops (rsqrt, mul, sub, add) from the frozen
// weights, but (w * s) @ x rounds differently from s * (w @ x): this pass
// may change rounding. It runs only on frozen graphs, whose weights cannot
// change after compiling: there by default (inference), unless the
// options ask for eager's rounding (exact, without fast-math). Each fold
// is noted in the report, naming the two nodes' weights.
#include "kiln/core/factory.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

Tensor run(const char* name, std::vector<Tensor> inputs, const Attrs& attrs = {}) {
  return dispatch1(op(name), std::move(inputs), attrs);
}

// Input i of `node`, or null when absent: trailing optional inputs may be
// left out altogether (an imported Conv without bias has two inputs).
Value* optional_input(const Node& node, size_t i) {
  return i < node.inputs().size() ? node.input(i) : nullptr;
}

bool is_frozen_data(const Value* value) {
  return value == nullptr ||
         ((value->kind() == ValueKind::Constant || value->kind() == ValueKind::Param) &&
          value->data().defined());
}

// The batch_norm reading `producer`'s output, when it can fold into it.
Node* foldable_batch_norm(const Node& producer, const WrittenMemory& written) {
  const Value& y = *producer.output();
  if (y.uses().size() != 1 || producer.graph().output_uses(&y) != 0) return nullptr;
  Node* bn = y.uses()[0].user;
  if (bn->op().name != "batch_norm" || y.uses()[0].index != 0) return nullptr;
  if (bn->attrs().get_bool("training") || has_effects(*bn)) return nullptr;
  if (is_used(*bn->output(1)) || is_used(*bn->output(2))) return nullptr;
  if (!optional_input(*bn, 3) || !optional_input(*bn, 4)) return nullptr;  // no statistics
  if (!is_floating(y.dtype())) return nullptr;
  for (size_t i = 1; i < bn->inputs().size(); ++i) {
    if (!is_frozen_data(bn->input(i)) || (bn->input(i) && written.aliases(*bn->input(i)))) {
      return nullptr;
    }
  }
  for (size_t i = 1; i < producer.inputs().size(); ++i) {
    if (!is_frozen_data(producer.input(i))) return nullptr;
  }
  // batch_norm normalizes dim 1: the conv's output channels when its output
  // is [N, C, H, W] (not an unbatched [C, H, W]), or linear's features when
  // its output is [N, features]; dim 0 of the weight is that same dim. The
  // weight is frozen data, so a match is a static size (N, H, W may be
  // symbolic).
  const size_t rank = producer.op().name == "linear" ? 2 : 4;
  if (y.shape().size() != rank) return nullptr;
  if (!y.shape()[1].same_as(producer.input(1)->shape()[0])) return nullptr;
  return bn;
}

// s = gamma / sqrt(running_var + eps), the per-channel scale.
Tensor channel_scale(const Node& bn, DType dtype) {
  Tensor eps = full({}, Scalar(bn.attrs().get_float("eps")), TensorOptions{dtype});
  Tensor scale = run("rsqrt", {run("add", {plain_data(bn.input(4)), eps})});
  const Value* gamma = optional_input(bn, 1);
  return gamma ? run("mul", {scale, plain_data(gamma)}) : scale;
}

void fold(Graph& graph, Node* producer, Node* bn) {
  NoDispatchObserver quiet;
  const Value& y = *producer->output();
  const int64_t channels = y.shape()[1].static_value();  // static: see foldable_batch_norm
  const TensorOptions options{y.dtype()};
  const Tensor scale = channel_scale(*bn, y.dtype());
  // w' = w * s over the output channel (dim 0 of both weights).
  const Tensor w = plain_data(producer->input(1));
  IntList scale_shape(size_t(w.dim()), 1);
  scale_shape[0] = channels;
  const Tensor new_w = run("mul", {w, run("reshape", {scale}, {{"shape", scale_shape}})});
  // b' = (b - running_mean) * s + beta.
  const Value* bias = optional_input(*producer, 2);
  const Tensor b = bias ? plain_data(bias) : zeros({channels}, options);
  Tensor new_b = run("mul", {run("sub", {b, plain_data(bn->input(3))}), scale});
  if (const Value* beta = optional_input(*bn, 2)) new_b = run("add", {new_b, plain_data(beta)});
  std::vector<Value*> inputs{producer->input(0), graph.add_constant(new_w),
                             graph.add_constant(new_b)};
  Node* folded = graph.insert_before(bn, producer->op(), inputs, producer->attrs());
  bn->output(0)->replace_all_uses_with(folded->output());
  graph.erase(bn);
  graph.erase(producer);
}

// "batch_norm (weight 'bn1.weight') folded into conv2d (weight
// 'conv1.weight'): ...", by the names a state_dict gives them.
std::string fold_note(const Node& producer, const Node& bn) {
  auto named = [](const Node& node) {
    const Value* weight = node.inputs().size() > 1 ? node.input(1) : nullptr;
    if (!weight || weight->name().empty()) return node.op().name;
    return node.op().name + " (weight '" + weight->name() + "')";
  };
  return named(bn) + " folded into " + named(producer) +
         ": rounding may differ from eager in the last bits (exact keeps it)";
}

}  // namespace

bool fold_batch_norm(Graph& graph, PassContext& context) {
  if (!context.frozen() || (context.exact() && !context.fast_math())) return false;
  const WrittenMemory written(graph);
  // Found first, folded after: folding erases nodes the walk has not reached.
  std::vector<std::pair<Node*, Node*>> pairs;
  for (Node* node : graph.nodes()) {
    const std::string& name = node->op().name;
    if (name != "conv2d" && name != "linear") continue;
    if (Node* bn = foldable_batch_norm(*node, written)) pairs.emplace_back(node, bn);
  }
  for (auto [producer, bn] : pairs) {
    context.count_rule("fold batch_norm into " + producer->op().name);
    context.note(fold_note(*producer, *bn));
    fold(graph, producer, bn);
  }
  return !pairs.empty();
}

}  // namespace kiln::jit
