#include "kiln/optim/sgd.h"

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"

namespace kiln {

Hyperparams SGDOptions::to_hyperparams() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(single_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer("SGD", defaults.to_hyperparams(), {"momentum_buffer"}) {
  add_initial_groups(std::move(groups));
}

void SGD::check_options(const Hyperparams& options) const {
  double lr = get(options, "lr"), momentum = get(options, "momentum");
  double dampening = get(options, "dampening"), weight_decay = get(options, "weight_decay");
  KILN_CHECK_VALUE(lr >= 0, "SGD: invalid learning rate: ", lr);
  KILN_CHECK_VALUE(momentum >= 0, "SGD: invalid momentum value: ", momentum);
  KILN_CHECK_VALUE(weight_decay >= 0, "SGD: invalid weight_decay value: ", weight_decay);
  bool nesterov = get(options, "nesterov") != 0;
  KILN_CHECK_VALUE(!nesterov || (momentum > 0 && dampening == 0),
                   "SGD: nesterov momentum requires a momentum and zero dampening, got momentum ",
                   momentum, " and dampening ", dampening);
}

// The compiled step has one path for every step: the momentum buffer starts
// at zeros, which gives the first step's buffer = gradient exactly when
// there is no dampening (0 * momentum + g).
void SGD::prepare_capture(const Tensor& param, ParamState& state, const Hyperparams& options) {
  double momentum = get(options, "momentum"), dampening = get(options, "dampening");
  if (momentum == 0 || state.buffers.count("momentum_buffer")) return;
  KILN_CHECK_VALUE(dampening == 0, "SGD: compiling a training step with dampening ", dampening,
                   " before the first step: torch's first step skips the dampening, which a "
                   "compiled step cannot repeat; take one eager step first");
  state.buffers["momentum_buffer"] = zeros_like(param);
}

void SGD::update(const Tensor& param, const Tensor& grad, ParamState& state,
                 const Hyperparams& options) {
  double lr = get(options, "lr"), momentum = get(options, "momentum");
  double dampening = get(options, "dampening"), weight_decay = get(options, "weight_decay");
  bool nesterov = get(options, "nesterov") != 0;
  ++state.step;

  Tensor direction = grad;
  if (weight_decay != 0) direction = add(grad, mul(param, weight_decay));
  if (momentum != 0) {
    auto found = state.buffers.find("momentum_buffer");
    if (found == state.buffers.end()) {
      // torch starts the buffer at the first gradient itself, undamped.
      state.buffers["momentum_buffer"] = clone(direction);
      found = state.buffers.find("momentum_buffer");
    } else {
      const Tensor& buffer = found->second;
      mul_(buffer, momentum);
      if (dampening == 0) {
        add_(buffer, direction);
      } else {
        add_(buffer, mul(direction, 1 - dampening));
      }
    }
    const Tensor& buffer = found->second;
    direction = nesterov ? add(direction, mul(buffer, momentum)) : buffer;
  }
  if (capture_lr().defined()) {
    add_(param, mul(direction, neg(capture_lr())));
    return;
  }
  add_(param, mul(direction, -lr));
}

}  // namespace kiln
