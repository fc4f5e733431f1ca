// Convolution epilogues as one op, for inference graphs:
//   %z = conv2d(%x, %w, %b)
//   %s = add(%z, %r)           (optional: %r of %z's shape and dtype)
//   %y = <activation>(%s)      (optional)
// -> %y = conv2d_fused(%x, %w, %b, %r) {conv attrs, activation, alpha, beta,
//                                       scale_after, shift_after}
// ResNet's relu(conv + identity), MobileNet's hardswish(conv) and its
// projection conv + identity run as one plan step: oneDNN's post-ops or
// kiln's kernels apply the activation and the residual while the output
// is in cache (ops/conv_fused_ops.cpp). The activations, as kiln.nn and the
// ONNX importer write them (c, k, a, b one-element constants):
//   relu(v), sigmoid(v), tanh(v), clamp(v) {min, max}   (relu6, Clip)
//   hardsigmoid  clamp(add(mul(v, a), b), 0, 1)          alpha = a, beta = b
//                div(clamp(add(v, c), 0, k), k)          alpha = 1/k, beta = c/k
//   hardswish    mul(v, hardsigmoid(v)),  div(mul(v, clamp(add(v, c), 0, k)), k)
//   silu         mul(v, sigmoid(v))
//   leaky_relu   leaky_relu(v) {negative_slope}              alpha = slope
//                maximum(leaky_relu(v), c)                   beta = c (floor)
//   clamp        maximum(v, c)                               [c, inf]
// An affine map the graph applies to the conv's output apart, before the
// residual and the activation (mul by s, add t: s and t one value, or one
// per output channel, constants; PaddlePaddle's exports write a Conv's
// bias, and PP-LCNet's learnable scale and shift, so) folds into the conv's
// weights, w * s and b * s + t, as fold_batch_norm folds a batch norm. One
// after the activation (s and t one value each: PP-LCNet's again) becomes
// the fused op's scale_after and shift_after.
//
// Every value inside the pattern must be read only inside it. A residual
// that broadcasts is not fused (it would need another kernel). The fused op
// rounds as oneDNN's eltwise functions do, not as the ops it replaces
// (within float32 tolerance), and has no backward rule: the pass runs on
// frozen (inference) graphs unless exact, like fold_batch_norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kiln/core/factory.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/kernels/cpu/conv_epilogue.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

using cpu::EpilogueActivation;

constexpr double inf = std::numeric_limits<double>::infinity();

// The producer of `value` when it is the op `name`.
Node* made_by(const Value* value, const char* name) {
  Node* producer = value ? value->producer() : nullptr;
  return producer && producer->op().name == name ? producer : nullptr;
}

// What the activation reads, which it is, and the nodes it is made of.
struct Activation {
  Value* input = nullptr;
  EpilogueActivation kind = EpilogueActivation::None;
  double alpha = 0.0, beta = 0.0;
  std::vector<Node*> nodes;
  double scale_after = 1.0, shift_after = 0.0;
};

// A binary node (add, mul: either order; div: divisor only) with a
// constant operand: the other operand, and the constant.
std::optional<std::pair<Value*, double>> with_constant(Node* node, bool frozen) {
  if (!node || node->inputs().size() != 2) return std::nullopt;
  for (size_t constant = node->op().name == "div" ? 1 : 0; constant < 2; ++constant) {
    if (std::optional<double> c = constant_number(node->input(constant), frozen))
      return std::make_pair(node->input(1 - constant), *c);
  }
  return std::nullopt;
}

bool clamp_between(const Node* clamp, double lo, double hi) {
  const Attrs& attrs = clamp->attrs();
  return attrs.has("min") && attrs.has("max") && attrs.get_float("min") == lo &&
         attrs.get_float("max") == hi;
}

// clamp(add(mul(v, a), b), 0, 1) or div(clamp(add(v, c), 0, k), k), ending
// at `value`.
std::optional<Activation> hardsigmoid_at(Value* value, bool frozen) {
  Activation act;
  act.kind = EpilogueActivation::HardSigmoid;
  if (Node* clamp = made_by(value, "clamp"); clamp && clamp_between(clamp, 0.0, 1.0)) {
    auto shifted = with_constant(made_by(clamp->input(0), "add"), frozen);
    if (!shifted) return std::nullopt;
    auto scaled = with_constant(made_by(shifted->first, "mul"), frozen);
    if (!scaled) return std::nullopt;
    act.input = scaled->first;
    act.alpha = scaled->second;
    act.beta = shifted->second;
    act.nodes = {made_by(shifted->first, "mul"), made_by(clamp->input(0), "add"), clamp};
    return act;
  }
  Node* div = made_by(value, "div");
  auto divided = with_constant(div, frozen);
  if (!divided) return std::nullopt;
  Node* clamp = made_by(divided->first, "clamp");
  const double k = divided->second;
  if (!clamp || k == 0.0 || !clamp_between(clamp, 0.0, k)) return std::nullopt;
  auto shifted = with_constant(made_by(clamp->input(0), "add"), frozen);
  if (!shifted) return std::nullopt;
  act.input = shifted->first;
  act.alpha = 1.0 / k;
  act.beta = shifted->second / k;
  act.nodes = {made_by(clamp->input(0), "add"), clamp, div};
  return act;
}

