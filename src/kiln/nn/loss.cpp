// The losses of functional.h, composed from ops. PyTorch's reference for each
// is named next to it; where it normalizes in an unexpected way (nll_loss's
// mean divides by the summed class weights, not by N) the code says so.
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/loss_util.h"
#include "kiln/ops/copy.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::nn::functional {

namespace {

using detail::check_reduction;
using detail::reduce;

// input [N, C, d...] -> the shape a class-index target must have: [N, d...].
IntList target_shape_for(const Tensor& input) {
  IntList shape = input.shape();
  shape.erase(shape.begin() + 1);
  return shape;
}

void check_class_weight(const Tensor& weight, int64_t classes, const char* fn) {
  if (!weight.defined()) return;
  KILN_CHECK_VALUE(weight.dim() == 1 && weight.numel() == classes, fn,
                   ": weight tensor should be defined either for all ", classes,
                   " classes or no classes but got weight tensor of shape: ", weight.shape());
}

// weight [C] viewed as [1, C, 1, ...] so it broadcasts against input.
Tensor class_weight_view(const Tensor& weight, const Tensor& input) {
  IntList shape(size_t(input.dim()), 1);
  shape[1] = weight.numel();
  return reshape(weight, shape);
}

// Each target's class weight ([N, d...]), 0 where the target is ignored.
// Ignored targets index class 0 (always valid) and are masked out after.
// Sizes come from the target through ops and sym_shape, never read off it
// as numbers, so a graph traced with a dynamic batch stays general.
Tensor target_weights(const Tensor& weight, const Tensor& safe_target, const Tensor& ignored,
                      DType dtype) {
  if (!weight.defined()) return to(logical_not(ignored), dtype);
  Tensor w = reshape(index_select(weight, 0, flatten(safe_target)), sym_shape(safe_target));
  return where(ignored, Scalar(0.0), w);
}

// Runs a loss over a single unbatched sample ([C] input) as a batch of one.
template <typename Fn>
Tensor as_batch_of_one(const Tensor& input, const Tensor& target, int64_t target_dims,
                       const std::string& reduction, const char* fn, Fn loss) {
  KILN_CHECK_VALUE(target.dim() == target_dims, fn, ": expected a ", target_dims,
                   "-d target for a 1-d input, got shape ", target.shape());
  Tensor out = loss(unsqueeze(input, 0), unsqueeze(target, 0));
  return reduction == "none" ? squeeze(out, 0) : out;
}

}  // namespace

// PyTorch: aten/src/ATen/native/LossNLL.cpp (nll_loss_nd).
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options) {
  check_reduction(options.reduction, "nll_loss");
  KILN_CHECK_TYPE(target.dtype() == DType::Int64,
                  "nll_loss: expected a target of dtype int64 (class indices), got ",
                  target.dtype());
  if (input.dim() == 1) {
    return as_batch_of_one(
        input, target, 0, options.reduction, "nll_loss",
        [&](const Tensor& x, const Tensor& t) { return nll_loss(x, t, options); });
  }
  KILN_CHECK_VALUE(input.dim() >= 2, "nll_loss: expected an input of 1 or more dims, got shape ",
                   input.shape());
  KILN_CHECK_VALUE(target.shape() == target_shape_for(input),
                   "nll_loss: expected a target of shape ", target_shape_for(input),
                   " for an input of shape ", input.shape(), ", got ", target.shape());
  check_class_weight(options.weight, input.size(1), "nll_loss");

  Tensor ignored = eq(target, options.ignore_index);
  Tensor safe_target = where(ignored, Scalar(int64_t(0)), target);
  Tensor picked = squeeze(gather(input, 1, unsqueeze(safe_target, 1)), 1);
  Tensor weights = target_weights(options.weight, safe_target, ignored, input.dtype());
  // where (not a multiply by 0) so an ignored -inf log-probability gives 0, not NaN.
  Tensor loss = where(ignored, Scalar(0.0), options.weight.defined() ? -picked * weights : -picked);
  if (options.reduction == "none") return loss;
  if (options.reduction == "sum") return sum(loss);
  // The weighted mean: divided by the total weight of the counted targets
  // (all ignored gives 0 / 0 = NaN, as in PyTorch).
  return sum(loss) / sum(weights);
}

