#include "kiln/optim/optimizer.h"

#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"

namespace kiln {

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  if (params.empty()) return {};
  return {ParamGroup{std::move(params), {}}};
}

Optimizer::Optimizer(const OptimizerKind& kind, std::vector<ParamGroup> groups,
                     const Hyperparams& defaults)
    : kind_(kind), defaults_(complete_options(kind, defaults)) {
  KILN_CHECK_VALUE(!groups.empty(), kind_.name, ": got an empty parameter list");
  for (ParamGroup& group : groups)
    add_param_group(std::move(group));
}

void Optimizer::init_all_state() {
  size_t index = 0;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params)
      init_state(kind_, param, states_[index++].buffers, group.options);
  }
}

void Optimizer::add_param_group(ParamGroup group) {
  size_t g = groups_.size();
  KILN_CHECK_VALUE(!group.params.empty(), kind_.name, ": parameter group ", g,
                   " holds no parameters");
  Hyperparams overrides = defaults_;
  for (const auto& [key, value] : group.options)
    overrides[key] = value;
  Hyperparams options = complete_options(kind_, overrides, str("in parameter group ", g));
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK_VALUE(p.defined(), kind_.name, ": parameter ", i, " of group ", g,
                     " is an undefined tensor");
    KILN_CHECK_TYPE(is_floating(p.dtype()), kind_.name,
                    ": can only optimize floating tensors, got ", p.dtype(), " for parameter ", i,
                    " of group ", g);
    for (const ParamGroup& other : groups_) {
      bool seen = std::any_of(other.params.begin(), other.params.end(),
                              [&](const Tensor& q) { return q.is_same(p); });
      KILN_CHECK_VALUE(!seen, kind_.name,
                       ": some parameters appear in more than one parameter group");
    }
  }
  group.options = std::move(options);
  states_.resize(states_.size() + group.params.size());
  groups_.push_back(std::move(group));
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  KILN_CHECK_INDEX(group < groups_.size(), kind_.name, ": no parameter group ", group,
                   " (there are ", groups_.size(), ")");
  return groups_[group].params;
}

const Hyperparams& Optimizer::hyperparams(size_t group) const {
  KILN_CHECK_INDEX(group < groups_.size(), kind_.name, ": no parameter group ", group,
                   " (there are ", groups_.size(), ")");
  return groups_[group].options;
}

double Optimizer::option(const std::string& name, size_t group) const {
  const Hyperparams& options = hyperparams(group);
  auto it = options.find(name);
  KILN_CHECK_VALUE(it != options.end(), kind_.name, ": unknown option '", name, "'");
  return it->second;
}

namespace {

// Writes a 0-d tensor in place (compiled steps hold it by reference).
void set_scalar(const Tensor& t, double value) {
  NoGradGuard no_grad;
  PauseRecording outside;
  mul_(t, 0.0);
  add_(t, value);
}

}  // namespace

void Optimizer::set_option(const std::string& name, double value, size_t group) {
  option(name, group);  // checks the group and the name
  Hyperparams options = groups_[group].options;
  options[name] = value;
  kind_.check(kind_.name, options);
  groups_[group].options = std::move(options);
  if (name == "lr" && group < lr_tensors_.size() && lr_tensors_[group].defined())
    set_scalar(lr_tensors_[group], value);  // what a compiled step reads
}

const ParamState& Optimizer::state(int64_t index) const {
  KILN_CHECK_INDEX(index >= 0 && index < int64_t(states_.size()), kind_.name, ": no parameter ",
                   index, " (there are ", states_.size(), ")");
  ParamState& state = states_[size_t(index)];
  // Compiled steps advance the tensor only.
  if (state.step_tensor.defined()) state.step = int64_t(state.step_tensor.item<double>());
  return state;
}

const Tensor& Optimizer::lr_tensor(size_t group) {
  if (lr_tensors_.size() <= group) lr_tensors_.resize(groups_.size());
  if (!lr_tensors_[group].defined()) {
    PauseRecording outside;
    lr_tensors_[group] = full({}, get(groups_[group].options, "lr"), DType::Float64);
  }
  return lr_tensors_[group];
}

