// The peephole matchers, one per rule of the table in peephole.cpp (where
// each rule's algebra is written). A matcher only reads the graph; the pass
// makes the rewrite it returns.
#include <cmath>
#include <numeric>
#include <string_view>

#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/peephole_rules.h"
#include "kiln/ops/registry.h"

namespace kiln::jit::matchers {
namespace {

Rewrite forward(Value* value) {
  return Rewrite{.value = value};
}

Rewrite build(const std::string& op_name, std::vector<Value*> inputs, Attrs attrs) {
  return Rewrite{.op = &op(op_name), .inputs = std::move(inputs), .attrs = std::move(attrs)};
}

// The node computing `value` when it runs `op_name`, else null.
const Node* produced_by(const Value* value, std::string_view op_name) {
  const Node* producer = value ? value->producer() : nullptr;
  return producer && producer->op().name == op_name ? producer : nullptr;
}

bool produced_by_any(const Value* value, std::initializer_list<std::string_view> op_names) {
  for (std::string_view name : op_names) {
    if (produced_by(value, name)) return true;
  }
  return false;
}

enum class Sign { Any, Positive, Negative };

// A constant holding `number` in every element (at least one), with the sign
// bit asked for (only a float zero has a sign worth asking about).
bool is_constant_all(const Value* value, double number, Sign sign = Sign::Any) {
  if (!value || value->kind() != ValueKind::Constant) return false;
  const Tensor& data = value->data();
  if (data.numel() == 0) return false;
  for (int64_t i = 0; i < data.numel(); ++i) {
    double element = read_element(data, i).to_double();
    if (element != number) return false;
    if (sign != Sign::Any && std::signbit(element) != (sign == Sign::Negative)) return false;
  }
  return true;
}

// A zero that leaves every x unchanged when added: -0.0 for floats (+0.0
// turns x = -0.0 into +0.0), any zero for integers and bool.
bool is_additive_identity(const Value* value) {
  return value &&
         is_constant_all(value, 0.0, is_floating(value->dtype()) ? Sign::Negative : Sign::Any);
}

// x op c or, for a commutative op, c op x: the x, when c satisfies `is_c`
// and the result is exactly x's type.
template <typename Pred>
std::optional<Rewrite> operand_with_identity(const Node& root, bool commutative, Pred is_c) {
  for (size_t x = 0; x < (commutative ? 2u : 1u); ++x) {
    Value* operand = root.input(x);
    if (is_c(root.input(1 - x)) && can_replace(*root.output(), *operand)) return forward(operand);
  }
  return std::nullopt;
}

int64_t normalized_dim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + int64_t(rank) : dim;
}

// The permutation a transpose or permute node applies: output dim i is
// input dim perm[i]. Empty for a 0-d input (its dims 0 and -1 name nothing).
IntList permutation_of(const Node& node) {
  const size_t rank = node.input(0)->shape().size();
  if (rank == 0) return {};
  if (node.op().name == "permute") {
    IntList perm;
    for (int64_t d : node.attrs().get_ints("dims"))
      perm.push_back(normalized_dim(d, rank));
    return perm;
  }
  IntList perm(rank);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  std::swap(perm[size_t(normalized_dim(node.attrs().get_int("dim0"), rank))],
            perm[size_t(normalized_dim(node.attrs().get_int("dim1"), rank))]);
  return perm;
}

bool is_identity(const IntList& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != int64_t(i)) return false;
  }
  return true;
}

// Every value of `from` is exact in `to`, so casting through `to` first
// changes nothing.
bool is_lossless_cast(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  if (from == DType::Float32) return to == DType::Float64;
  if (!is_integral(from) || to == DType::Bool) return false;
  // An integer fits a float whose mantissa covers its bits: 8 and 16 bits fit
  // float32 (24), 32 bits fit float64 (53).
  if (is_floating(to)) return element_size(from) < element_size(to);
  // An integer type: wider, and signed unless both are unsigned.
  if (is_unsigned(to) && !is_unsigned(from)) return false;
  if (is_unsigned(from) && !is_unsigned(to)) return element_size(to) > element_size(from);
  return element_size(to) >= element_size(from);
}

}  // namespace

std::optional<Rewrite> transpose_transpose(const Node& root) {
  const Node* inner = produced_by(root.input(0), "transpose");
  if (!inner || permutation_of(*inner) != permutation_of(root)) return std::nullopt;
  return forward(inner->input(0));
}

