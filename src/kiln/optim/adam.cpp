#include "kiln/optim/adam.h"

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"

namespace kiln {

Hyperparams AdamOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(single_group(std::move(params)), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam("Adam", false, std::move(groups), defaults) {}

Adam::Adam(std::string name, bool decoupled_weight_decay, std::vector<ParamGroup> groups,
           AdamOptions defaults)
    : Optimizer(std::move(name), defaults.to_hyperparams(),
                {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}),
      decoupled_weight_decay_(decoupled_weight_decay) {
  add_initial_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : AdamW(single_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam("AdamW", true, std::move(groups), defaults) {}

void Adam::check_options(const Hyperparams& options) const {
  double lr = get(options, "lr"), eps = get(options, "eps");
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2");
  double weight_decay = get(options, "weight_decay");
  KILN_CHECK_VALUE(lr >= 0, name(), ": invalid learning rate: ", lr);
  KILN_CHECK_VALUE(eps >= 0, name(), ": invalid epsilon value: ", eps);
  KILN_CHECK_VALUE(beta1 >= 0 && beta1 < 1, name(), ": invalid beta parameter at index 0: ", beta1);
  KILN_CHECK_VALUE(beta2 >= 0 && beta2 < 1, name(), ": invalid beta parameter at index 1: ", beta2);
  KILN_CHECK_VALUE(weight_decay >= 0, name(), ": invalid weight_decay value: ", weight_decay);
}

namespace {

// from += weight * (to - from), rounded as torch's lerp kernel does: from the
// nearer end, so weight 1 lands exactly on `to`.
void lerp_(const Tensor& from, const Tensor& to, double weight) {
  Tensor step = sub(to, from);
  if (weight < 0.5) {
    mul_(step, weight);
    add_(from, step);
    return;
  }
  mul_(step, 1 - weight);  // from = to - (to - from) * (1 - weight)
  copy_(from, sub(to, step));
}

const Tensor& zeros_buffer(ParamState& state, const std::string& name, const Tensor& like) {
  auto found = state.buffers.find(name);
  if (found != state.buffers.end()) return found->second;
  return state.buffers[name] = zeros_like(like);
}

}  // namespace

void Adam::prepare_capture(const Tensor& param, ParamState& state, const Hyperparams& options) {
  zeros_buffer(state, "exp_avg", param);
  zeros_buffer(state, "exp_avg_sq", param);
  if (get(options, "amsgrad") != 0) zeros_buffer(state, "max_exp_avg_sq", param);
}

namespace {

// 1 - beta^step for a step count held in a float64 0-d tensor.
Tensor bias_correction(double beta, const Tensor& step) {
  return add(neg(exp(mul(step, std::log(beta)))), 1.0);
}

}  // namespace

void Adam::update(const Tensor& param, const Tensor& grad, ParamState& state,
                  const Hyperparams& options) {
  double lr = get(options, "lr"), eps = get(options, "eps");
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2");
  double weight_decay = get(options, "weight_decay");
  bool amsgrad = get(options, "amsgrad") != 0;
  int64_t step = ++state.step;

  const Tensor& lr_tensor = capture_lr();
  Tensor g = grad;
  if (weight_decay != 0) {
    if (decoupled_weight_decay_ && lr_tensor.defined()) {
      mul_(param, add(mul(lr_tensor, -weight_decay), 1.0));
    } else if (decoupled_weight_decay_) {
      mul_(param, 1 - lr * weight_decay);
    } else {
      g = add(grad, mul(param, weight_decay));
    }
  }
  const Tensor& exp_avg = zeros_buffer(state, "exp_avg", param);
  const Tensor& exp_avg_sq = zeros_buffer(state, "exp_avg_sq", param);
  lerp_(exp_avg, g, 1 - beta1);
  mul_(exp_avg_sq, beta2);
  Tensor square = mul(g, 1 - beta2);  // (value * g) * g, addcmul's order
  mul_(square, g);
  add_(exp_avg_sq, square);
  square = Tensor();

  // The scalars in double, as Python computes them.
  double bias_correction1 = 1 - std::pow(beta1, double(step));
  double bias_correction2 = 1 - std::pow(beta2, double(step));
  double step_size = lr / bias_correction1;
  double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);

  const Tensor* second_moment = &exp_avg_sq;
  if (amsgrad) {
    const Tensor& max_exp_avg_sq = zeros_buffer(state, "max_exp_avg_sq", param);
    copy_(max_exp_avg_sq, maximum(max_exp_avg_sq, exp_avg_sq));
    second_moment = &max_exp_avg_sq;
  }
  Tensor denom = sqrt(*second_moment);
  Tensor update;
  if (lr_tensor.defined()) {  // compiling a step: the step count and lr are tensors
    div_(denom, sqrt(bias_correction(beta2, state.step_tensor)));
    add_(denom, eps);
    update = mul(exp_avg, neg(div(lr_tensor, bias_correction(beta1, state.step_tensor))));
  } else {
    div_(denom, bias_correction2_sqrt);
    add_(denom, eps);
    update = mul(exp_avg, -step_size);  // addcdiv: (value * m) / denom
  }
  div_(update, denom);
  add_(param, update);
}

}  // namespace kiln
