// Translations of ONNX's loss ops and of the reductions that are a
// reduction between two pointwise steps into kiln ops.
//
//   NegativeLogLikelihoodLoss  -> gather of the target's class, weighted,
//                                 ignored targets masked, reduced
//   SoftmaxCrossEntropyLoss    -> log_softmax over the classes, then as above
//   ReduceL1, ReduceSumSquare  -> sum of abs(x), of x * x
//   ReduceL2, ReduceLogSum     -> sqrt, log of a sum
//   ReduceLogSumExp            -> max + log(sum(exp(x - max)))
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* scalar(ImportContext& c, double value, DType dtype) {
  return c.constant(full({}, value, dtype));
}

IntList all_axes(int64_t rank) {
  IntList axes;
  for (int64_t d = 0; d < rank; ++d)
    axes.push_back(d);
  return axes;
}

// ---- losses ----

// NegativeLogLikelihoodLoss over log-probabilities `input` [N, C, d...] and
// class indices `target` [N, d...]: loss = -input[n, target, d...] times the
// target's class weight, 0 where the target is ignore_index. "mean" divides
// the sum by the total weight of the targets not ignored (their count
// without weights), as the ONNX spec and PyTorch do.
Value* nll_loss(const Node& node, ImportContext& c, Value* input, Value* target, Value* weight) {
  std::string reduction = attr_string(node, "reduction", "mean");
  KILN_CHECK_VALUE(reduction == "none" || reduction == "sum" || reduction == "mean",
                   "onnx import: ", node.op_type(), " with reduction '", reduction,
                   "' (none, sum or mean)");
  KILN_CHECK_VALUE(rank_of(input) >= 2 && rank_of(target) == rank_of(input) - 1,
                   "onnx import: ", node.op_type(), " of an input of shape ", input->shape(),
                   " and a target of shape ", target->shape(),
                   " (expected [N, C, d...] and [N, d...])");
  DType dtype = input->dtype();
  if (target->dtype() != DType::Int64) target = c.emit("cast", {target}, {{"dtype", DType::Int64}});

  // An ignored target may be any number (-1, 1000): it reads class 0, always
  // there, and is masked out after.
  Value* ignored = nullptr;
  if (has_attr(node, "ignore_index")) {
    Value* ignore_index = c.constant(full({}, attr_int(node, "ignore_index", 0), DType::Int64));
    ignored = c.emit("eq", {target, ignore_index});
    target = c.emit("where", {ignored, c.constant(full({}, int64_t(0), DType::Int64)), target});
  }
  Value* index = c.emit("unsqueeze", {target}, {{"dim", int64_t(1)}});
  Value* picked = c.emit("squeeze", {c.emit("gather", {input, index}, {{"dim", int64_t(1)}})},
                         {{"dims", IntList{1}}});
  Value* loss = c.emit("neg", {picked});

  // Each target's weight: its class weight, 0 where ignored; none when both
  // are absent (every target counts 1).
  Value* weights = nullptr;
  if (weight) {
    Dim count = 1;
    for (const Dim& size : target->shape())
      count = count * size;
    Value* flat = c.emit("reshape", {target}, {{"shape", DimList{count}}});
    Value* picked_weights = c.emit("index_select", {weight, flat}, {{"dim", int64_t(0)}});
    weights = c.emit("reshape", {picked_weights}, {{"shape", target->shape()}});
    loss = c.emit("mul", {loss, weights});
  }
  if (ignored) {
    // where, not a multiply by 0, so an ignored -inf log-probability gives 0.
    Value* zero = scalar(c, 0.0, dtype);
    loss = c.emit("where", {ignored, zero, loss});
    weights = weights ? c.emit("where", {ignored, zero, weights})
                      : c.emit("cast", {c.emit("logical_not", {ignored})}, {{"dtype", dtype}});
  }
  if (reduction == "none") return loss;
  Attrs everything = {{"dims", IntList{}}, {"keepdim", false}};
  Value* total = c.emit("sum", {loss}, everything);
  if (reduction == "sum") return total;
  if (!weights) return c.emit("mean", {loss}, everything);
  return c.emit("div", {total, c.emit("sum", {weights}, everything)});
}

void negative_log_likelihood_loss(const Node& node, ImportContext& c) {
  define(node, c, nll_loss(node, c, c.input(node, 0), c.input(node, 1), c.input(node, 2)));
}

