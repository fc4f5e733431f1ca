#include "kiln/optim/functional.h"

#include <optional>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/dispatch.h"
#include "kiln/optim/functional_math.h"
#include "kiln/optim/kinds.h"

namespace kiln {

namespace {

const std::vector<const OptimizerKind*>& all_kinds() {
  static const std::vector<const OptimizerKind*> kinds = {
      &sgd_kind(),      &adam_kind(),   &adamw_kind(), &rmsprop_kind(), &adagrad_kind(),
      &adadelta_kind(), &adamax_kind(), &nadam_kind(), &radam_kind()};
  return kinds;
}

std::string known_names(const Hyperparams& defaults) {
  std::string names;
  for (const auto& [name, value] : defaults)
    names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

const OptimizerKind& optimizer_kind(const std::string& name) {
  for (const OptimizerKind* kind : all_kinds()) {
    if (kind->name == name) return *kind;
  }
  std::string names;
  for (const std::string& known : optimizer_kind_names())
    names += (names.empty() ? "" : ", ") + known;
  KILN_CHECK_VALUE(false, "no optimizer named '", name, "' (known: ", names, ")");
  return *all_kinds().front();  // not reached
}

std::vector<std::string> optimizer_kind_names() {
  std::vector<std::string> names;
  for (const OptimizerKind* kind : all_kinds())
    names.push_back(kind->name);
  return names;
}

double get(const Hyperparams& options, const std::string& name) {
  auto it = options.find(name);
  KILN_ASSERT(it != options.end(), "optimizer option '", name, "' is missing");
  return it->second;
}

Hyperparams complete_options(const OptimizerKind& kind, const Hyperparams& overrides,
                             const std::string& where) {
  Hyperparams options = kind.defaults;
  for (const auto& [key, value] : overrides) {
    KILN_CHECK_VALUE(kind.defaults.count(key), kind.name, ": unknown option '", key, "'",
                     where.empty() ? "" : " ", where, " (known: ", known_names(kind.defaults), ")");
    options[key] = value;
  }
  kind.check(kind.name, options);
  return options;
}

void check_grad(const OptimizerKind& kind, const Tensor& param, const Tensor& grad,
                const std::string& which) {
  KILN_CHECK_TYPE(grad.dtype() == param.dtype(), kind.name, ": ", which, " is ", param.dtype(),
                  " but its grad is ", grad.dtype());
  KILN_CHECK_VALUE(grad.shape() == param.shape(), kind.name, ": ", which, " has shape ",
                   param.shape(), " but its grad has shape ", grad.shape());
}

void init_state(const OptimizerKind& kind, const Tensor& param, TensorMap& state,
                const Hyperparams& options) {
  NoGradGuard no_grad;
  bool compiling = optim_math::compiling();
  std::optional<PauseRecording> outside;
  if (compiling) outside.emplace();  // what a compiled step binds, made once
  kind.init(param, state, options, compiling);
}

void update_parameter(const OptimizerKind& kind, const Tensor& param, const Tensor& grad,
                      TensorMap& state, const Hyperparams& options, const LearningRate& lr) {
  NoGradGuard no_grad;
  init_state(kind, param, state, options);
  kind.update(param, grad, state, options, lr);
}

void update_parameters(const OptimizerKind& kind, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& grads, std::vector<TensorMap>& states,
                       const Hyperparams& options, const LearningRate& lr) {
  KILN_CHECK_VALUE(grads.size() == params.size() && states.size() == params.size(), kind.name,
                   ": got ", params.size(), " parameters, ", grads.size(), " grads and ",
                   states.size(), " states");
  for (size_t i = 0; i < params.size(); ++i)
    check_grad(kind, params[i], grads[i], str("parameter ", i, " of the group"));
  Hyperparams complete = complete_options(kind, options);
  for (size_t i = 0; i < params.size(); ++i)
    update_parameter(kind, params[i], grads[i], states[i], complete, lr);
}

// ---------------------------------------------------------------- math helpers

namespace optim_math {

bool compiling() {
  return dispatch_observer() != nullptr;
}

const Tensor& advance_step(TensorMap& state) {
  const Tensor& step = state.at("step");
  add_(step, 1.0);
  return step;
}

Tensor direction(const Tensor& param, const Tensor& grad, bool maximize, double weight_decay) {
  Tensor g = maximize ? neg(grad) : grad;
  if (weight_decay != 0) g = add(g, param, Scalar(weight_decay));  // one rounding, as torch's
  return g;
}

const Tensor& zeros_entry(TensorMap& state, const std::string& name, const Tensor& like) {
  auto found = state.find(name);
  if (found != state.end()) return found->second;
  return state[name] = zeros_like(like);
}

const Tensor& scalar_entry(TensorMap& state, const std::string& name, double value) {
  auto found = state.find(name);
  if (found != state.end()) return found->second;
  return state[name] = full({}, value, DType::Float32);  // torch's _get_scalar_dtype()
}

bool flag(const Hyperparams& options, const std::string& name) {
  return get(options, name) != 0;
}

void check_common(const std::string& name, const Hyperparams& options) {
  auto at_least_zero = [&](const char* key, const char* what) {
    auto found = options.find(key);
    KILN_CHECK_VALUE(found == options.end() || found->second >= 0, name, ": invalid ", what, ": ",
                     found->second);
  };
  at_least_zero("lr", "learning rate");
  at_least_zero("eps", "epsilon value");
  at_least_zero("weight_decay", "weight_decay value");
  const char* betas[] = {"beta1", "beta2"};
  for (int i = 0; i < 2; ++i) {
    auto found = options.find(betas[i]);
    if (found == options.end()) continue;
    KILN_CHECK_VALUE(found->second >= 0 && found->second < 1, name,
                     ": invalid beta parameter at index ", i, ": ", found->second);
  }
}

}  // namespace optim_math
}  // namespace kiln