std::optional<Rewrite> permute_chain(const Node& root) {
  const Node* inner = root.input(0)->producer();
  if (!produced_by_any(root.input(0), {"transpose", "permute"})) return std::nullopt;
  IntList p = permutation_of(*inner), q = permutation_of(root), composed;
  for (int64_t i : q)
    composed.push_back(p[size_t(i)]);
  if (is_identity(composed)) return forward(inner->input(0));
  return build("permute", {inner->input(0)}, {{"dims", composed}});
}

std::optional<Rewrite> permute_identity(const Node& root) {
  if (!is_identity(permutation_of(root))) return std::nullopt;
  return forward(root.input(0));
}

std::optional<Rewrite> view_identity(const Node& root) {
  Value* x = root.input(0);
  if (!same_dims(root.output()->shape(), x->shape())) return std::nullopt;
  // A view keeps x's layout; reshape copies into a contiguous buffer, so
  // dropping it may hand a strided x to its users.
  if (root.op().kind != OpKind::View && !is_known_contiguous(*x)) return std::nullopt;
  return forward(x);
}

// Whether the value's elements lie densely in row-major order: a fresh
// buffer, or a reshaping view (view, squeeze, unsqueeze) of one. Any shape
// of the same size is a view of such a value.
bool is_row_major(const Value& value) {
  if (is_known_contiguous(value)) return true;
  if (!produced_by_any(&value, {"view", "squeeze", "unsqueeze"})) return false;
  return is_row_major(*value.producer()->input(0));
}

std::optional<Rewrite> reshape_chain(const Node& root) {
  if (!produced_by_any(root.input(0), {"view", "reshape", "squeeze", "unsqueeze"})) {
    return std::nullopt;
  }
  Value* base = root.input(0)->producer()->input(0);
  // A strided base may allow only the shapes in between.
  if (!is_row_major(*base)) return std::nullopt;
  const DimList& shape = root.output()->shape();
  if (same_dims(shape, base->shape())) return forward(base);
  return build(root.op().name, {base}, {{"shape", shape}});
}

std::optional<Rewrite> squeeze_unsqueeze(const Node& root) {
  const Node* inner = produced_by(root.input(0), "unsqueeze");
  if (!inner || !same_dims(root.output()->shape(), inner->input(0)->shape())) return std::nullopt;
  return forward(inner->input(0));
}

std::optional<Rewrite> unsqueeze_squeeze(const Node& root) {
  const Node* inner = produced_by(root.input(0), "squeeze");
  if (!inner || !same_dims(root.output()->shape(), inner->input(0)->shape())) return std::nullopt;
  return forward(inner->input(0));
}

std::optional<Rewrite> mul_one(const Node& root) {
  return operand_with_identity(root, true, [](const Value* c) { return is_constant_all(c, 1.0); });
}

std::optional<Rewrite> div_one(const Node& root) {
  return operand_with_identity(root, false, [](const Value* c) { return is_constant_all(c, 1.0); });
}

std::optional<Rewrite> add_negative_zero(const Node& root) {
  return operand_with_identity(root, true, is_additive_identity);
}

std::optional<Rewrite> add_positive_zero(const Node& root) {
  return operand_with_identity(root, true, [](const Value* c) {
    return is_floating(c->dtype()) && is_constant_all(c, 0.0, Sign::Positive);
  });
}

std::optional<Rewrite> sub_zero(const Node& root) {
  return operand_with_identity(root, false, [](const Value* c) {
    return is_constant_all(c, 0.0, is_floating(c->dtype()) ? Sign::Positive : Sign::Any);
  });
}

std::optional<Rewrite> involution(const Node& root) {
  const Node* inner = produced_by(root.input(0), root.op().name);
  if (!inner) return std::nullopt;
  return forward(inner->input(0));
}

std::optional<Rewrite> idempotent(const Node& root) {
  if (!produced_by(root.input(0), root.op().name)) return std::nullopt;
  return forward(root.input(0));
}

std::optional<Rewrite> abs_neg(const Node& root) {
  const Node* inner = produced_by(root.input(0), "neg");
  if (!inner) return std::nullopt;
  return build("abs", {inner->input(0)}, {});
}

std::optional<Rewrite> cast_same_dtype(const Node& root) {
  if (root.attrs().get_dtype("dtype") != root.input(0)->dtype()) return std::nullopt;
  return forward(root.input(0));
}

std::optional<Rewrite> cast_chain(const Node& root) {
  const Node* inner = produced_by(root.input(0), "cast");
  if (!inner) return std::nullopt;
  Value* base = inner->input(0);
  if (!is_lossless_cast(base->dtype(), inner->output()->dtype())) return std::nullopt;
  DType target = root.attrs().get_dtype("dtype");
  if (target == base->dtype() && !base->type().wrapped_number) return forward(base);
  return build("cast", {base}, {{"dtype", target}});
}

