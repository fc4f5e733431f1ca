#include "kiln/optim/rmsprop.h"

#include "kiln/optim/functional_math.h"
#include "kiln/optim/kinds.h"

namespace kiln {

using namespace optim_math;

namespace {

Tensor plain_direction(const Tensor& param, const Tensor& grad, const Hyperparams& options) {
  return direction(param, grad, flag(options, "maximize"), get(options, "weight_decay"));
}

// ---------------------------------------------------------------- RMSprop

void check_rmsprop(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
  double momentum = get(options, "momentum"), alpha = get(options, "alpha");
  KILN_CHECK_VALUE(momentum >= 0, name, ": invalid momentum value: ", momentum);
  KILN_CHECK_VALUE(alpha >= 0, name, ": invalid alpha value: ", alpha);
}

void init_rmsprop(const Tensor& param, TensorMap& state, const Hyperparams& options, bool) {
  scalar_entry(state, "step", 0);
  zeros_entry(state, "square_avg", param);
  if (get(options, "momentum") > 0) zeros_entry(state, "momentum_buffer", param);
  if (flag(options, "centered")) zeros_entry(state, "grad_avg", param);
}

void update_rmsprop(const Tensor& param, const Tensor& grad, TensorMap& state,
                    const Hyperparams& options, const LearningRate& lr) {
  double alpha = get(options, "alpha"), eps = get(options, "eps");
  double momentum = get(options, "momentum");
  advance_step(state);
  Tensor g = plain_direction(param, grad, options);
  const Tensor& square_avg = state.at("square_avg");
  mul_(square_avg, alpha);
  addcmul_(square_avg, g, g, 1 - alpha);
  Tensor avg;
  if (flag(options, "centered")) {
    const Tensor& grad_avg = state.at("grad_avg");
    lerp_(grad_avg, g, 1 - alpha);
    avg = clone(square_avg);
    addcmul_(avg, grad_avg, grad_avg, -1);
    avg = sqrt(avg);
  } else {
    avg = sqrt(square_avg);
  }
  add_(avg, eps);
  with_numbers("RMSprop", lr, Tensor(), [&](const auto& rate, const auto&) {
    if (momentum <= 0) return addcdiv_(param, g, avg, -rate);
    const Tensor& buffer = state.at("momentum_buffer");
    mul_(buffer, momentum);
    addcdiv_(buffer, g, avg, 1.0);
    add_with_alpha_(param, buffer, -rate);
  });
}

// ---------------------------------------------------------------- Adagrad

void check_adagrad(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
  double lr_decay = get(options, "lr_decay");
  double initial = get(options, "initial_accumulator_value");
  KILN_CHECK_VALUE(lr_decay >= 0, name, ": invalid lr_decay value: ", lr_decay);
  KILN_CHECK_VALUE(initial >= 0, name, ": invalid initial_accumulator_value value: ", initial);
}

void init_adagrad(const Tensor& param, TensorMap& state, const Hyperparams& options, bool) {
  scalar_entry(state, "step", 0);
  if (!state.count("sum"))
    state["sum"] = full_like(param, get(options, "initial_accumulator_value"));
}

void update_adagrad(const Tensor& param, const Tensor& grad, TensorMap& state,
                    const Hyperparams& options, const LearningRate& lr) {
  double lr_decay = get(options, "lr_decay"), eps = get(options, "eps");
  const Tensor& step = advance_step(state);
  with_numbers("Adagrad", lr, step, [&](const auto& rate, const auto& t) {
    Tensor g = plain_direction(param, grad, options);
    auto clr = rate / (1 + (t - 1) * lr_decay);
    const Tensor& sum = state.at("sum");
    addcmul_(sum, g, g, 1);
    Tensor std = sqrt(sum);
    add_(std, eps);
    addcdiv_(param, g, std, -clr);
  });
}

// ---------------------------------------------------------------- Adadelta

void check_adadelta(const std::string& name, const Hyperparams& options) {
  check_common(name, options);
  double rho = get(options, "rho");
  KILN_CHECK_VALUE(rho >= 0 && rho <= 1, name, ": invalid rho value: ", rho);
}

void init_adadelta(const Tensor& param, TensorMap& state, const Hyperparams&, bool) {
  scalar_entry(state, "step", 0);
  zeros_entry(state, "square_avg", param);
  zeros_entry(state, "acc_delta", param);
}

void update_adadelta(const Tensor& param, const Tensor& grad, TensorMap& state,
                     const Hyperparams& options, const LearningRate& lr) {
  double rho = get(options, "rho"), eps = get(options, "eps");
  advance_step(state);
  Tensor g = plain_direction(param, grad, options);
  const Tensor& square_avg = state.at("square_avg");
  const Tensor& acc_delta = state.at("acc_delta");
  mul_(square_avg, rho);
  addcmul_(square_avg, g, g, 1 - rho);
  Tensor std = sqrt(add(square_avg, eps));
  Tensor delta = sqrt(add(acc_delta, eps));
  div_(delta, std);
  mul_(delta, g);
  mul_(acc_delta, rho);
  addcmul_(acc_delta, delta, delta, 1 - rho);
  with_numbers("Adadelta", lr, Tensor(),
               [&](const auto& rate, const auto&) { add_with_alpha_(param, delta, -rate); });
}

}  // namespace

Hyperparams RMSpropOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"alpha", alpha},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"momentum", momentum},
          {"centered", centered ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Hyperparams AdagradOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"lr_decay", lr_decay},
          {"weight_decay", weight_decay},
          {"initial_accumulator_value", initial_accumulator_value},
          {"eps", eps},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Hyperparams AdadeltaOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"rho", rho},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"maximize", maximize ? 1.0 : 0.0}};
}

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : RMSprop(single_group(std::move(params)), options) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : Optimizer(rmsprop_kind(), std::move(groups), defaults.to_hyperparams()) {}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : Adagrad(single_group(std::move(params)), options) {}
Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults)
    : Optimizer(adagrad_kind(), std::move(groups), defaults.to_hyperparams()) {
  init_all_state();
}

Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions options)
    : Adadelta(single_group(std::move(params)), options) {}
Adadelta::Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions defaults)
    : Optimizer(adadelta_kind(), std::move(groups), defaults.to_hyperparams()) {}

const OptimizerKind& rmsprop_kind() {
  static const OptimizerKind kind{"RMSprop",
                                  RMSpropOptions{}.to_hyperparams(),
                                  {"step", "square_avg", "momentum_buffer", "grad_avg"},
                                  {"step"},
                                  check_rmsprop,
                                  init_rmsprop,
                                  update_rmsprop};
  return kind;
}

const OptimizerKind& adagrad_kind() {
  static const OptimizerKind kind{"Adagrad",       AdagradOptions{}.to_hyperparams(),
                                  {"step", "sum"}, {"step"},
                                  check_adagrad,   init_adagrad,
                                  update_adagrad};
  return kind;
}

const OptimizerKind& adadelta_kind() {
  static const OptimizerKind kind{"Adadelta",
                                  AdadeltaOptions{}.to_hyperparams(),
                                  {"step", "square_avg", "acc_delta"},
                                  {"step"},
                                  check_adadelta,
                                  init_adadelta,
                                  update_adadelta};
  return kind;
}

}  // namespace kiln