// PyTorch: aten/src/ATen/native/LossNLL.cpp (cross_entropy_loss and its
// label-smoothing and probability-target variants).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyLossOptions& options) {
  profiler::Range range(profiler::EventKind::Op, "cross_entropy");  // a composite: its ops nest
  check_reduction(options.reduction, "cross_entropy");
  double smoothing = options.label_smoothing;
  KILN_CHECK_VALUE(smoothing >= 0.0 && smoothing <= 1.0,
                   "cross_entropy: label_smoothing must be between 0.0 and 1.0, got ", smoothing);
  bool probability_target = is_floating(target.dtype());
  if (input.dim() == 1) {
    return as_batch_of_one(
        input, target, probability_target ? 1 : 0, options.reduction, "cross_entropy",
        [&](const Tensor& x, const Tensor& t) { return cross_entropy(x, t, options); });
  }
  KILN_CHECK_VALUE(input.dim() >= 2,
                   "cross_entropy: expected an input of 1 or more dims, got shape ", input.shape());
  // A number (smoothing divides by it): specialized, and reported, when the
  // class dim is a symbol of a trace.
  const int64_t classes = size_as_int(sym_size(input, 1), "cross_entropy's class count");
  check_class_weight(options.weight, classes, "cross_entropy");
  Tensor log_probs = log_softmax(input, 1);

  if (probability_target) {
    KILN_CHECK_VALUE(target.shape() == input.shape(),
                     "cross_entropy: a probability target must have the input's shape ",
                     input.shape(), ", got ", target.shape());
    KILN_CHECK_VALUE(options.ignore_index < 0,
                     "cross_entropy: ignore_index is not supported for floating point target");
    Tensor probs =
        smoothing > 0.0 ? target * (1.0 - smoothing) + smoothing / double(classes) : target;
    Tensor terms = log_probs * probs;
    if (options.weight.defined()) terms = terms * class_weight_view(options.weight, input);
    Tensor loss = -sum(terms, {1});
    if (options.reduction == "none") return loss;
    if (options.reduction == "sum") return sum(loss);
    // Mean over the batch (and spatial) positions: numel / C of them.
    return mean(loss);
  }

  Tensor nll =
      nll_loss(log_probs, target, {options.weight, options.ignore_index, options.reduction});
  if (smoothing == 0.0) return nll;
  // Label smoothing mixes in the loss against the uniform distribution:
  // (1 - eps) * nll + eps / C * (-sum_c w_c log p_c), ignored targets excluded.
  Tensor terms = log_probs;
  if (options.weight.defined()) terms = terms * class_weight_view(options.weight, input);
  Tensor ignored = eq(target, options.ignore_index);
  Tensor smooth = where(ignored, Scalar(0.0), -sum(terms, {1}));
  if (options.reduction == "sum") {
    smooth = sum(smooth);
  } else if (options.reduction == "mean") {
    Tensor safe_target = where(ignored, Scalar(int64_t(0)), target);
    smooth = sum(smooth) / sum(target_weights(options.weight, safe_target, ignored, input.dtype()));
  }
  return nll * (1.0 - smoothing) + smooth * (smoothing / double(classes));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  Tensor diff = input - target;
  return reduce(diff * diff, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "l1_loss");
  return reduce(abs(input - target), reduction);
}

// PyTorch: aten/src/ATen/native/Loss.cpp (binary_cross_entropy_with_logits).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& options) {
  check_reduction(options.reduction, "binary_cross_entropy_with_logits");
  KILN_CHECK_VALUE(target.shape() == input.shape(),
                   "binary_cross_entropy_with_logits: target size (", target.shape(),
                   ") must be the same as input size (", input.shape(), ")");
  // log(sigmoid(x)) = -softplus(-x): no exp overflow for large |x|.
  Tensor log_sigmoid = -softplus(-input);
  if (options.pos_weight.defined()) {
    log_sigmoid = log_sigmoid * ((options.pos_weight - 1.0) * target + 1.0);
  }
  Tensor loss = (1.0 - target) * input - log_sigmoid;
  if (options.weight.defined()) loss = loss * options.weight;
  return reduce(loss, options.reduction);
}

}  // namespace kiln::nn::functional