// div(mul(v, clamp(add(v, c), 0, k)), k) ending at `div`.
std::optional<Activation> scaled_hardswish_at(Node* div, bool frozen) {
  auto divided = with_constant(div, frozen);
  if (!divided) return std::nullopt;
  Node* mul = made_by(divided->first, "mul");
  const double k = divided->second;
  if (!mul || k == 0.0) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    Value* v = mul->input(i);
    Node* clamp = made_by(mul->input(1 - i), "clamp");
    if (!clamp || !clamp_between(clamp, 0.0, k)) continue;
    Node* add = made_by(clamp->input(0), "add");
    auto shifted = with_constant(add, frozen);
    if (!shifted || shifted->first != v) continue;
    return Activation{
        v, EpilogueActivation::HardSwish, 1.0 / k, shifted->second / k, {add, clamp, mul, div}};
  }
  return std::nullopt;
}

// mul(v, sigmoid(v)) (silu) or mul(v, hardsigmoid(v)) (hardswish).
std::optional<Activation> gated_at(Node* mul, bool frozen) {
  for (size_t i = 0; i < 2; ++i) {
    Value *v = mul->input(i), *gate = mul->input(1 - i);
    if (Node* sigmoid = made_by(gate, "sigmoid"); sigmoid && sigmoid->input(0) == v) {
      return Activation{v, EpilogueActivation::Silu, 0.0, 0.0, {sigmoid, mul}};
    }
    std::optional<Activation> hard = hardsigmoid_at(gate, frozen);
    if (!hard || hard->input != v) continue;
    hard->kind = EpilogueActivation::HardSwish;
    hard->nodes.push_back(mul);
    return hard;
  }
  return std::nullopt;
}

std::optional<Activation> activation_at(Node* node, bool frozen);

// maximum(v, c), c a one-element constant not widening v's shape: a floor
// under a leaky_relu (openwakeword's), or a clamp from below.
std::optional<Activation> floor_at(Node* maximum, bool frozen) {
  auto floored = with_constant(maximum, frozen);
  if (!floored || floored->first->shape().size() != maximum->output()->shape().size())
    return std::nullopt;
  Value* inner = floored->first;
  if (Node* leaky = made_by(inner, "leaky_relu")) {
    return Activation{leaky->input(0),
                      EpilogueActivation::LeakyRelu,
                      leaky->attrs().get_float("negative_slope"),
                      floored->second,
                      {leaky, maximum}};
  }
  return Activation{inner, EpilogueActivation::Clamp, floored->second, inf, {maximum}};
}

// An activation followed by mul(·, s) and/or add(·, t), s and t one-element
// constants (PP-LCNet's learnable affine map), ending at `node`.
std::optional<Activation> affine_after_at(Node* node, bool frozen) {
  auto constant_side = with_constant(node, frozen);
  if (!constant_side) return std::nullopt;
  Value* inner = constant_side->first;
  double scale = 1.0, shift = 0.0;
  std::vector<Node*> affine{node};
  if (node->op().name == "mul") {
    scale = constant_side->second;
  } else if (node->op().name == "add") {
    shift = constant_side->second;
    if (auto scaled = with_constant(made_by(inner, "mul"), frozen)) {
      affine.insert(affine.begin(), inner->producer());
      inner = scaled->first;
      scale = scaled->second;
    }
  } else {
    return std::nullopt;
  }
  Node* end = inner->producer();
  std::optional<Activation> act = end ? activation_at(end, frozen) : std::nullopt;
  if (!act || act->scale_after != 1.0 || act->shift_after != 0.0) return std::nullopt;
  act->nodes.insert(act->nodes.end(), affine.begin(), affine.end());
  act->scale_after = scale;
  act->shift_after = shift;
  return act;
}

