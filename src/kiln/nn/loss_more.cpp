// The losses of loss_more.h, composed from ops so they differentiate and
// trace. PyTorch's definitions (aten/src/ATen/native/Loss.cpp,
// LossMultiMargin.cpp, Distance.cpp and torch/nn/functional.py) are the
// reference, in their order of operations where that decides the rounding.
#include "kiln/nn/loss_more.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/trace_hook.h"
#include "kiln/nn/layers_more.h"
#include "kiln/nn/loss_util.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/norms.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

namespace {

using detail::check_reduction;
using detail::reduce;

}  // namespace

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const int64_t dims = std::max(x1.dim(), x2.dim());
  // A 0-d pair is its own last dim (PyTorch's norm over dim 0 of a scalar).
  return vector_norm(x1 - x2 + eps, p, {dims == 0 ? 0 : dims - 1}, keepdim);
}

// PyTorch: torch/nn/functional.py (multilabel_soft_margin_loss).
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   const std::string& reduction) {
  check_reduction(reduction, "multilabel_soft_margin_loss");
  KILN_CHECK(input.dim() >= 1,
             "multilabel_soft_margin_loss: expected an input of 1 or more dims, "
             "got shape ",
             input.shape());
  Tensor loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input));
  if (weight.defined()) loss = loss * weight;
  const int64_t class_dim = input.dim() - 1;
  loss = sum(loss, {class_dim}) / double(input.size(class_dim));
  return reduce(loss, reduction);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, const std::string& reduction) {
  check_reduction(reduction, "margin_ranking_loss");
  KILN_CHECK(input1.dim() == input2.dim() && input1.dim() == target.dim(),
             "margin_ranking_loss : All input tensors should have same dimension but got sizes: "
             "input1: ",
             input1.shape(), ", input2: ", input2.shape(), ", target: ", target.shape());
  return reduce(clamp(-target * (input1 - input2) + margin, 0.0, std::nullopt), reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap,
                           const std::string& reduction) {
  check_reduction(reduction, "triplet_margin_loss");
  KILN_CHECK(anchor.dim() == positive.dim() && positive.dim() == negative.dim(),
             "triplet_margin_loss: The anchor, positive, and negative tensors are expected to have "
             "the same number of dimensions, but got: anchor ",
             anchor.dim(), "D, positive ", positive.dim(), "D, and negative ", negative.dim(),
             "D inputs");
  Tensor to_positive = pairwise_distance(anchor, positive, p, eps);
  Tensor to_negative = pairwise_distance(anchor, negative, p, eps);
  if (swap) to_negative = minimum(to_negative, pairwise_distance(positive, negative, p, eps));
  return reduce(clamp(to_positive - to_negative + margin, 0.0, std::nullopt), reduction);
}

namespace {

// var as gaussian_nll_loss broadcasts it against input, or a ValueError.
Tensor gaussian_variance(const Tensor& input, const Tensor& var) {
  if (var.shape() == input.shape()) return var;
  const IntList& x = input.shape();
  const IntList& v = var.shape();
  if (!x.empty() && IntList(x.begin(), x.end() - 1) == v) return unsqueeze(var, -1);
  // One dim of var differs from input's and has size 1 (PyTorch sums the
  // differing sizes of var and asks for 1).
  int64_t differing = 0;
  for (size_t i = 0; i < x.size() && x.size() == v.size(); ++i) {
    if (x[i] != v[i]) differing += v[i];
  }
  KILN_CHECK_VALUE(x.size() == v.size() && differing == 1,
                   "gaussian_nll_loss: var is of incorrect size: ", v, " for an input of shape ",
                   x);
  return var;
}

}  // namespace

// PyTorch: torch/nn/functional.py (gaussian_nll_loss).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full,
                         double eps, const std::string& reduction) {
  // A value check, made in eager calls only (in a trace it would read a
  // value the graph must keep as an input).
  if (trace_hook() == nullptr) {
    const bool negative = sum(to(lt(var, 0.0), DType::Int64)).item<int64_t>() > 0;
    KILN_CHECK_VALUE(!negative, "gaussian_nll_loss: var has negative entry/entries");
  }
  Tensor v = gaussian_variance(input, var);
  KILN_CHECK_VALUE(reduction == "mean" || reduction == "sum" || reduction == "none",
                   "gaussian_nll_loss: ", reduction, " is not valid");
  // max(var, eps) in value, the identity in gradient: PyTorch clamps in
  // place under no_grad. v - detach(v) is exactly 0 and carries v's gradient.
  Tensor frozen = detach(v);
  Tensor clamped = clamp(frozen, eps, std::nullopt) + (v - frozen);
  Tensor diff = input - target;
  Tensor loss = (log(clamped) + diff * diff / clamped) * 0.5;
  if (full) loss = loss + 0.5 * std::log(2.0 * std::numbers::pi);
  return reduce(loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, double var, bool full,
                         double eps, const std::string& reduction) {
  KILN_CHECK_VALUE(var >= 0.0, "gaussian_nll_loss: var has negative entry/entries");
  return gaussian_nll_loss(input, target, full_like(input, var), full, eps, reduction);
}

// PyTorch: aten/src/ATen/native/Loss.cpp (poisson_nll_loss).
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, const std::string& reduction) {
  check_reduction(reduction, "poisson_nll_loss");
  Tensor loss = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    Tensor stirling = target * log(target) - target + 0.5 * log(2.0 * std::numbers::pi * target);
    loss = loss + where(le(target, 1.0), 0.0, stirling);
  }
  return reduce(loss, reduction);
}