void Optimizer::count_step(ParamState& state, bool compiling) {
  if (compiling) {
    if (!state.step_tensor.defined()) {
      PauseRecording outside;
      state.step_tensor = full({}, double(state.step), DType::Float64);
    }
    add_(state.step_tensor, 1.0);
    return;
  }
  if (state.step_tensor.defined()) state.step = int64_t(state.step_tensor.item<double>());
  ++state.step;
  if (state.step_tensor.defined()) set_scalar(state.step_tensor, double(state.step));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  bool compiling = dispatch_observer() != nullptr;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    LearningRate lr{get(group.options, "lr"), compiling ? lr_tensor(g) : Tensor()};
    for (size_t i = 0; i < group.params.size(); ++i, ++index) {
      const Tensor& param = group.params[i];
      Tensor gradient = grad(param);
      if (!gradient.defined()) continue;
      check_grad(kind_, param, gradient, str("parameter ", i, " of group ", g));
      ParamState& state = states_[index];
      update_parameter(kind_, param, gradient, state.buffers, group.options, lr);
      count_step(state, compiling);
    }
  }
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
    ParamState copy{state.step, {}, {}};
    for (const auto& [name, buffer] : state.buffers)
      copy.buffers[name] = clone(buffer);
    dict.state[int64_t(i)] = std::move(copy);
  }
  for (const ParamGroup& group : groups_)
    dict.param_groups.push_back(group.options);
  return dict;
}

namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::count(names.begin(), names.end(), name) > 0;
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerStateDict& dict) {
  KILN_CHECK_VALUE(dict.param_groups.size() == groups_.size(), kind_.name, ": the state dict has ",
                   dict.param_groups.size(), " parameter groups, the optimizer ", groups_.size());
  std::vector<const Tensor*> flat_params;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& p : group.params)
      flat_params.push_back(&p);
  }
  // Check everything before changing anything, so a bad dict leaves the
  // optimizer as it was.
  std::vector<Hyperparams> merged_groups;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Hyperparams merged = groups_[g].options;
    for (const auto& [key, value] : dict.param_groups[g])
      merged[key] = value;
    merged_groups.push_back(
        complete_options(kind_, merged, str("in the state dict's parameter group ", g)));
  }
  for (const auto& [index, state] : dict.state) {
    KILN_CHECK_VALUE(index >= 0 && index < int64_t(flat_params.size()), kind_.name,
                     ": the state dict holds state for parameter ", index, " but there are only ",
                     flat_params.size());
    const Tensor& param = *flat_params[size_t(index)];
    for (const auto& [name, buffer] : state.buffers) {
      KILN_CHECK_VALUE(contains(kind_.state_names, name), kind_.name,
                       ": the state dict holds an unknown buffer '", name, "' for parameter ",
                       index);
      IntList want = contains(kind_.scalar_state, name) ? IntList{} : param.shape();
      KILN_CHECK_VALUE(buffer.defined() && buffer.shape() == want, kind_.name, ": buffer '", name,
                       "' of parameter ", index, " has shape ",
                       buffer.defined() ? buffer.shape() : IntList{}, ", expected ", want);
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].options = merged_groups[g];
    if (g < lr_tensors_.size() && lr_tensors_[g].defined())
      set_scalar(lr_tensors_[g], get(merged_groups[g], "lr"));
  }
  for (ParamState& state : states_)
    state = ParamState();
  for (const auto& [index, state] : dict.state) {
    const Tensor& param = *flat_params[size_t(index)];
    ParamState& mine = states_[size_t(index)];
    mine.step = state.step;
    for (const auto& [name, buffer] : state.buffers) {
      // Per-element state converts to the parameter's dtype (the dict may
      // come from another one); 0-d state keeps its own, as torch's "step".
      bool scalar = contains(kind_.scalar_state, name);
      Tensor own = empty(buffer.shape(), scalar ? buffer.dtype() : param.dtype());
      copy_(own, buffer);
      mine.buffers[name] = own;
    }
  }
}

}  // namespace kiln
