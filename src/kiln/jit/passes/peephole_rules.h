// The pieces of the peephole pass (peephole.cpp holds the rule table): what
// a rule is, what its matcher returns, and the matchers, one per rule, in
// peephole_matchers.cpp.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// What a matcher found: root's output 0 becomes `value`, an existing value,
// or (value null) the output of `op(inputs) {attrs}` built in root's place,
// or (op null too) the value `build` returns from the nodes it inserts
// before root (appending each to `built`, so a rewrite that does not fit
// can take them out again).
struct Rewrite {
  Value* value = nullptr;
  const OpDef* op = nullptr;
  std::vector<Value*> inputs;
  Attrs attrs;
  std::function<Value*(Graph& graph, Node* root, std::vector<Node*>& built)> build;
  // Set by a matcher that knows its root has no effects under its attributes
  // (an eval-mode dropout draws nothing), so the root may go once unused.
  bool root_has_no_effects = false;
};

using Matcher = std::optional<Rewrite> (*)(const Node& root);

struct PeepholeRule {
  const char* name;  // as counted in the report
  const char* root;  // the op the pattern is rooted at
  Matcher match;
  bool may_change_rounding = false;
};

// The table, in the order rules are tried for a node.
std::vector<PeepholeRule> peephole_rules();

namespace matchers {

std::optional<Rewrite> transpose_transpose(const Node& root);
std::optional<Rewrite> permute_chain(const Node& root);
std::optional<Rewrite> permute_identity(const Node& root);
std::optional<Rewrite> view_identity(const Node& root);
std::optional<Rewrite> reshape_chain(const Node& root);
std::optional<Rewrite> squeeze_unsqueeze(const Node& root);
std::optional<Rewrite> unsqueeze_squeeze(const Node& root);
std::optional<Rewrite> mul_one(const Node& root);
std::optional<Rewrite> div_one(const Node& root);
std::optional<Rewrite> add_negative_zero(const Node& root);
std::optional<Rewrite> add_positive_zero(const Node& root);
std::optional<Rewrite> sub_zero(const Node& root);
std::optional<Rewrite> involution(const Node& root);
std::optional<Rewrite> idempotent(const Node& root);
std::optional<Rewrite> abs_neg(const Node& root);
std::optional<Rewrite> cast_same_dtype(const Node& root);
std::optional<Rewrite> cast_chain(const Node& root);
std::optional<Rewrite> dropout_eval(const Node& root);
std::optional<Rewrite> clone_contiguous(const Node& root);
std::optional<Rewrite> cat_single(const Node& root);
std::optional<Rewrite> linear_of_embedding(const Node& root);
std::optional<Rewrite> linear_of_transposed_embedding(const Node& root);

}  // namespace matchers
}  // namespace kiln::jit
