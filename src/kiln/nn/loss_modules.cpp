#include "kiln/nn/loss.h"
#include "kiln/nn/loss_util.h"

namespace kiln::nn {

namespace F = functional;

// PyTorch checks the reduction when the loss runs; checking it in the
// constructors as well reports a typo where the module is built.
using detail::check_reduction;

CrossEntropyLoss::CrossEntropyLoss(F::CrossEntropyLossOptions options)
    : Module("CrossEntropyLoss"), options(std::move(options)) {
  check_reduction(this->options.reduction, "CrossEntropyLoss");
  register_buffer("weight", this->options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return F::cross_entropy(input, target, options);
}

NLLLoss::NLLLoss(F::NLLLossOptions options) : Module("NLLLoss"), options(std::move(options)) {
  check_reduction(this->options.reduction, "NLLLoss");
  register_buffer("weight", this->options.weight);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return F::nll_loss(input, target, options);
}

MSELoss::MSELoss(std::string reduction) : Module("MSELoss"), reduction(std::move(reduction)) {
  check_reduction(this->reduction, "MSELoss");
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return F::mse_loss(input, target, reduction);
}

L1Loss::L1Loss(std::string reduction) : Module("L1Loss"), reduction(std::move(reduction)) {
  check_reduction(this->reduction, "L1Loss");
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return F::l1_loss(input, target, reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(F::BCEWithLogitsLossOptions options)
    : Module("BCEWithLogitsLoss"), options(std::move(options)) {
  check_reduction(this->options.reduction, "BCEWithLogitsLoss");
  register_buffer("weight", this->options.weight);
  register_buffer("pos_weight", this->options.pos_weight);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return F::binary_cross_entropy_with_logits(input, target, options);
}

}  // namespace kiln::nn