// The activation ending at `node`, whatever it reads.
std::optional<Activation> activation_at(Node* node, bool frozen) {
  const std::string& name = node->op().name;
  if (name == "relu" || name == "sigmoid" || name == "tanh") {
    EpilogueActivation kind = name == "relu"      ? EpilogueActivation::Relu
                              : name == "sigmoid" ? EpilogueActivation::Sigmoid
                                                  : EpilogueActivation::Tanh;
    return Activation{node->input(0), kind, 0.0, 0.0, {node}};
  }
  if (name == "clamp") {
    if (auto hard = hardsigmoid_at(node->output(), frozen)) return hard;
    const Attrs& attrs = node->attrs();
    return Activation{node->input(0),
                      EpilogueActivation::Clamp,
                      attrs.has("min") ? attrs.get_float("min") : -inf,
                      attrs.has("max") ? attrs.get_float("max") : inf,
                      {node}};
  }
  if (name == "div") {
    if (auto swish = scaled_hardswish_at(node, frozen)) return swish;
    return hardsigmoid_at(node->output(), frozen);
  }
  if (name == "mul") {
    if (auto gated = gated_at(node, frozen)) return gated;
  }
  if (name == "mul" || name == "add") return affine_after_at(node, frozen);
  if (name == "leaky_relu") {
    return Activation{node->input(0),
                      EpilogueActivation::LeakyRelu,
                      node->attrs().get_float("negative_slope"),
                      -inf,
                      {node}};
  }
  if (name == "maximum") return floor_at(node, frozen);
  return std::nullopt;
}

// The convolution under the epilogue, the affine map applied to its output
// apart (a scale, a shift: one value, or one per channel), its residual,
// and the mul and add nodes between, producers first.
struct Source {
  Node* conv = nullptr;
  Value* scale = nullptr;
  Value* shift = nullptr;
  Value* residual = nullptr;
  std::vector<Node*> nodes;
};

// A frozen floating constant of `conv`'s dtype holding one value, or one
// per output channel shaped so that it broadcasts over the channels ([C, 1,
// 1] or [1, C, 1, 1]; [C] would broadcast over the width).
bool is_affine_constant(const Value* value, const Node& conv, bool frozen) {
  const bool fixed = value->kind() == ValueKind::Constant ||
                     (frozen && value->kind() == ValueKind::Param && value->data().defined());
  if (!fixed || value->dtype() != conv.output()->dtype() || value->type().wrapped_number) {
    return false;
  }
  const DimList& shape = value->shape();
  const DimList& out = conv.output()->shape();
  if (out.size() != 4 || !out[1].is_static() || shape.size() > 4) return false;
  const bool one_value = std::all_of(shape.begin(), shape.end(), [](const Dim& d) {
    return d.is_static() && d.static_value() == 1;
  });
  if (one_value) return true;
  if (shape.size() < 3) return false;
  const size_t channel_dim = shape.size() - 3;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t want = d == channel_dim ? out[1].static_value() : 1;
    if (!shape[d].is_static() || shape[d].static_value() != want) return false;
  }
  return true;
}

// The same dims, symbol for symbol (a symbolic dim equal to another only
// under some sizes is not the same).
bool same_shape(const DimList& a, const DimList& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (!a[d].same_as(b[d])) return false;
  return true;
}

bool has_bias(const Node& conv) {
  return conv.inputs().size() > 2 && conv.input(2) != nullptr;
}

// conv2d(...), or mul(conv2d(...), scale), reaching `v`.
std::optional<Source> scaled_conv(Value* v, bool frozen) {
  if (Node* conv = made_by(v, "conv2d")) return Source{conv};
  Node* mul = made_by(v, "mul");
  if (!mul || mul->inputs().size() != 2) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    Node* conv = made_by(mul->input(i), "conv2d");
    if (!conv || !is_affine_constant(mul->input(1 - i), *conv, frozen)) continue;
    if (!same_shape(v->shape(), conv->output()->shape())) continue;
    return Source{conv, mul->input(1 - i), nullptr, nullptr, {mul}};
  }
  return std::nullopt;
}

