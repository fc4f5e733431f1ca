// einsum as a composition of ops: parse the equation into labels per dim,
// take repeated labels' diagonals (a strided slice of the two dims merged),
// sum labels nothing else needs, contract the operands left to right (one
// batched matmul each), then sum and permute into the output's order.
#include "kiln/ops/einsum.h"

#include <algorithm>
#include <optional>

#include "kiln/core/sym_shape.h"
#include "kiln/ops/einsum_equation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "kiln/util/error.h"

namespace kiln {
namespace {

using einsum_equation::contains, einsum_equation::ellipsis_dims, einsum_equation::Equation,
    einsum_equation::kLetters, einsum_equation::labels_of, einsum_equation::LabelSet,
    einsum_equation::Labels, einsum_equation::name_of, einsum_equation::output_labels,
    einsum_equation::parse, einsum_equation::position_of, einsum_equation::Term;

struct Operand {
  Tensor t;
  Labels labels;  // one per dim of t
};

Tensor permuted(const Operand& op, const Labels& order) {
  IntList dims;
  for (int label : order)
    dims.push_back(int64_t(position_of(op.labels, label)));
  bool identity = true;
  for (size_t d = 0; d < dims.size(); ++d)
    identity = identity && dims[d] == int64_t(d);
  return identity ? op.t : permute(op.t, dims);
}

// The diagonal of dims a < b (equal sizes n), as the last dim: the two are
// moved last and merged into n * n, whose every (n + 1)-th element is on it.
Operand diagonal(const Operand& op, size_t a, size_t b) {
  Labels order;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (d != a && d != b) order.push_back(op.labels[d]);
  }
  IntList dims;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (d != a && d != b) dims.push_back(int64_t(d));
  }
  dims.push_back(int64_t(a));
  dims.push_back(int64_t(b));
  const Tensor moved = permute(op.t, dims);
  DimList shape = sym_shape(moved);
  const Dim n = shape.back();
  shape.pop_back();
  shape.back() = n * n;
  const int64_t step = size_as_int(n, "einsum (a repeated subscript's size)") + 1;
  order.push_back(op.labels[a]);
  return {slice(reshape(moved, std::span<const Dim>(shape)), -1, 0, std::nullopt, step), order};
}

Operand take_diagonals(Operand op, size_t index) {
  for (size_t a = 0; a < op.labels.size(); ++a) {
    for (size_t b = a + 1; b < op.labels.size(); ++b) {
      if (op.labels[a] != op.labels[b]) continue;
      const DimList shape = sym_shape(op.t);
      KILN_CHECK(shape[a] == shape[b], "einsum(): subscript ", name_of(op.labels[a]),
                 " is repeated for operand ", index, " but the sizes don't match, ", shape[b],
                 " != ", shape[a]);
      return take_diagonals(diagonal(op, a, b), index);
    }
  }
  return op;
}

// A label's sizes across operands must agree or be 1 (which broadcasts).
void check_sizes(const std::vector<Operand>& ops, size_t label_count) {
  std::vector<std::optional<Dim>> seen(label_count);
  for (size_t i = 0; i < ops.size(); ++i) {
    const DimList shape = sym_shape(ops[i].t);
    for (size_t d = 0; d < shape.size(); ++d) {
      std::optional<Dim>& size = seen[size_t(ops[i].labels[d])];
      if (!size || *size == Dim(1)) {
        size = shape[d];
        continue;
      }
      KILN_CHECK(shape[d] == *size || shape[d] == Dim(1), "einsum(): subscript ",
                 name_of(ops[i].labels[d]), " has size ", shape[d], " for operand ", i,
                 " which does not broadcast with previously seen size ", *size);
    }
  }
}

// Sums the dims whose labels are not `needed` (sum over no dims would be
// over all of them, so none is skipped).
Operand sum_unneeded(const Operand& op, const LabelSet& needed) {
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
  return {sum(op.t, dims), kept};
}

Dim size_of(const Operand& op, int label) {
  return sym_shape(op.t)[position_of(op.labels, label)];
}

