// Einsum's translation into kiln ops: the equation parsed into one label
// per dim, repeated labels' diagonals taken (a strided slice of the two
// dims merged), labels nothing else needs summed, the operands contracted
// left to right with one batched matmul each, the result summed and
// permuted into the output's order.
//
// The equation is kiln::einsum's (ops/einsum_equation.h); the rest is the
// algorithm of kiln::einsum (ops/einsum.cpp) on graph values:
// that one is written on Tensors through dispatch, which an import cannot
// call on values it only knows the types of.
#include <algorithm>
#include <optional>

#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/ops/einsum_equation.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

using einsum_equation::contains, einsum_equation::Equation, einsum_equation::kLetters,
    einsum_equation::labels_of, einsum_equation::LabelSet, einsum_equation::Labels,
    einsum_equation::position_of, einsum_equation::Term;

struct Operand {
  Value* v;
  Labels labels;  // one per dim of v
};

// The equation's errors (torch's messages) with the node named.
template <typename Fn>
auto for_node(const Node& node, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(ErrorKind::Value, "onnx import: Einsum '" + node.name() + "': " + e.what());
  }
}

Equation parse(const Node& node) {
  const std::string text = attr_string(node, "equation", "");
  return for_node(node, [&] { return einsum_equation::parse(text); });
}

Labels output_labels(const Node& node, const Equation& eq, int64_t all_ellipsis) {
  return for_node(node, [&] { return einsum_equation::output_labels(eq, all_ellipsis); });
}

Value* permuted(ImportContext& c, const Operand& op, const Labels& order) {
  IntList dims;
  bool identity = true;
  for (int label : order) {
    dims.push_back(int64_t(position_of(op.labels, label)));
    identity = identity && dims.back() == int64_t(dims.size() - 1);
  }
  return identity ? op.v : c.emit("permute", {op.v}, {{"dims", dims}});
}

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// The diagonals of repeated labels, each as the last dim: the two dims
// moved last and merged into n * n, whose every (n + 1)-th element is on it.
Operand take_diagonals(const Node& node, ImportContext& c, Operand op) {
  for (size_t a = 0; a < op.labels.size(); ++a) {
    for (size_t b = a + 1; b < op.labels.size(); ++b) {
      if (op.labels[a] != op.labels[b]) continue;
      const DimList& shape = op.v->shape();
      KILN_CHECK_VALUE(shape[a].is_static() && shape[b].is_static() && shape[a] == shape[b],
                       "onnx import: Einsum '", node.name(), "' takes a diagonal of sizes ",
                       shape[a], " and ", shape[b], " (they must be equal and static)");
      Labels order;
      for (size_t d = 0; d < op.labels.size(); ++d)
        if (d != a && d != b) order.push_back(op.labels[d]);
      const int label = op.labels[a];
      IntList dims;
      for (size_t d = 0; d < op.labels.size(); ++d)
        if (d != a && d != b) dims.push_back(int64_t(d));
      dims.push_back(int64_t(a));
      dims.push_back(int64_t(b));
      Value* last = c.emit("permute", {op.v}, {{"dims", dims}});
      DimList merged = last->shape();
      const int64_t n = merged.back().static_value();
      merged.pop_back();
      merged.back() = n * n;
      Value* diagonal = c.emit("slice", {reshape_to(c, last, merged)},
                               {{"dim", int64_t(-1)}, {"start", int64_t(0)}, {"step", n + 1}});
      order.push_back(label);
      return take_diagonals(node, c, {diagonal, order});
    }
  }
  return op;
}

// Sums the dims whose labels are not `needed`.
Operand sum_unneeded(ImportContext& c, const Operand& op, const LabelSet& needed) {
  IntList dims;
  Labels kept;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (needed[size_t(op.labels[d])]) {
      kept.push_back(op.labels[d]);
    } else {
      dims.push_back(int64_t(d));
    }
  }
  if (dims.empty()) return op;
  return {c.emit("sum", {op.v}, {{"dims", dims}, {"keepdim", false}}), kept};
}

Dim size_of(const Operand& op, int label) {
  return op.v->shape()[position_of(op.labels, label)];
}