// log1p(exp(-y x)): softplus with no threshold.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "soft_margin_loss");
  Tensor z = -input * target;
  return reduce(softplus(z, 1.0, std::numeric_limits<double>::max()), reduction);
}

// PyTorch: aten/src/ATen/native/Loss.cpp (hinge_embedding_loss).
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                            const std::string& reduction) {
  check_reduction(reduction, "hinge_embedding_loss");
  Tensor margin_clamp = clamp(margin - input, 0.0, std::nullopt);
  Tensor output_margin = where(ne(target, 1), margin_clamp, 0.0);
  Tensor output_self = where(ne(target, -1), input, 0.0);
  return reduce(output_margin + output_self, reduction);
}

// PyTorch: aten/src/ATen/native/LossMultiMargin.cpp.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin,
                         const Tensor& weight, const std::string& reduction) {
  check_reduction(reduction, "multi_margin_loss");
  KILN_CHECK_VALUE(p == 1 || p == 2, "multi_margin_loss: only p == 1 and p == 2 supported");
  const int64_t ndim = input.dim();
  KILN_CHECK((ndim == 2 && input.size(1) != 0) || (ndim == 1 && input.size(0) != 0) || ndim == 0,
             "multi_margin_loss: Expected non-empty vector or matrix with optional 0-dim batch "
             "size, but got: ",
             input.shape());
  const int64_t samples = ndim <= 1 ? 1 : input.size(0);
  const int64_t classes = ndim == 0 ? 1 : input.size(ndim - 1);
  KILN_CHECK(
      target.dim() <= 1 && target.numel() == samples,
      "multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
      "samples (batch size). Expected target size [",
      samples, "], but got ", target.shape(), ". Input has shape ", input.shape(), ".");
  KILN_CHECK_TYPE(target.dtype() == DType::Int64,
                  "multi_margin_loss: expected a target of dtype int64 (class indices), got ",
                  target.dtype());
  if (weight.defined()) {
    KILN_CHECK_VALUE(weight.dim() == 1, "multi_margin_loss: weight must be one-dimensional");
    KILN_CHECK(weight.numel() == classes, "multi_margin_loss: inconsistent weight size, expected ",
               classes, " but got ", weight.shape());
  }
  Tensor scores = reshape(input, {samples, classes});
  Tensor labels = reshape(target, {samples, 1});
  Tensor z = (margin - gather(scores, 1, labels)) + scores;  // PyTorch's order
  Tensor h = clamp(z, 0.0, std::nullopt);
  if (p == 2) h = h * h;
  if (weight.defined()) h = h * unsqueeze(index_select(weight, 0, flatten(labels)), 1);
  Tensor is_label = eq(unsqueeze(arange(classes), 0), labels);
  Tensor loss = sum(where(is_label, 0.0, h), {1}) / double(classes);
  if (reduction != "none") return reduce(loss, reduction);
  return target.dim() == 0 ? reshape(loss, IntList{}) : loss;
}

}  // namespace kiln::nn::functional
