// Peephole rewrites:
//   root = op(...) matching one rule of the table below (x*1, neg(neg(x)), ...)
//   -> root's uses use an existing value, or one new node built in its place
//
// Rules are data: a name, the op the pattern is rooted at, a matcher that
// returns the rewrite (or nothing), and whether it may change a result; the
// algebra sits in a comment above each matcher. Every rule keeps results
// bit for bit unless flagged: those run only with fast_math. A
// rule that could change a result for some input (x*0 -> 0 is wrong for
// NaN and Inf; reassociation rounds differently) is not in the table at all.
#include <optional>
#include <unordered_map>

#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/jit/passes/peephole_rules.h"

namespace kiln::jit {

// The algebra each rule relies on; "=" means equal bit for bit, for every
// input (NaN, Inf and signed zeros included) unless the rule is flagged.
std::vector<PeepholeRule> peephole_rules() {
  using namespace matchers;
  return {
      // transpose(transpose(x, a, b), a, b) = x
      {"transpose-transpose", "transpose", transpose_transpose},
      // permute(permute(x, p), q) = permute(x, p∘q), p∘q[i] = p[q[i]]; a
      // transpose is the permute swapping its two dims
      {"permute-chain", "transpose", permute_chain},
      {"permute-chain", "permute", permute_chain},
      // permute(x, [0, 1, ..., n-1]) = transpose(x, d, d) = x
      {"permute-identity", "permute", permute_identity},
      {"permute-identity", "transpose", permute_identity},
      // view/reshape/squeeze/unsqueeze/expand/slice/narrow(x) = x when the
      // result has x's shape (a reshape copies: only of a contiguous x)
      {"view-identity", "view", view_identity},
      {"view-identity", "reshape", view_identity},
      {"view-identity", "squeeze", view_identity},
      {"view-identity", "unsqueeze", view_identity},
      {"view-identity", "expand", view_identity},
      {"view-identity", "slice", view_identity},
      {"view-identity", "narrow", view_identity},
      // reshape(reshape(x, s1), s2) = reshape(x, s2) for a contiguous x, over
      // any chain of view/reshape/squeeze/unsqueeze
      {"reshape-chain", "view", reshape_chain},
      {"reshape-chain", "reshape", reshape_chain},
      // squeeze(unsqueeze(x, d), d) = x
      {"squeeze-unsqueeze", "squeeze", squeeze_unsqueeze},
      // unsqueeze(squeeze(x, d), d) = x when x's dim d has size 1
      {"unsqueeze-squeeze", "unsqueeze", unsqueeze_squeeze},
      // x * 1 = 1 * x = x when the product has x's dtype and shape (a wider
      // 1 broadcasts, a float 1 promotes an integer x)
      {"mul-one", "mul", mul_one},
      // x / 1 = x, same condition
      {"div-one", "div", div_one},
      // x + (-0.0) = x for every float x; x + 0 = x for integers
      {"add-zero", "add", add_negative_zero},
      // x + (+0.0) = x except x = -0.0, where the sum is +0.0: flagged
      {"add-positive-zero", "add", add_positive_zero, /*may_change_rounding=*/true},
      // x - (+0.0) = x for every float x (-0 - 0 = -0); x - 0 = x for integers
      {"sub-zero", "sub", sub_zero},
      // neg(neg(x)) = x (a sign flip twice; integers wrap back)
      {"neg-neg", "neg", involution},
      // relu(relu(x)) = relu(x), abs(abs(x)) = abs(x)
      {"relu-relu", "relu", idempotent},
      {"abs-abs", "abs", idempotent},
      // abs(neg(x)) = abs(x) (abs clears the sign neg flipped)
      {"abs-neg", "abs", abs_neg},
      // cast(x, x.dtype) = x
      {"cast-same-dtype", "cast", cast_same_dtype},
      // cast(cast(x, T1), T2) = cast(x, T2) when every value of x's dtype is
      // exact in T1 (bool -> any, i32 -> i64/f64, f32 -> f64); = x when T2
      // is x's dtype
      {"cast-chain", "cast", cast_chain},
      // dropout(x, train=false) = x (its mask, all true, unused)
      {"dropout-eval", "dropout", dropout_eval},
      // clone(x) = x for a contiguous x (contiguous() of a contiguous value)
      {"clone-contiguous", "clone", clone_contiguous},
      // cat([x]) = x
      {"cat-single", "cat", cat_single},
      // linear(embedding(E, ids), W, b) = embedding(linear(E, W, b), ids): a
      // row of the table's product is the product of that row of E. Only
      // when the table has at most half as many rows as there are ids (W4's
      // language model at batch 32: 256 rows for 2048 tokens, an eighth of
      // the products). float32 products of two rows and more, over rows
      // contiguous in memory, run kiln's GEMM, where a row's sums do not
      // depend on the other rows: equal bit for bit.
      {"linear-of-embedding", "linear", linear_of_embedding},
      // Through a transpose t of dims before the last: linear(t(embedding(E,
      // ids))) = embedding(linear(E, W, b), t(ids)). A product over the
      // transposed rows may run oneDNN instead, which sums in another order
      // (K = 3: off by an ulp; W4's shapes: equal): flagged.
      {"linear-of-transposed-embedding", "linear", linear_of_transposed_embedding,
       /*may_change_rounding=*/true},
  };
}

namespace {

const std::vector<PeepholeRule>& rules() {
  static const std::vector<PeepholeRule> table = peephole_rules();
  return table;
}

// Rules by the op their pattern is rooted at, in table order.
const std::vector<const PeepholeRule*>& rules_rooted_at(const std::string& op_name) {
  static const auto* by_root = [] {
    auto* map = new std::unordered_map<std::string, std::vector<const PeepholeRule*>>();
    for (const PeepholeRule& rule : rules())
      (*map)[rule.root].push_back(&rule);
    return map;
  }();
  static const std::vector<const PeepholeRule*> none;
  auto it = by_root->find(op_name);  // a lookup; the map is never iterated
  return it == by_root->end() ? none : it->second;
}

// A root that is not a view writes a fresh buffer: its result stays apart
// from memory written in place (by batch_norm when training) before or
// after it. Standing a shared value in for it would expose that write.
bool breaks_isolation(const Node& root, const Value& replacement, const WrittenMemory& written) {
  if (root.op().kind == OpKind::View || written.empty()) return false;
  return written.aliases(*root.output()) || written.aliases(replacement);
}

// Makes the rewrite: root's output 0 is replaced everywhere, and root goes
// once nothing of it is used. False when the replacement does not fit.
bool apply(Graph& graph, Node* root, const Rewrite& rewrite, const WrittenMemory& written) {
  Value* out = root->output(0);
  Value* replacement = rewrite.value;
  std::vector<Node*> built;
  if (replacement == nullptr && rewrite.op) {
    built.push_back(graph.insert_before(root, *rewrite.op, rewrite.inputs, rewrite.attrs));
    replacement = built.back()->output(0);
  } else if (replacement == nullptr) {
    replacement = rewrite.build(graph, root, built);
  }
  if (!can_replace(*out, *replacement) || breaks_isolation(*root, *replacement, written)) {
    for (auto node = built.rbegin(); node != built.rend(); ++node)
      graph.erase(*node);
    return false;
  }
  out->replace_all_uses_with(replacement);
  bool unused = true;
  for (const Value* v : root->outputs())
    unused = unused && !is_used(*v);
  if (unused && (rewrite.root_has_no_effects || !has_effects(*root))) graph.erase(root);
  return true;
}

// One sweep over the nodes; returns whether a rule fired.
bool sweep(Graph& graph, PassContext& context) {
  const WrittenMemory written(graph);
  bool changed = false;
  // A rewrite erases only its root (the node being visited) and inserts
  // before it, so the rest of this list stays valid; what the new nodes
  // enable is found by the next sweep.
  for (Node* node : graph.nodes()) {
    for (const PeepholeRule* rule : rules_rooted_at(node->op().name)) {
      if (rule->may_change_rounding && !context.fast_math()) continue;
      std::optional<Rewrite> rewrite = rule->match(*node);
      if (!rewrite || !apply(graph, node, *rewrite, written)) continue;
      context.count_rule(rule->name);
      changed = true;
      break;  // the node may be gone
    }
  }
  return changed;
}

}  // namespace

bool peephole(Graph& graph, PassContext& context) {
  bool changed = false;
  // Each sweep strictly shrinks or simplifies the graph; the bound only
  // guards against a pair of rules undoing each other.
  for (int i = 0; i < 100 && sweep(graph, context); ++i)
    changed = true;
  return changed;
}

}  // namespace kiln::jit