// SoftmaxCrossEntropyLoss: the NLL loss of log_softmax over the classes
// (axis 1); its optional second output is those log-probabilities.
void softmax_cross_entropy_loss(const Node& node, ImportContext& c) {
  Value* scores = c.input(node, 0);
  KILN_CHECK_VALUE(rank_of(scores) >= 2, "onnx import: SoftmaxCrossEntropyLoss of scores of shape ",
                   scores->shape(), " (expected [N, C, d...])");
  Value* log_prob = c.emit("log_softmax", {scores}, {{"dim", int64_t(1)}});
  define(node, c, nll_loss(node, c, log_prob, c.input(node, 1), c.input(node, 2)));
  if (node.output_size() > 1 && !node.output(1).empty()) define(node, c, log_prob, 1);
}

// ---- reductions between pointwise steps ----

// The reduction's axes: the input (opset 18) or the attribute (before);
// none means all unless noop_with_empty_axes, which skips the reduction
// but keeps the pointwise steps (as ONNX Runtime does: ReduceL1 gives |x|).
struct ReduceForm {
  IntList axes;
  bool keepdim;
  bool noop;
};

ReduceForm reduce_form(const Node& node, ImportContext& c) {
  bool from_input = c.opset() >= 18 && c.input(node, 1);
  IntList axes = from_input ? axes_of(node, c, 1, {}) : attr_ints(node, "axes", {});
  bool noop = axes.empty() && attr_int(node, "noop_with_empty_axes", 0) != 0;
  return {axes, attr_int(node, "keepdims", 1) != 0, noop};
}

Value* sum_over(ImportContext& c, Value* x, const ReduceForm& form) {
  if (form.noop) return x;
  return c.emit("sum", {x}, {{"dims", form.axes}, {"keepdim", form.keepdim}});
}

// kiln's sum of int32 gives int64 (as PyTorch's); ONNX keeps the input's type.
void define_as(const Node& node, ImportContext& c, Value* result, DType dtype) {
  if (result->dtype() != dtype) result = c.emit("cast", {result}, {{"dtype", dtype}});
  define(node, c, result);
}

// Roots and logarithms of integers are taken in float64 and truncated back
// (as ONNX Runtime does).
Value* as_floating(ImportContext& c, Value* x) {
  if (is_floating(x->dtype())) return x;
  return c.emit("cast", {x}, {{"dtype", DType::Float64}});
}

void reduce_l1(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  define_as(node, c, sum_over(c, c.emit("abs", {x}), reduce_form(node, c)), x->dtype());
}

void reduce_sum_square(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  define_as(node, c, sum_over(c, c.emit("mul", {x, x}), reduce_form(node, c)), x->dtype());
}

void reduce_l2(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* total = sum_over(c, c.emit("mul", {x, x}), reduce_form(node, c));
  define_as(node, c, c.emit("sqrt", {as_floating(c, total)}), x->dtype());
}

void reduce_log_sum(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* total = sum_over(c, as_floating(c, x), reduce_form(node, c));
  define_as(node, c, c.emit("log", {total}), x->dtype());
}

// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the max over
// the axes, so that large x does not overflow; an infinite max (all -inf,
// or +inf) shifts by 0 instead, giving what the plain formula gives. Over
// every axis m is 0-D (a scalar broadcast, cheapest for the fusion pass),
// and the result gets its kept axes back at the end.
void reduce_log_sum_exp(const Node& node, ImportContext& c) {
  Value* input = c.input(node, 0);
  ReduceForm form = reduce_form(node, c);
  if (form.noop) return define(node, c, input);
  Value* x = as_floating(c, input);
  int64_t rank = rank_of(x);
  IntList axes = form.axes.empty() ? all_axes(rank) : form.axes;
  for (int64_t& axis : axes)
    axis = wrap(axis, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  bool everything = int64_t(axes.size()) == rank;
  Attrs reduce = {{"dims", axes}, {"keepdim", !everything}};
  Value* max = c.emit("amax", {x}, reduce);
  max = c.emit("where", {c.emit("isfinite", {max}), max, scalar(c, 0.0, x->dtype())});
  Value* shifted = c.emit("exp", {c.emit("sub", {x, max})});
  Value* result = c.emit("add", {c.emit("log", {c.emit("sum", {shifted}, reduce)}), max});
  if (everything && form.keepdim && rank > 0)
    result = c.emit("reshape", {result}, {{"shape", DimList(size_t(rank), Dim(1))}});
  if (!everything && !form.keepdim) result = c.emit("squeeze", {result}, {{"dims", axes}});
  define_as(node, c, result, input->dtype());
}

}  // namespace

void add_loss_importers(Table& table) {
  table["NegativeLogLikelihoodLoss"] = negative_log_likelihood_loss;
  table["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy_loss;
  table["ReduceL1"] = reduce_l1;
  table["ReduceL2"] = reduce_l2;
  table["ReduceSumSquare"] = reduce_sum_square;
  table["ReduceLogSum"] = reduce_log_sum;
  table["ReduceLogSumExp"] = reduce_log_sum_exp;
}

}  // namespace kiln::onnx
