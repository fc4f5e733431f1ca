// Attention as one op, for the compiled plan:
//   %s = matmul(%q, %kt)                    (%kt = transpose(%k, -2, -1), or any [.., E, S])
//   %x = mul(%s, c) | div(%s, c)            (c a one-element constant; absent: scale 1)
//   %m = add(%x, %mask)                     (optional, %mask of the scores' dtype)
//   %w = softmax(%m) {dim=-1}
//   %y = matmul(%w, %v)
// -> %y = scaled_dot_product_attention(%q, %k, %v, %mask) {scale=c or 1/c}
// when every intermediate has no other reader and q, k, v have one rank
// and the same leading dims: kiln.nn's attention as traced (its eager
// calls run this op already) and ONNX-imported attention (BERT's MatMul ->
// Div -> Add -> Softmax -> MatMul). The fused kernel never holds the whole
// score matrix and computes the softmax as it goes: it rounds differently
// from the ops it replaces (within float32 tolerance), and a row whose
// every key is masked with -inf gives zeros where softmax gives NaN.
//
// So it runs where rounding may change: fast-math, and frozen (inference)
// graphs unless exact, as fold_batch_norm: ONNX imports, and
// kiln.jit.trace(..., frozen=True). The fused op has no ONNX form: export
// a trace that is not frozen.
#include <optional>

#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

// The node producing `value` when it is `op_name` and `value` has no other
// reader (nor is a graph output), else null.
Node* sole_producer(const Value* value, const char* op_name) {
  Node* producer = value ? value->producer() : nullptr;
  if (!producer || producer->op().name != op_name) return nullptr;
  if (value->uses().size() != 1 || producer->graph().output_uses(value) != 0) return nullptr;
  return producer;
}

struct Match {
  Node *scores = nullptr, *scaled = nullptr, *masked = nullptr, *softmax = nullptr,
       *output = nullptr;
  Value* mask = nullptr;
  double scale = 1.0;
  bool frozen = false;  // the graph's parameters are constants
};

// scaled -> scale from mul(s, c), mul(c, s) or div(s, c); the scores'
// value through `scores_out`.
bool read_scale(Node* scaled, Match& m, Value*& scores_out) {
  const std::string& name = scaled->op().name;
  for (size_t i = 0; i < 2; ++i) {
    std::optional<double> c = constant_number(scaled->input(1 - i), m.frozen);
    if (!c) continue;
    if (name == "div" && i == 1) continue;  // c / s is no scale
    m.scale = name == "div" ? 1.0 / *c : *c;
    scores_out = scaled->input(i);
    return true;
  }
  return false;
}

bool is_last_dim(const Node& softmax) {
  const int64_t dim = softmax.attrs().get_int("dim");
  return dim == -1 || dim == int64_t(softmax.output()->shape().size()) - 1;
}

// x -> its scale and the matmul of the scores: mul/div by a constant, or
// the scores themselves (scale 1).
bool match_scores(Value* x, Match& m) {
  Value* scores = x;
  m.scaled = nullptr;
  m.scale = 1.0;
  if (Node* scaled = sole_producer(x, "mul"); scaled || (scaled = sole_producer(x, "div"))) {
    if (!read_scale(scaled, m, scores)) return false;
    m.scaled = scaled;
  }
  m.scores = sole_producer(scores, "matmul");
  return m.scores != nullptr;
}

// The chain below `output` (a matmul), or nullopt.
std::optional<Match> match_attention(Node* output, bool frozen) {
  Match m;
  m.output = output;
  m.frozen = frozen;
  m.softmax = sole_producer(output->input(0), "softmax");
  if (!m.softmax || !is_last_dim(*m.softmax)) return std::nullopt;
  Value* x = m.softmax->input(0);
  Node* add = sole_producer(x, "add");
  if (!add) return match_scores(x, m) ? std::optional<Match>(m) : std::nullopt;
  // add(scores, mask) or add(mask, scores); the mask of the scores' dtype,
  // no larger than they are.
  for (size_t i = 0; i < 2; ++i) {
    Value *side = add->input(i), *mask = add->input(1 - i);
    if (mask->dtype() != side->dtype() || mask->type().wrapped_number) continue;
    if (!(add->output()->shape() == side->shape()) || !match_scores(side, m)) continue;
    m.masked = add;
    m.mask = mask;
    return m;
  }
  return std::nullopt;
}

bool same_leading_dims(const Value& a, const Value& b, size_t rank) {
  for (size_t d = 0; d + 2 < rank; ++d)
    if (!(a.shape()[d] == b.shape()[d])) return false;
  return true;
}

// k from kᵀ: transpose's input when kᵀ is transpose(k, -2, -1), else a new
// transpose (a view: no copy).
Value* key_of(Graph& graph, Node* before, Value* key_t) {
  static const OpDef& transpose = op("transpose");
  const int64_t rank = int64_t(key_t->shape().size());
  Node* producer = key_t->producer();
  if (producer && &producer->op() == &transpose) {
    int64_t d0 = producer->attrs().get_int("dim0"), d1 = producer->attrs().get_int("dim1");
    d0 = d0 < 0 ? d0 + rank : d0;
    d1 = d1 < 0 ? d1 + rank : d1;
    if (std::min(d0, d1) == rank - 2 && std::max(d0, d1) == rank - 1) return producer->input(0);
  }
  Attrs attrs{{"dim0", int64_t(-2)}, {"dim1", int64_t(-1)}};
  return graph.insert_before(before, transpose, {key_t}, attrs)->output();
}

}  // namespace

bool fuse_attention(Graph& graph, PassContext& context) {
  static const OpDef& attention = op("scaled_dot_product_attention");
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op().name != "matmul") continue;
    std::optional<Match> m = match_attention(node, context.frozen());
    if (!m) continue;
    Value *q = m->scores->input(0), *key_t = m->scores->input(1), *v = node->input(1);
    const size_t rank = q->shape().size();
    const bool fits = rank >= 2 && key_t->shape().size() == rank && v->shape().size() == rank &&
                      (q->dtype() == DType::Float32 || q->dtype() == DType::Float64) &&
                      key_t->dtype() == q->dtype() && v->dtype() == q->dtype() &&
                      same_leading_dims(*q, *key_t, rank) && same_leading_dims(*q, *v, rank);
    if (!fits) {
      context.note(
          "matmul -> softmax -> matmul: not fused (query, key and value differ in "
          "rank, dtype or leading dims)");
      continue;
    }
    Value* k = key_of(graph, node, key_t);
    std::vector<Value*> inputs = {q, k, v};
    if (m->mask) inputs.push_back(m->mask);
    Attrs attrs{{"scale", m->scale}, {"is_causal", false}};
    Node* fused = graph.insert_before(node, attention, inputs, attrs);
    node->output()->replace_all_uses_with(fused->output());
    for (Node* dead : {node, m->softmax, m->masked, m->scaled, m->scores})
      if (dead) graph.erase(dead);
    context.count_rule(m->mask ? "fuse masked attention" : "fuse attention");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::jit
