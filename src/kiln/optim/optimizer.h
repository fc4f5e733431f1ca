// Optimizers update parameters from their gradients (kiln::grad(p)), in
// place and without recording: step() runs under NoGradGuard.
//
//   kiln::SGD opt(model_params, {.lr = 0.1, .momentum = 0.9});
//   opt.zero_grad();  kiln::backward(loss);  opt.step();
//
// Hyperparameters live per parameter group as named numbers (lr, momentum,
// beta1, ...), as in torch.optim's param_groups: a group may override any of
// the optimizer's defaults, and schedulers and state dicts treat every
// optimizer alike. Each optimizer's typed options struct fills the defaults.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

using Hyperparams = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  Hyperparams options;  // overrides of the optimizer's defaults, by name
};

// What an optimizer remembers about one parameter.
struct ParamState {
  int64_t step = 0;                       // updates made to this parameter
  std::map<std::string, Tensor> buffers;  // "momentum_buffer", "exp_avg", ...
  // The step count as a float64 0-d tensor, made when a training step is
  // compiled: the compiled step advances it (Adam's bias corrections read
  // it), and `step` follows it.
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
  // skipped (they took no part in the loss).
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

  const std::string& name() const { return name_; }

 protected:
  Optimizer(std::string name, Hyperparams defaults, std::vector<std::string> buffer_names);
  // Called by each optimizer's constructor, not the base's: adding a group
  // calls the virtual check_options, which only the derived class has.
  void add_initial_groups(std::vector<ParamGroup> groups);

  // While a training step is being compiled (a trace records on this
  // thread), step() first makes every state tensor the update will use
  // outside the recording, so that the compiled step reads and writes the
  // same tensors on every call (the trace binds them by reference), and
  // hands the update the learning rate as a tensor (capture_lr()), which
  // set_option keeps current. Updates must then take one path whatever the
  // step count (zero-initialized buffers, bias corrections from step_tensor).
  virtual void prepare_capture(const Tensor& param, ParamState& state,
                               const Hyperparams& options) = 0;
  // The group's learning rate as a float64 0-d tensor while compiling a
  // step; undefined otherwise (eager steps use the number).
  const Tensor& capture_lr() const { return capture_lr_; }

  // One parameter's update; `grad` has the parameter's shape and dtype.
  virtual void update(const Tensor& param, const Tensor& grad, ParamState& state,
                      const Hyperparams& options) = 0;
  // Checks one group's hyperparameters (names are checked already).
  virtual void check_options(const Hyperparams& options) const = 0;

 private:
  std::string name_;
  Hyperparams defaults_;
  std::vector<std::string> buffer_names_;
  std::vector<ParamGroup> groups_;          // options filled in from the defaults
  mutable std::vector<ParamState> states_;  // one per parameter, over all groups in order
  std::vector<Tensor> lr_tensors_;          // per group, made by the first compiled step
  Tensor capture_lr_;
};

// One group over `params` (none when the list is empty, which the
// optimizer then reports as an empty parameter list).
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

// Reads a hyperparameter a group is known to hold (the base filled it in).
double get(const Hyperparams& options, const std::string& name);

}  // namespace kiln
