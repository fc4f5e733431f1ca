#include "kiln/optim/optimizer.h"

#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"

namespace kiln {

double get(const Hyperparams& options, const std::string& name) {
  auto it = options.find(name);
  KILN_ASSERT(it != options.end(), "optimizer hyperparameter '", name, "' is missing");
  return it->second;
}

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  if (params.empty()) return {};
  return {ParamGroup{std::move(params), {}}};
}

namespace {

std::string known_names(const Hyperparams& defaults) {
  std::string names;
  for (const auto& [name, value] : defaults)
    names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

Optimizer::Optimizer(std::string name, Hyperparams defaults, std::vector<std::string> buffer_names)
    : name_(std::move(name)),
      defaults_(std::move(defaults)),
      buffer_names_(std::move(buffer_names)) {}

void Optimizer::add_initial_groups(std::vector<ParamGroup> groups) {
  KILN_CHECK_VALUE(!groups.empty(), name_, ": got an empty parameter list");
  for (ParamGroup& group : groups)
    add_param_group(std::move(group));
}

void Optimizer::add_param_group(ParamGroup group) {
  KILN_CHECK_VALUE(!group.params.empty(), name_, ": parameter group ", groups_.size(),
                   " holds no parameters");
  for (const auto& [key, value] : group.options) {
    KILN_CHECK_VALUE(defaults_.count(key), name_, ": unknown option '", key,
                     "' in parameter group ", groups_.size(), " (known: ", known_names(defaults_),
                     ")");
  }
  Hyperparams options = defaults_;
  for (const auto& [key, value] : group.options)
    options[key] = value;
  check_options(options);
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK_VALUE(p.defined(), name_, ": parameter ", i, " of group ", groups_.size(),
                     " is an undefined tensor");
    KILN_CHECK_TYPE(is_floating(p.dtype()), name_, ": can only optimize floating tensors, got ",
                    p.dtype(), " for parameter ", i, " of group ", groups_.size());
    for (const ParamGroup& other : groups_) {
      bool seen = std::any_of(other.params.begin(), other.params.end(),
                              [&](const Tensor& q) { return q.is_same(p); });
      KILN_CHECK_VALUE(!seen, name_, ": some parameters appear in more than one parameter group");
    }
  }
  group.options = std::move(options);
  states_.resize(states_.size() + group.params.size());
  groups_.push_back(std::move(group));
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  KILN_CHECK_INDEX(group < groups_.size(), name_, ": no parameter group ", group, " (there are ",
                   groups_.size(), ")");
  return groups_[group].params;
}

const Hyperparams& Optimizer::hyperparams(size_t group) const {
  KILN_CHECK_INDEX(group < groups_.size(), name_, ": no parameter group ", group, " (there are ",
                   groups_.size(), ")");
  return groups_[group].options;
}

double Optimizer::option(const std::string& name, size_t group) const {
  const Hyperparams& options = hyperparams(group);
  auto it = options.find(name);
  KILN_CHECK_VALUE(it != options.end(), name_, ": unknown option '", name,
                   "' (known: ", known_names(defaults_), ")");
  return it->second;
}

namespace {

// Writes a 0-d tensor in place (compiled steps hold it by reference).
void set_scalar(const Tensor& t, double value) {
  mul_(t, 0.0);
  add_(t, value);
}

}  // namespace

void Optimizer::set_option(const std::string& name, double value, size_t group) {
  option(name, group);  // checks the group and the name
  Hyperparams options = groups_[group].options;
  options[name] = value;
  check_options(options);
  groups_[group].options = std::move(options);
  if (name == "lr" && group < lr_tensors_.size() && lr_tensors_[group].defined()) {
    NoGradGuard no_grad;
    PauseRecording outside;
    set_scalar(lr_tensors_[group], value);  // what a compiled step reads
  }
}

const ParamState& Optimizer::state(int64_t index) const {
  KILN_CHECK_INDEX(index >= 0 && index < int64_t(states_.size()), name_, ": no parameter ", index,
                   " (there are ", states_.size(), ")");
  ParamState& state = states_[size_t(index)];
  // Compiled steps advance the tensor only.
  if (state.step_tensor.defined()) state.step = int64_t(state.step_tensor.item<double>());
  return state;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  bool capturing = dispatch_observer() != nullptr;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    if (capturing) {
      PauseRecording outside;
      if (lr_tensors_.size() <= g) lr_tensors_.resize(groups_.size());
      if (!lr_tensors_[g].defined())
        lr_tensors_[g] = full({}, get(group.options, "lr"), DType::Float64);
    }
    capture_lr_ = capturing ? lr_tensors_[g] : Tensor();
    for (size_t i = 0; i < group.params.size(); ++i, ++index) {
      const Tensor& param = group.params[i];
      Tensor gradient = grad(param);
      if (!gradient.defined()) continue;
      KILN_CHECK_TYPE(gradient.dtype() == param.dtype(), name_, ": parameter ", i, " of group ", g,
                      " is ", param.dtype(), " but its grad is ", gradient.dtype());
      KILN_CHECK_VALUE(gradient.shape() == param.shape(), name_, ": parameter ", i, " of group ", g,
                       " has shape ", param.shape(), " but its grad has shape ", gradient.shape());
      ParamState& state = states_[index];
      if (capturing) {
        {
          PauseRecording outside;
          if (!state.step_tensor.defined())
            state.step_tensor = full({}, double(state.step), DType::Float64);
          prepare_capture(param, state, group.options);
        }
        add_(state.step_tensor, 1.0);
        update(param, gradient, state, group.options);
        continue;
      }
      if (state.step_tensor.defined()) state.step = int64_t(state.step_tensor.item<double>());
      update(param, gradient, state, group.options);
      if (state.step_tensor.defined()) set_scalar(state.step_tensor, double(state.step));
    }
  }
  capture_lr_ = Tensor();
}