template <typename T>
std::vector<T> joined(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

DimList part(const DimList& shape, size_t from, size_t to) {
  return DimList(shape.begin() + int64_t(from), shape.begin() + int64_t(to));
}

// a[batch, a_only, summed] · b[batch, summed, b_only] -> [batch, a_only,
// b_only], one batched matmul of [batch, M, K] by [batch, K, N] (batch
// dims of size 1 broadcast); a broadcast product when nothing is summed.
Operand contract(ImportContext& c, Operand a, Operand b, const LabelSet& needed) {
  Labels batch, summed, a_only, b_only;
  for (int label : a.labels) {
    if (!contains(b.labels, label)) {
      a_only.push_back(label);
    } else {
      (needed[size_t(label)] ? batch : summed).push_back(label);
    }
  }
  for (int label : b.labels)
    if (!contains(a.labels, label)) b_only.push_back(label);
  // A summed label of size 1 on one side: the other side is summed first.
  for (int label : summed) {
    const Dim sa = size_of(a, label), sb = size_of(b, label);
    if (sa == sb) continue;
    Operand& larger = sa == Dim(1) ? b : a;
    larger.v =
        c.emit("sum", {larger.v},
               {{"dims", IntList{int64_t(position_of(larger.labels, label))}}, {"keepdim", true}});
  }
  const Labels out_labels = joined(joined(batch, a_only), b_only);
  Value* at = permuted(c, a, joined(joined(batch, a_only), summed));
  Value* bt = permuted(c, b, joined(joined(batch, summed), b_only));
  const DimList &as = at->shape(), &bs = bt->shape();
  const size_t nb = batch.size(), na = a_only.size(), ns = summed.size();
  const DimList a_sizes = part(as, nb, nb + na), b_sizes = part(bs, nb + ns, bs.size());
  if (summed.empty()) {
    const DimList a_shape = joined(as, DimList(b_only.size(), Dim(1)));
    const DimList b_shape = joined(joined(part(bs, 0, nb), DimList(na, Dim(1))), b_sizes);
    return {c.emit("mul", {reshape_to(c, at, a_shape), reshape_to(c, bt, b_shape)}), out_labels};
  }
  const Dim m = numel_of(a_sizes), k = numel_of(part(as, nb + na, as.size())),
            n = numel_of(b_sizes);
  Value* product = c.emit("matmul", {reshape_to(c, at, joined(part(as, 0, nb), DimList{m, k})),
                                     reshape_to(c, bt, joined(part(bs, 0, nb), DimList{k, n}))});
  const DimList out_shape = joined(joined(part(product->shape(), 0, nb), a_sizes), b_sizes);
  return {reshape_to(c, product, out_shape), out_labels};
}

// The labels the output and operands [from, end) use.
LabelSet needed_from(const Labels& output, const std::vector<Operand>& ops, size_t from,
                     size_t label_count) {
  LabelSet needed(label_count, false);
  for (int label : output)
    needed[size_t(label)] = true;
  for (size_t i = from; i < ops.size(); ++i)
    for (int label : ops[i].labels)
      needed[size_t(label)] = true;
  return needed;
}

void einsum(const Node& node, ImportContext& c) {
  const Equation eq = parse(node);
  KILN_CHECK_VALUE(int(eq.inputs.size()) == node.input_size(), "onnx import: Einsum '", node.name(),
                   "' has ", node.input_size(), " inputs, its equation ", eq.inputs.size(),
                   " terms");
  std::vector<int64_t> own_ellipsis;
  int64_t all_ellipsis = 0;
  for (int i = 0; i < node.input_size(); ++i) {
    const Term& term = eq.inputs[size_t(i)];
    const int64_t ndim = rank_of(c.input(node, i)), letters = int64_t(term.letters.size());
    KILN_CHECK_VALUE(term.ellipsis_at >= 0 ? letters <= ndim : letters == ndim,
                     "onnx import: Einsum '", node.name(), "' term ", i, " has ", letters,
                     " subscripts for an input of rank ", ndim);
    own_ellipsis.push_back(ndim - letters);
    all_ellipsis = std::max(all_ellipsis, own_ellipsis.back());
  }
  const size_t label_count = size_t(kLetters + all_ellipsis);
  const Labels output = output_labels(node, eq, all_ellipsis);
  std::vector<Operand> ops;
  for (int i = 0; i < node.input_size(); ++i) {
    Operand op{c.input(node, i),
               labels_of(eq.inputs[size_t(i)], own_ellipsis[size_t(i)], all_ellipsis)};
    ops.push_back(take_diagonals(node, c, op));
  }
  Operand result = sum_unneeded(c, ops[0], needed_from(output, ops, 1, label_count));
  for (size_t i = 1; i < ops.size(); ++i) {
    const LabelSet later = needed_from(output, ops, i + 1, label_count);
    LabelSet for_next = later;
    for (int label : result.labels)
      for_next[size_t(label)] = true;
    result = contract(c, result, sum_unneeded(c, ops[i], for_next), later);
  }
  LabelSet in_output(label_count, false);
  for (int label : output)
    in_output[size_t(label)] = true;
  define(node, c, permuted(c, sum_unneeded(c, result, in_output), output));
}

}  // namespace

void add_einsum_importers(Table& table) {
  table["Einsum"] = einsum;
}

}  // namespace kiln::onnx