std::optional<Rewrite> dropout_eval(const Node& root) {
  if (root.attrs().get_bool("train") || is_used(*root.output(1))) return std::nullopt;
  Rewrite rewrite = forward(root.input(0));
  rewrite.root_has_no_effects = true;  // in eval mode the kernel copies and draws nothing
  return rewrite;
}

std::optional<Rewrite> clone_contiguous(const Node& root) {
  Value* x = root.input(0);
  if (!is_known_contiguous(*x)) return std::nullopt;
  return forward(x);
}

std::optional<Rewrite> cat_single(const Node& root) {
  if (root.inputs().size() != 1) return std::nullopt;
  return forward(root.input(0));
}

namespace {

// The value's only reader is one input of one node, and no graph output.
bool read_once(const Value& value) {
  return value.uses().size() == 1 && value.graph().output_uses(&value) == 0;
}

// -1 when a dim is symbolic.
int64_t static_numel(const DimList& shape) {
  int64_t n = 1;
  for (const Dim& d : shape) {
    if (!d.is_static()) return -1;
    n *= d.static_value();
  }
  return n;
}

// Both linear-of-embedding rules; `through_transpose` picks the one.
std::optional<Rewrite> linear_of_embedding(const Node& root, bool through_transpose) {
  Value* x = root.input(0);
  const Node* transpose = produced_by(x, "transpose");
  if (bool(transpose) != through_transpose) return std::nullopt;
  Value* embedded = transpose ? transpose->input(0) : x;
  const Node* embedding = produced_by(embedded, "embedding");
  if (!embedding || !read_once(*embedded) || (transpose && !read_once(*x))) return std::nullopt;
  // padding_idx keeps that row of E from its gradient, not W: the
  // rewritten graph would differentiate otherwise.
  if (embedding->attrs().has("padding_idx")) return std::nullopt;
  Value *table = embedding->input(0), *ids = embedding->input(1);
  const int64_t rows = static_numel(table->shape()), tokens = static_numel(ids->shape());
  if (table->dtype() != DType::Float32 || table->shape().size() != 2 || rows < 0 || tokens < 0) {
    return std::nullopt;
  }
  const int64_t table_rows = table->shape()[0].static_value();
  const Dim& out_columns = root.output(0)->shape().back();
  const int64_t columns = out_columns.is_static() ? out_columns.static_value() : -1;
  // Two rows and more, more than 4 columns: kiln's GEMM on both sides.
  if (table_rows < 2 || 2 * table_rows > tokens || columns <= 4) return std::nullopt;
  int64_t dim0 = 0, dim1 = 0;
  if (transpose) {
    const int64_t rank = int64_t(x->shape().size());
    dim0 = transpose->attrs().get_int("dim0");
    dim1 = transpose->attrs().get_int("dim1");
    dim0 = dim0 < 0 ? dim0 + rank : dim0;
    dim1 = dim1 < 0 ? dim1 + rank : dim1;
    if (dim0 >= rank - 1 || dim1 >= rank - 1) return std::nullopt;  // the features moved
  }
  std::vector<Value*> linear_inputs = root.inputs();
  linear_inputs[0] = table;
  const Attrs linear_attrs = root.attrs(),
              transpose_attrs = transpose ? transpose->attrs() : Attrs();
  const Attrs embedding_attrs = embedding->attrs();
  const OpDef *linear_op = &root.op(), *embedding_op = &embedding->op();
  const OpDef* transpose_op = transpose ? &transpose->op() : nullptr;
  Rewrite rewrite;
  rewrite.build = [=](Graph& graph, Node* at, std::vector<Node*>& built) {
    built.push_back(graph.insert_before(at, *linear_op, linear_inputs, linear_attrs));
    Value* product = built.back()->output(0);
    Value* order = ids;
    if (transpose_op) {
      built.push_back(graph.insert_before(at, *transpose_op, {ids}, transpose_attrs));
      order = built.back()->output(0);
    }
    built.push_back(graph.insert_before(at, *embedding_op, {product, order}, embedding_attrs));
    return built.back()->output(0);
  };
  return rewrite;
}

}  // namespace

std::optional<Rewrite> linear_of_embedding(const Node& root) {
  return linear_of_embedding(root, false);
}

std::optional<Rewrite> linear_of_transposed_embedding(const Node& root) {
  return linear_of_embedding(root, true);
}

}  // namespace kiln::jit::matchers
