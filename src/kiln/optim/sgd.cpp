#include "kiln/optim/sgd.h"

#include "kiln/optim/functional_math.h"
#include "kiln/optim/kinds.h"

namespace kiln {

using namespace optim_math;

Hyperparams SGDOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(single_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer(sgd_kind(), std::move(groups), defaults.to_hyperparams()) {}

namespace {

void check_sgd(const std::string& name, const Hyperparams& options) {
  double lr = get(options, "lr"), momentum = get(options, "momentum");
  double dampening = get(options, "dampening"), weight_decay = get(options, "weight_decay");
  KILN_CHECK_VALUE(lr >= 0, name, ": invalid learning rate: ", lr);
  KILN_CHECK_VALUE(momentum >= 0, name, ": invalid momentum value: ", momentum);
  KILN_CHECK_VALUE(weight_decay >= 0, name, ": invalid weight_decay value: ", weight_decay);
  KILN_CHECK_VALUE(!flag(options, "nesterov") || (momentum > 0 && dampening == 0), name,
                   ": nesterov momentum requires a momentum and zero dampening, got momentum ",
                   momentum, " and dampening ", dampening);
}

// torch starts the momentum buffer at the first step's direction, undamped.
// A compiled step has one path for every call: the buffer starts at zeros,
// which gives buffer = direction on the first call exactly when there is no
// dampening (0 * momentum + d).
void init_sgd(const Tensor& param, TensorMap& state, const Hyperparams& options, bool compiling) {
  double momentum = get(options, "momentum"), dampening = get(options, "dampening");
  if (!compiling || momentum == 0 || state.count("momentum_buffer")) return;
  KILN_CHECK_VALUE(dampening == 0, "SGD: compiling a training step with dampening ", dampening,
                   " before the first step: torch's first step skips the dampening, which a "
                   "compiled step cannot repeat; take one eager step first");
  state["momentum_buffer"] = zeros_like(param);
}

void update_sgd(const Tensor& param, const Tensor& grad, TensorMap& state,
                const Hyperparams& options, const LearningRate& lr) {
  double momentum = get(options, "momentum"), dampening = get(options, "dampening");
  Tensor d = direction(param, grad, flag(options, "maximize"), get(options, "weight_decay"));
  if (momentum != 0) {
    auto found = state.find("momentum_buffer");
    if (found == state.end()) {
      found = state.emplace("momentum_buffer", clone(d)).first;
    } else {
      const Tensor& buffer = found->second;
      mul_(buffer, momentum);
      add_(buffer, d, Scalar(1 - dampening));
    }
    const Tensor& buffer = found->second;
    d = flag(options, "nesterov") ? add(d, buffer, Scalar(momentum)) : buffer;
  }
  with_numbers("SGD", lr, Tensor(),
               [&](const auto& rate, const auto&) { add_with_alpha_(param, d, -rate); });
}

}  // namespace

const OptimizerKind& sgd_kind() {
  static const OptimizerKind kind{
      "SGD",     SGDOptions{}.to_hyperparams(), {"momentum_buffer"}, {}, check_sgd, init_sgd,
      update_sgd};
  return kind;
}

}  // namespace kiln
