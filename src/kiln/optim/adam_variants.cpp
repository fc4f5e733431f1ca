#include "kiln/optim/adam_variants.h"

#include "kiln/optim/functional_math.h"
#include "kiln/optim/kinds.h"

namespace kiln {

using namespace optim_math;

namespace {

// g with weight decay: coupled (joins g) or decoupled (shrinks p by lr * weight_decay).
template <typename Number>
Tensor decayed(const Tensor& param, const Tensor& grad, const Hyperparams& options,
               const Number& rate) {
  double weight_decay = get(options, "weight_decay");
  bool decoupled =
      options.count("decoupled_weight_decay") && flag(options, "decoupled_weight_decay");
  if (decoupled && weight_decay != 0) mul_(param, 1 - rate * weight_decay);
  return direction(param, grad, flag(options, "maximize"), decoupled ? 0 : weight_decay);
}

void init_moments(const Tensor& param, TensorMap& state, const Hyperparams&, bool) {
  scalar_entry(state, "step", 0);
  zeros_entry(state, "exp_avg", param);
  zeros_entry(state, "exp_avg_sq", param);
}

// ---------------------------------------------------------------- Adamax

void init_adamax(const Tensor& param, TensorMap& state, const Hyperparams&, bool) {
  scalar_entry(state, "step", 0);
  zeros_entry(state, "exp_avg", param);
  zeros_entry(state, "exp_inf", param);
}

void update_adamax(const Tensor& param, const Tensor& grad, TensorMap& state,
                   const Hyperparams& options, const LearningRate& lr) {
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2"), eps = get(options, "eps");
  const Tensor& step = advance_step(state);
  with_numbers("Adamax", lr, step, [&](const auto& rate, const auto& t) {
    Tensor g = decayed(param, grad, options, rate);
    const Tensor& exp_avg = state.at("exp_avg");
    const Tensor& exp_inf = state.at("exp_inf");
    lerp_(exp_avg, g, 1 - beta1);
    mul_(exp_inf, beta2);
    Tensor bound = abs(g);
    add_(bound, eps);
    copy_(exp_inf, maximum(exp_inf, bound));
    auto clr = rate / (1 - power(beta1, t));
    addcdiv_(param, exp_avg, exp_inf, -clr);
  });
}

// ---------------------------------------------------------------- NAdam

void check_nadam(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
  double momentum_decay = get(options, "momentum_decay");
  KILN_CHECK_VALUE(momentum_decay >= 0, name, ": invalid momentum_decay value: ", momentum_decay);
}

void init_nadam(const Tensor& param, TensorMap& state, const Hyperparams& options, bool compiling) {
  init_moments(param, state, options, compiling);
  scalar_entry(state, "mu_product", 1);
}

void update_nadam(const Tensor& param, const Tensor& grad, TensorMap& state,
                  const Hyperparams& options, const LearningRate& lr) {
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2"), eps = get(options, "eps");
  double momentum_decay = get(options, "momentum_decay");
  const Tensor& step = advance_step(state);
  with_numbers("NAdam", lr, step, [&](const auto& rate, const auto& t) {
    auto bias_correction2 = 1 - power(beta2, t);
    Tensor g = decayed(param, grad, options, rate);
    auto mu = beta1 * (1.0 - 0.5 * power(0.96, t * momentum_decay));
    auto mu_next = beta1 * (1.0 - 0.5 * power(0.96, (t + 1) * momentum_decay));
    const Tensor& mu_product = state.at("mu_product");
    mul_(mu_product, cast_like(mu, mu_product));  // float32, as torch's state
    const Tensor& exp_avg = state.at("exp_avg");
    const Tensor& exp_avg_sq = state.at("exp_avg_sq");
    lerp_(exp_avg, g, 1 - beta1);
    mul_(exp_avg_sq, beta2);
    addcmul_(exp_avg_sq, g, g, 1 - beta2);
    Tensor denom = sqrt(div(exp_avg_sq, bias_correction2));
    auto product = value_of(mu_product, t);
    auto product_next = product * mu_next;
    add_(denom, eps);
    addcdiv_(param, g, denom, -rate * (1.0 - mu) / (1.0 - product));
    addcdiv_(param, exp_avg, denom, -rate * mu_next / (1.0 - product_next));
  });
}

// ---------------------------------------------------------------- RAdam

void update_radam(const Tensor& param, const Tensor& grad, TensorMap& state,
                  const Hyperparams& options, const LearningRate& lr) {
  double beta1 = get(options, "beta1"), beta2 = get(options, "beta2"), eps = get(options, "eps");
  const Tensor& step = advance_step(state);
  with_numbers("RAdam", lr, step, [&](const auto& rate, const auto& t) {
    Tensor g = decayed(param, grad, options, rate);
    const Tensor& exp_avg = state.at("exp_avg");
    const Tensor& exp_avg_sq = state.at("exp_avg_sq");
    lerp_(exp_avg, g, 1 - beta1);
    mul_(exp_avg_sq, beta2);
    addcmul_(exp_avg_sq, g, g, 1 - beta2);
    auto bias_correction1 = 1 - power(beta1, t);
    auto bias_correction2 = 1 - power(beta2, t);
    Tensor corrected = div(exp_avg, bias_correction1);
    // The length of the approximated simple moving average, and where the
    // variance of the adaptive learning rate is tractable (rho_t > 5).
    double rho_inf = 2 / (1 - beta2) - 1;
    auto rho_t = rho_inf - 2 * t * power(beta2, t) / bias_correction2;
    Tensor update = choose(
        rho_t > 5.0,
        [&] {
          auto rect = half_power((rho_t - 4) * (rho_t - 2) * rho_inf /
                                 ((rho_inf - 4) * (rho_inf - 2) * rho_t));
          Tensor root = sqrt(exp_avg_sq);
          add_(root, eps);
          // Python's number / tensor is tensor.reciprocal() * number.
          Tensor adaptive = mul(1.0 / root, half_power(bias_correction2));
          return mul(mul(mul(corrected, rate), adaptive), rect);
        },
        [&] { return mul(corrected, rate); });
    sub_(param, update);
  });
}

void check_adam_like(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
}

}  // namespace

Hyperparams AdamaxOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Hyperparams NAdamOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"momentum_decay", momentum_decay},
          {"decoupled_weight_decay", decoupled_weight_decay ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Hyperparams RAdamOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"decoupled_weight_decay", decoupled_weight_decay ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adamax::Adamax(std::vector<Tensor> params, AdamaxOptions options)
    : Adamax(single_group(std::move(params)), options) {}
Adamax::Adamax(std::vector<ParamGroup> groups, AdamaxOptions defaults)
    : Optimizer(adamax_kind(), std::move(groups), defaults.to_hyperparams()) {}

NAdam::NAdam(std::vector<Tensor> params, NAdamOptions options)
    : NAdam(single_group(std::move(params)), options) {}
NAdam::NAdam(std::vector<ParamGroup> groups, NAdamOptions defaults)
    : Optimizer(nadam_kind(), std::move(groups), defaults.to_hyperparams()) {}

RAdam::RAdam(std::vector<Tensor> params, RAdamOptions options)
    : RAdam(single_group(std::move(params)), options) {}
RAdam::RAdam(std::vector<ParamGroup> groups, RAdamOptions defaults)
    : Optimizer(radam_kind(), std::move(groups), defaults.to_hyperparams()) {}

const OptimizerKind& adamax_kind() {
  static const OptimizerKind kind{"Adamax",
                                  AdamaxOptions{}.to_hyperparams(),
                                  {"step", "exp_avg", "exp_inf"},
                                  {"step"},
                                  check_adam_like,
                                  init_adamax,
                                  update_adamax};
  return kind;
}

const OptimizerKind& nadam_kind() {
  static const OptimizerKind kind{"NAdam",
                                  NAdamOptions{}.to_hyperparams(),
                                  {"step", "mu_product", "exp_avg", "exp_avg_sq"},
                                  {"step", "mu_product"},
                                  check_nadam,
                                  init_nadam,
                                  update_nadam};
  return kind;
}

const OptimizerKind& radam_kind() {
  static const OptimizerKind kind{"RAdam",
                                  RAdamOptions{}.to_hyperparams(),
                                  {"step", "exp_avg", "exp_avg_sq"},
                                  {"step"},
                                  check_adam_like,
                                  init_moments,
                                  update_radam};
  return kind;
}

}  // namespace kiln