DimList concat(DimList a, const DimList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Labels concat(Labels a, const Labels& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Sizes [from, to) of `shape`, and their product.
DimList part(const DimList& shape, size_t from, size_t to) {
  return DimList(shape.begin() + int64_t(from), shape.begin() + int64_t(to));
}

Dim product(const DimList& sizes) {
  Dim n = 1;
  for (const Dim& s : sizes)
    n *= s;
  return n;
}

// a[batch, a_only, summed] · b[batch, summed, b_only] -> [batch, a_only, b_only],
// as a batched matmul of [batch, M, K] by [batch, K, N] (batch dims of size 1
// broadcast); a broadcast product when nothing is summed. `needed`: the
// labels the output or a later operand still uses.
Operand contract(Operand a, Operand b, const LabelSet& needed) {
  Labels batch, summed, a_only, b_only;
  for (int label : a.labels) {
    if (!contains(b.labels, label)) {
      a_only.push_back(label);
    } else {
      (needed[size_t(label)] ? batch : summed).push_back(label);
    }
  }
  for (int label : b.labels) {
    if (!contains(a.labels, label)) b_only.push_back(label);
  }
  // A summed label of size 1 on one side: the other side is summed first.
  for (int label : summed) {
    const Dim sa = size_of(a, label), sb = size_of(b, label);
    if (sa == sb) continue;
    Operand& larger = sa == Dim(1) ? b : a;
    larger.t = sum(larger.t, {int64_t(position_of(larger.labels, label))}, /*keepdim=*/true);
  }
  const Labels out_labels = concat(concat(batch, a_only), b_only);
  const Tensor at = permuted(a, concat(concat(batch, a_only), summed));
  const Tensor bt = permuted(b, concat(concat(batch, summed), b_only));
  const DimList as = sym_shape(at), bs = sym_shape(bt);
  const size_t nb = batch.size(), na = a_only.size(), ns = summed.size();
  const DimList a_sizes = part(as, nb, nb + na), b_sizes = part(bs, nb + ns, bs.size());
  if (summed.empty()) {
    const DimList a_shape = concat(as, DimList(b_only.size(), Dim(1)));
    const DimList b_shape = concat(concat(part(bs, 0, nb), DimList(na, Dim(1))), b_sizes);
    return {
        mul(reshape(at, std::span<const Dim>(a_shape)), reshape(bt, std::span<const Dim>(b_shape))),
        out_labels};
  }
  const Dim m = product(a_sizes), k = product(part(as, nb + na, as.size())), n = product(b_sizes);
  const DimList a3 = concat(part(as, 0, nb), {m, k}), b3 = concat(part(bs, 0, nb), {k, n});
  const Tensor c =
      matmul(reshape(at, std::span<const Dim>(a3)), reshape(bt, std::span<const Dim>(b3)));
  const DimList out_shape = concat(concat(part(sym_shape(c), 0, nb), a_sizes), b_sizes);
  return {reshape(c, std::span<const Dim>(out_shape)), out_labels};
}

// The labels the output and operands [from, end) use.
LabelSet needed_from(const Labels& output, const std::vector<Operand>& ops, size_t from,
                     size_t label_count) {
  LabelSet needed(label_count, false);
  for (int label : output)
    needed[size_t(label)] = true;
  for (size_t i = from; i < ops.size(); ++i) {
    for (int label : ops[i].labels)
      needed[size_t(label)] = true;
  }
  return needed;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  KILN_CHECK(!operands.empty(), "einsum(): must provide at least one operand");
  const Equation eq = parse(equation);
  KILN_CHECK(eq.inputs.size() <= operands.size(),
             "einsum(): fewer operands were provided than specified in the equation");
  KILN_CHECK(eq.inputs.size() >= operands.size(),
             "einsum(): more operands were provided than specified in the equation");
  std::vector<int64_t> own_ellipsis;
  int64_t all_ellipsis = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    KILN_CHECK(operands[i].dtype() == operands[0].dtype(),
               "einsum(): expected all operands to have the same dtype, but operand 0 is ",
               operands[0].dtype(), " and operand ", i, " is ", operands[i].dtype());
    own_ellipsis.push_back(ellipsis_dims(eq.inputs[i], operands[i].dim(), i));
    all_ellipsis = std::max(all_ellipsis, own_ellipsis.back());
  }
  const size_t label_count = size_t(kLetters + all_ellipsis);
  const Labels output = output_labels(eq, all_ellipsis);
  std::vector<Operand> ops;
  for (size_t i = 0; i < operands.size(); ++i) {
    Operand op{operands[i], labels_of(eq.inputs[i], own_ellipsis[i], all_ellipsis)};
    ops.push_back(take_diagonals(std::move(op), i));
  }
  check_sizes(ops, label_count);
  Operand result = sum_unneeded(ops[0], needed_from(output, ops, 1, label_count));
  for (size_t i = 1; i < ops.size(); ++i) {
    const LabelSet later = needed_from(output, ops, i + 1, label_count);
    LabelSet for_next = later;
    for (int label : result.labels)
      for_next[size_t(label)] = true;
    result = contract(result, sum_unneeded(ops[i], for_next), later);
  }
  LabelSet in_output(label_count, false);
  for (int label : output)
    in_output[size_t(label)] = true;
  return permuted(sum_unneeded(result, in_output), output);
}

}  // namespace kiln
