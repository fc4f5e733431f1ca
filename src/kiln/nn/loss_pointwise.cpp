// The pointwise and similarity losses of functional.h (binary cross entropy,
// smooth L1, Huber, KL divergence, cosine embedding) and the similarity
// functions they use, composed from ops so they differentiate and trace.
// PyTorch's definitions (aten/src/ATen/native/Loss.cpp, Distance.cpp) are the
// reference; where one clamps or masks to stay finite, so does this.
#include "kiln/autograd/autograd.h"
#include "kiln/core/sym_shape.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/loss_util.h"
#include "kiln/ops/norms.h"

namespace kiln::nn::functional {

namespace {

using detail::check_reduction;
using detail::reduce;

void check_same_shape(const Tensor& input, const Tensor& target, const char* fn) {
  KILN_CHECK_VALUE(input.shape() == target.shape(), fn, ": target size (", target.shape(),
                   ") must be the same as input size (", input.shape(), ")");
}

// PyTorch's binary_cross_entropy expands weight to the input's shape: it may
// broadcast to it, never widen it.
void check_weight_broadcasts(const Tensor& weight, const Tensor& input, const char* fn) {
  const auto& w = weight.shape();
  const auto& x = input.shape();
  bool fits = w.size() <= x.size();
  for (size_t i = 1; fits && i <= w.size(); ++i) {
    fits = w[w.size() - i] == 1 || w[w.size() - i] == x[x.size() - i];
  }
  KILN_CHECK(fits, fn, ": weight of shape ", w, " cannot be broadcast to the input's shape ", x);
}

}  // namespace

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  check_reduction(reduction, "binary_cross_entropy");
  check_same_shape(input, target, "binary_cross_entropy");
  if (weight.defined()) check_weight_broadcasts(weight, input, "binary_cross_entropy");
  Tensor log_p = clamp(log(input), -100.0, std::nullopt);
  Tensor log_not_p = clamp(log(1.0 - input), -100.0, std::nullopt);
  Tensor loss = -(target * log_p + (1.0 - target) * log_not_p);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  check_reduction(reduction, "smooth_l1_loss");
  KILN_CHECK(beta >= 0.0, "smooth_l1_loss: does not support negative values for beta, got ", beta);
  Tensor diff = abs(input - target);
  if (beta == 0.0) return reduce(diff, reduction);
  Tensor loss = where(lt(diff, beta), diff * diff * (0.5 / beta), diff - 0.5 * beta);
  return reduce(loss, reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta, const Tensor& weight) {
  check_reduction(reduction, "huber_loss");
  KILN_CHECK(delta > 0.0, "huber_loss: does not support non-positive values for delta, got ",
             delta);
  KILN_CHECK_VALUE(!weight.defined() || weight.shape() == input.shape(),
                   "huber_loss: weights and input must have the same size, got weight of shape ",
                   weight.defined() ? weight.shape() : IntList{}, " and input of shape ",
                   input.shape());
  Tensor diff = abs(input - target);
  Tensor loss = where(lt(diff, delta), diff * diff * 0.5, (diff - 0.5 * delta) * delta);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  check_reduction(reduction, "kl_div", true);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy: a target of 0 contributes 0 (not 0 * -inf), its gradient too.
    Tensor positive = gt(target, 0.0);
    Tensor safe_target = where(positive, target, 1.0);
    loss = where(positive, target * (log(safe_target) - input), 0.0);
  }
  if (reduction != "batchmean") return reduce(loss, reduction);
  if (input.dim() == 0) return sum(loss);
  return sum(loss) / double(size_as_int(sym_size(input, 0), "kl_div's batch size"));
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, const std::string& reduction) {
  check_reduction(reduction, "cosine_embedding_loss");
  // RuntimeErrors, as PyTorch's checks of these shapes raise.
  KILN_CHECK(input1.shape() == input2.shape(),
             "cosine_embedding_loss: input1 and input2 must have the same shape, got ",
             input1.shape(), " and ", input2.shape());
  KILN_CHECK(input1.dim() == 1 || input1.dim() == 2,
             "cosine_embedding_loss: expected 1-D or 2-D inputs, got shape ", input1.shape());
  KILN_CHECK(target.dim() == input1.dim() - 1, "cosine_embedding_loss: expected a ",
             input1.dim() - 1, "-D target for inputs of shape ", input1.shape(), ", got shape ",
             target.shape());
  // PyTorch adds 1e-12 under the square roots rather than clamping the norms.
  int64_t dim = input1.dim() - 1;
  constexpr double kEpsilon = 1e-12;
  Tensor dot = sum(input1 * input2, {dim});
  Tensor squared1 = sum(input1 * input1, {dim}) + kEpsilon;
  Tensor squared2 = sum(input2 * input2, {dim}) + kEpsilon;
  Tensor cos = dot / sqrt(squared1 * squared2);
  Tensor positive = where(eq(target, 1), 1.0 - cos, 0.0);
  Tensor negative = where(eq(target, -1), clamp(cos - margin, 0.0, std::nullopt), 0.0);
  return reduce(positive + negative, reduction);
}

// PyTorch clamps the norms to eps in place under no_grad: in value only, so
// a norm below eps still passes its gradient (0 for a zero vector).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  auto clamped_norm = [&](const Tensor& x) {
    Tensor norm = vector_norm(x, 2.0, {dim}, true);
    Tensor frozen = detach(norm);
    return clamp(frozen, eps, std::nullopt) + (norm - frozen);
  };
  return sum((x1 / clamped_norm(x1)) * (x2 / clamped_norm(x2)), {dim});
}

// PyTorch: input / max(norm(input, p, dim), eps), any p (inf included).
Tensor normalize(const Tensor& input, double p, int64_t dim, double eps) {
  return input / clamp(vector_norm(input, p, {dim}, true), eps, std::nullopt);
}

}  // namespace kiln::nn::functional
