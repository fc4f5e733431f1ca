#include "kiln/optim/adam.h"

#include "kiln/optim/functional_math.h"
#include "kiln/optim/kinds.h"

namespace kiln {

using namespace optim_math;

Hyperparams AdamOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(single_group(std::move(params)), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam(adam_kind(), std::move(groups), defaults) {}

Adam::Adam(const OptimizerKind& kind, std::vector<ParamGroup> groups, AdamOptions defaults)
    : Optimizer(kind, std::move(groups), defaults.to_hyperparams()) {}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : AdamW(single_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam(adamw_kind(), std::move(groups), defaults) {}

namespace {

void init_adam(const Tensor& param, TensorMap& state, const Hyperparams& options, bool) {
  scalar_entry(state, "step", 0);
  zeros_entry(state, "exp_avg", param);
  zeros_entry(state, "exp_avg_sq", param);
  if (flag(options, "amsgrad")) zeros_entry(state, "max_exp_avg_sq", param);
}

void update_adam(const Tensor& param, const Tensor& grad, TensorMap& state,
                 const Hyperparams& options, const LearningRate& lr) {
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2");
  double eps = get(options, "eps"), weight_decay = get(options, "weight_decay");
  bool decoupled = flag(options, "decoupled_weight_decay");
  const Tensor& step = advance_step(state);
  with_numbers("Adam", lr, step, [&](const auto& rate, const auto& t) {
    if (decoupled && weight_decay != 0) mul_(param, 1 - rate * weight_decay);
    Tensor g = direction(param, grad, flag(options, "maximize"), decoupled ? 0 : weight_decay);
    const Tensor& exp_avg = state.at("exp_avg");
    const Tensor& exp_avg_sq = state.at("exp_avg_sq");
    lerp_(exp_avg, g, 1 - beta1);
    mul_(exp_avg_sq, beta2);
    addcmul_(exp_avg_sq, g, g, 1 - beta2);

    auto bias_correction1 = 1 - power(beta1, t);
    auto bias_correction2 = 1 - power(beta2, t);
    auto step_size = rate / bias_correction1;
    auto bias_correction2_sqrt = half_power(bias_correction2);

    const Tensor* second_moment = &exp_avg_sq;
    if (flag(options, "amsgrad")) {
      const Tensor& max_exp_avg_sq = state.at("max_exp_avg_sq");
      copy_(max_exp_avg_sq, maximum(max_exp_avg_sq, exp_avg_sq));
      second_moment = &max_exp_avg_sq;
    }
    Tensor denom = sqrt(*second_moment);
    div_(denom, bias_correction2_sqrt);
    add_(denom, eps);
    addcdiv_(param, exp_avg, denom, -step_size);
  });
}

void check_adam(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
}

Hyperparams adam_defaults(bool decoupled) {
  Hyperparams defaults = (decoupled ? AdamW::default_options() : AdamOptions{}).to_hyperparams();
  defaults["decoupled_weight_decay"] = decoupled ? 1 : 0;
  return defaults;
}

}  // namespace

const OptimizerKind& adam_kind() {
  static const OptimizerKind kind{
      "Adam",     adam_defaults(false), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
      {"step"},   check_adam,           init_adam,
      update_adam};
  return kind;
}

const OptimizerKind& adamw_kind() {
  static const OptimizerKind kind{
      "AdamW",    adam_defaults(true), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
      {"step"},   check_adam,          init_adam,
      update_adam};
  return kind;
}

}  // namespace kiln