void Optimizer::zero_grad() {
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params)
      set_grad(param, Tensor());
  }
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict dict;
  for (size_t i = 0; i < states_.size(); ++i) {
    const ParamState& state = this->state(int64_t(i));
    if (state.step == 0 && state.buffers.empty()) continue;
    ParamState copy{state.step, {}};
    for (const auto& [name, buffer] : state.buffers)
      copy.buffers[name] = clone(buffer);
    dict.state[int64_t(i)] = std::move(copy);
  }
  for (const ParamGroup& group : groups_)
    dict.param_groups.push_back(group.options);
  return dict;
}

void Optimizer::load_state_dict(const OptimizerStateDict& dict) {
  KILN_CHECK_VALUE(dict.param_groups.size() == groups_.size(), name_, ": the state dict has ",
                   dict.param_groups.size(), " parameter groups, the optimizer ", groups_.size());
  std::vector<const Tensor*> flat_params;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& p : group.params)
      flat_params.push_back(&p);
  }
  // Check everything before changing anything, so a bad dict leaves the
  // optimizer as it was.
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [key, value] : dict.param_groups[g]) {
      KILN_CHECK_VALUE(defaults_.count(key), name_, ": the state dict's group ", g,
                       " has unknown option '", key, "' (known: ", known_names(defaults_), ")");
    }
    Hyperparams merged = groups_[g].options;
    for (const auto& [key, value] : dict.param_groups[g])
      merged[key] = value;
    check_options(merged);
  }
  for (const auto& [index, state] : dict.state) {
    KILN_CHECK_VALUE(index >= 0 && index < int64_t(flat_params.size()), name_,
                     ": the state dict holds state for parameter ", index, " but there are only ",
                     flat_params.size());
    const Tensor& param = *flat_params[size_t(index)];
    for (const auto& [name, buffer] : state.buffers) {
      KILN_CHECK_VALUE(std::count(buffer_names_.begin(), buffer_names_.end(), name), name_,
                       ": the state dict holds an unknown buffer '", name, "' for parameter ",
                       index);
      KILN_CHECK_VALUE(buffer.defined() && buffer.shape() == param.shape(), name_, ": buffer '",
                       name, "' of parameter ", index, " has shape ",
                       buffer.defined() ? buffer.shape() : IntList{}, ", the parameter ",
                       param.shape());
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [key, value] : dict.param_groups[g])
      groups_[g].options[key] = value;
  }
  for (ParamState& state : states_)
    state = ParamState();
  for (const auto& [index, state] : dict.state) {
    const Tensor& param = *flat_params[size_t(index)];
    ParamState& mine = states_[size_t(index)];
    mine.step = state.step;
    for (const auto& [name, buffer] : state.buffers) {
      Tensor own = empty(param.shape(), param.dtype());
      copy_(own, buffer);  // converts the dtype when the dict came from another one
      mine.buffers[name] = own;
    }
  }
}

}  // namespace kiln