// scaled_conv, or add(scaled_conv, shift), then optionally add(<that>,
// residual), reaching `v`.
std::optional<Source> source_of(Value* v, bool frozen, bool allow_residual = true) {
  if (std::optional<Source> scaled = scaled_conv(v, frozen)) return scaled;
  Node* add = made_by(v, "add");
  if (!add || add->inputs().size() != 2) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    Value *side = add->input(i), *other = add->input(1 - i);
    std::optional<Source> inner = scaled_conv(side, frozen);
    if (inner && is_affine_constant(other, *inner->conv, frozen) &&
        same_shape(v->shape(), side->shape())) {
      inner->shift = other;
      inner->nodes.push_back(add);
      return inner;
    }
    if (!allow_residual || other->type().wrapped_number || other->dtype() != v->dtype() ||
        !same_shape(other->shape(), v->shape())) {
      continue;
    }
    inner = source_of(side, frozen, /*allow_residual=*/false);
    if (!inner) continue;
    inner->residual = other;
    inner->nodes.push_back(add);
    return inner;
  }
  return std::nullopt;
}

// Whether every reader of `value` is one of `nodes` and the graph does not
// return it.
bool read_only_by(const Value& value, const std::vector<Node*>& nodes) {
  if (value.graph().output_uses(&value) != 0) return false;
  for (const Use& use : value.uses())
    if (std::find(nodes.begin(), nodes.end(), use.user) == nodes.end()) return false;
  return true;
}

struct Match {
  Source source;
  Activation activation;  // kind None: the residual add alone
  Node* last = nullptr;   // the node whose output the fused op replaces
};

// Every node's output but the last is read only inside the match.
bool is_closed(const Match& m) {
  std::vector<Node*> nodes = m.source.nodes;
  nodes.insert(nodes.end(), m.activation.nodes.begin(), m.activation.nodes.end());
  nodes.push_back(m.source.conv);
  for (Node* node : nodes)
    if (node != m.last && !read_only_by(*node->output(), nodes)) return false;
  return true;
}

bool fusable_dtype(const Match& m) {
  const DType dtype = m.source.conv->output()->dtype();
  return (dtype == DType::Float32 || dtype == DType::Float64) && m.last->output()->dtype() == dtype;
}

// Whether an activation ending a few sole readers further on takes `node`
// in (hardsigmoid's div(clamp(...), k) holds a clamp that alone would
// match): that longer match is left to its own node.
bool inside_longer_activation(Node* node, bool frozen) {
  Node* reader = node;
  for (int step = 0; step < 3; ++step) {
    const Value& out = *reader->output();
    if (out.uses().size() != 1 || reader->graph().output_uses(&out) != 0) return false;
    reader = out.uses()[0].user;
    std::optional<Activation> longer = activation_at(reader, frozen);
    if (longer &&
        std::find(longer->nodes.begin(), longer->nodes.end(), node) != longer->nodes.end()) {
      return true;
    }
  }
  return false;
}

// An affine map folds only into weights the graph holds (a graph parsed
// from text may have parameters without data): a scale into the weight and
// the bias, a shift into the bias (or becomes it).
bool can_fold_into(const Source& source) {
  const Node& conv = *source.conv;
  auto held = [&](size_t i) {
    return i >= conv.inputs().size() || !conv.input(i) || conv.input(i)->data().defined();
  };
  if (source.scale && !held(1)) return false;
  if ((source.scale || source.shift) && !held(2)) return false;
  return true;
}

std::optional<Match> match_at(Node* node, bool frozen, bool with_activation) {
  Match m;
  m.last = node;
  if (with_activation) {
    std::optional<Activation> activation = activation_at(node, frozen);
    if (!activation || inside_longer_activation(node, frozen)) return std::nullopt;
    m.activation = std::move(*activation);
  } else {
    // A residual add, or an affine map with no activation after it. A mul
    // an add reads alone is left to the add (a shift may follow).
    const std::string& name = node->op().name;
    if (name != "add" && name != "mul") return std::nullopt;
    const Value& out = *node->output();
    if (name == "mul" && out.uses().size() == 1 && out.uses()[0].user->op().name == "add") {
      return std::nullopt;
    }
    m.activation.input = node->output();
  }
  std::optional<Source> source = source_of(m.activation.input, frozen);
  if (!source || !can_fold_into(*source)) return std::nullopt;
  if (!with_activation && !source->residual && !source->scale && !source->shift) {
    return std::nullopt;
  }
  m.source = std::move(*source);
  if (!is_closed(m) || !fusable_dtype(m)) return std::nullopt;
  return m;
}

// An affine constant as one value per channel, [C].
Tensor per_channel(const Value* constant, int64_t channels) {
  const Tensor data = plain_data(constant);
  if (data.numel() == 1)
    return full({channels}, read_element(data, 0), TensorOptions{data.dtype()});
  return dispatch1(op("reshape"), {data}, {{"shape", IntList{channels}}});
}

