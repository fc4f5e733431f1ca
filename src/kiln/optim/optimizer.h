// Optimizers update parameters from their gradients (kiln::grad(p)), in
// place and without recording: step() runs under NoGradGuard.
//
//   kiln::SGD opt(model_params, {.lr = 0.1, .momentum = 0.9});
//   opt.zero_grad();  kiln::backward(loss);  opt.step();
//
// An Optimizer is an algorithm of functional.h (its OptimizerKind: the
// update math, which Python's kiln.optim calls too) over parameter groups.
// Hyperparameters live per group as named numbers (lr, momentum, beta1,
// ...), as in torch.optim's param_groups: a group may override any of the
// optimizer's defaults, and schedulers and state dicts treat every
// optimizer alike. Each optimizer's typed options struct fills the defaults.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/optim/functional.h"

namespace kiln {

struct ParamGroup {
  std::vector<Tensor> params;
  Hyperparams options;  // overrides of the optimizer's defaults, by name
};

// What an optimizer remembers about one parameter.
struct ParamState {
  int64_t step = 0;  // updates made to this parameter
  // The algorithm's state by torch's names: "momentum_buffer", "exp_avg",
  // and for those that count steps, "step" (a float32 0-d tensor).
  TensorMap buffers;
  // The update count as a float64 0-d tensor, made when a training step is
  // compiled: the compiled step advances it, and `step` follows it.
  Tensor step_tensor;
};

// A snapshot (the tensors are copies) of an optimizer's state, as in
// torch.optim: per-parameter state keyed by the parameter's index over all
// groups in order (absent for parameters never updated), and each group's
// hyperparameters.
struct OptimizerStateDict {
  std::map<int64_t, ParamState> state;
  std::vector<Hyperparams> param_groups;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient; parameters without one are
  // skipped (they took no part in the loss). While a training step is being
  // compiled (a trace records on this thread), the learning rate is handed
  // to the update as a tensor that set_option keeps current, so a compiled
  // step follows a scheduler (see functional.h).
  void step();
  // Clears every parameter's gradient (leaves it undefined, like
  // torch's set_to_none=True), so the next backward() starts afresh.
  void zero_grad();

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group = 0) const;
  const Hyperparams& hyperparams(size_t group = 0) const;
  double option(const std::string& name, size_t group = 0) const;
  void set_option(const std::string& name, double value, size_t group = 0);
  double lr(size_t group = 0) const { return option("lr", group); }
  void set_lr(double lr, size_t group = 0) { set_option("lr", lr, group); }
  void add_param_group(ParamGroup group);

  // The state of parameter `index` (over all groups in order).
  const ParamState& state(int64_t index) const;

  OptimizerStateDict state_dict() const;
  // Restores a state_dict() of an optimizer of this kind over parameters of
  // the same shapes; tensors are copied in.
  void load_state_dict(const OptimizerStateDict& dict);

  const std::string& name() const { return kind_.name; }
  const OptimizerKind& kind() const { return kind_; }

 protected:
  // `defaults` complete the kind's defaults (an options struct's values).
  Optimizer(const OptimizerKind& kind, std::vector<ParamGroup> groups, const Hyperparams& defaults);
  // Makes every parameter's state now, as torch's Adagrad does in its
  // constructor (the other algorithms make it on the first step).
  void init_all_state();

 private:
  // The group's learning rate as a float64 0-d tensor, made (outside the
  // recording) by the first compiled step.
  const Tensor& lr_tensor(size_t group);
  void count_step(ParamState& state, bool compiling);

  const OptimizerKind& kind_;
  Hyperparams defaults_;
  std::vector<ParamGroup> groups_;          // options filled in from the defaults
  mutable std::vector<ParamState> states_;  // one per parameter, over all groups in order
  std::vector<Tensor> lr_tensors_;          // per group, made by the first compiled step
};

// One group over `params` (none when the list is empty, which the
// optimizer then reports as an empty parameter list).
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

}  // namespace kiln