// The conv's weight and bias with the affine map folded in: w * s (per
// output channel), b * s + t, computed with the table's ops.
std::pair<Value*, Value*> folded_weights(Graph& graph, const Source& source) {
  Node* conv = source.conv;
  Value* weight = conv->input(1);
  Value* bias = has_bias(*conv) ? conv->input(2) : nullptr;
  if (!source.scale && !source.shift) return {weight, bias};
  NoDispatchObserver quiet;
  auto run = [](const char* name, std::vector<Tensor> inputs, const Attrs& attrs = {}) {
    return dispatch1(op(name), std::move(inputs), attrs);
  };
  const int64_t channels = conv->output()->shape()[1].static_value();
  Tensor b = bias ? plain_data(bias) : Tensor();
  if (source.scale) {
    const Tensor s = per_channel(source.scale, channels);
    const Tensor w = plain_data(weight);
    IntList scale_shape(size_t(w.dim()), 1);
    scale_shape[0] = channels;
    weight = graph.add_constant(
        run("mul", {w, run("reshape", {s}, {{"shape", std::move(scale_shape)}})}));
    if (b.defined()) b = run("mul", {b, s});
  }
  if (source.shift) {
    const Tensor t = per_channel(source.shift, channels);
    b = b.defined() ? run("add", {b, t}) : t;
  }
  return {weight, b.defined() ? graph.add_constant(b) : nullptr};
}

// The nodes are listed producers first: erased last to first, each node's
// readers are gone before it is.
void erase_matched(Graph& graph, const Match& m) {
  std::vector<Node*> dead = m.source.nodes;
  dead.insert(dead.end(), m.activation.nodes.begin(), m.activation.nodes.end());
  for (auto it = dead.rbegin(); it != dead.rend(); ++it)
    graph.erase(*it);
  graph.erase(m.source.conv);
}

void fuse(Graph& graph, const Match& m) {
  static const OpDef& fused_op = op("conv2d_fused");
  Node* conv = m.source.conv;
  auto [weight, bias] = folded_weights(graph, m.source);
  std::vector<Value*> inputs{conv->input(0), weight};
  if (bias || m.source.residual) inputs.push_back(bias);  // null: absent
  if (m.source.residual) inputs.push_back(m.source.residual);
  Attrs attrs = conv->attrs();
  if (m.activation.kind == EpilogueActivation::None && !m.source.residual) {
    // Only an affine map, folded: the conv with its new weights.
    Node* folded = graph.insert_before(m.last, conv->op(), inputs, attrs);
    m.last->output()->replace_all_uses_with(folded->output());
    erase_matched(graph, m);
    return;
  }
  attrs.set("activation", std::string(cpu::epilogue_activation_name(m.activation.kind)));
  attrs.set("alpha", m.activation.alpha);
  attrs.set("beta", m.activation.beta);
  attrs.set("scale_after", m.activation.scale_after);
  attrs.set("shift_after", m.activation.shift_after);
  Node* fused = graph.insert_before(m.last, fused_op, inputs, attrs);
  m.last->output()->replace_all_uses_with(fused->output());
  erase_matched(graph, m);
}

std::string rule_name(const Match& m) {
  std::string rule = "fuse conv2d";
  if (m.source.scale) rule += " * scale";
  if (m.source.shift) rule += " + shift";
  if (m.source.residual) rule += " + residual";
  if (m.activation.kind != EpilogueActivation::None)
    rule += std::string(" + ") + cpu::epilogue_activation_name(m.activation.kind);
  if (m.activation.scale_after != 1.0 || m.activation.shift_after != 0.0)
    rule += ", then scale and shift";
  return rule;
}

}  // namespace

bool fuse_conv_epilogue(Graph& graph, PassContext& context) {
  // Frozen only, whatever fast-math says: the fused op has no backward rule.
  if (!context.frozen() || (context.exact() && !context.fast_math())) return false;
  bool changed = false;
  // Activations first (they end the longest patterns), then residual adds
  // and affine maps with no activation after them. Each match ends at the node visited, so
  // the nodes it erases come before it in the walk.
  for (bool with_activation : {true, false}) {
    for (Node* node : graph.nodes()) {
      std::optional<Match> m = match_at(node, context.frozen(), with_activation);
      if (!m) continue;
      context.count_rule(rule_name(*m));
      fuse(graph, *m);
      changed = true;
    }
  }
  if (changed) {
    context.note(
        "conv2d_fused: activations and residual adds run in the convolution's epilogue "
        "(oneDNN post-ops), rounding within float32 tolerance of the separate ops; "
        "inference only (exact keeps them apart)");
  }
  return changed;
}

}  // namespace kiln::jit
