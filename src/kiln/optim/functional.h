// Optimizer updates as plain functions, written once: torch.optim's
// single-tensor algorithms over kiln ops, one parameter at a time. The C++
// optimizer classes (optimizer.h) and Python's kiln.optim both call them
// with one parameter group's options.
//
//   const OptimizerKind& adam = optimizer_kind("Adam");
//   Hyperparams options = complete_options(adam, {{"weight_decay", 0.1}});
//   TensorMap state;  // what the optimizer keeps for p, by torch's names
//   update_parameter(adam, p, grad(p), state, options, {.value = 1e-3});
//
// State uses torch's names ("step", "exp_avg", "momentum_buffer", ...), so
// a state dict has torch.optim's layout; an entry the update needs and does
// not find is made as torch makes it ("step" a float32 0-d tensor, buffers
// zeros of the parameter's shape).
//
// Compiling a training step (a trace records on this thread), an update
// makes what it lacks outside the recording, so that the compiled step
// reads and writes the same tensors on every call, and takes the numbers it
// derives from the step count and the learning rate (bias corrections, step
// sizes) from tensors (the "step" state, LearningRate::tensor), so that the
// compiled step recomputes them on every call. Eagerly they are doubles,
// rounded as torch's Python arithmetic rounds them; the same code computes
// both (see Note [One update, two number types] in functional_math.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// Options by name ("lr", "momentum", "beta1", ...); flags are 0 or 1.
using Hyperparams = std::map<std::string, double>;
// One parameter's state by name.
using TensorMap = std::map<std::string, Tensor>;

struct LearningRate {
  double value = 0;
  // A 0-d floating tensor holding `value`, which a compiled step reads on
  // every call (its owner keeps it current): required while a training step
  // is being compiled, unused otherwise.
  Tensor tensor;
};

// Throws kiln::Error (ErrorKind::Value) naming the first bad option.
using OptionCheck = void (*)(const std::string& name, const Hyperparams& options);
// Makes the state entries the parameter lacks, as torch's first step (or
// constructor) makes them. `compiling`: a training step is being compiled,
// so what torch makes from the first gradient must start as zeros here.
using StateInit = void (*)(const Tensor& param, TensorMap& state, const Hyperparams& options,
                           bool compiling);
using ParamUpdate = void (*)(const Tensor& param, const Tensor& grad, TensorMap& state,
                             const Hyperparams& options, const LearningRate& lr);

// One algorithm (SGD, Adam, ...): every option it takes, with torch's
// default, the state it keeps, and its functions.
struct OptimizerKind {
  std::string name;
  Hyperparams defaults;
  std::vector<std::string> state_names;   // the per-parameter state it may keep
  std::vector<std::string> scalar_state;  // those of them that are 0-d ("step")
  OptionCheck check;
  StateInit init;
  ParamUpdate update;
};

// "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
// "NAdam", "RAdam".
const OptimizerKind& optimizer_kind(const std::string& name);
std::vector<std::string> optimizer_kind_names();

// Reads an option a complete set of options holds.
double get(const Hyperparams& options, const std::string& name);

// The kind's defaults with `overrides` over them, checked; an unknown name
// is an error saying `where` ("in parameter group 1").
Hyperparams complete_options(const OptimizerKind& kind, const Hyperparams& overrides,
                             const std::string& where = "");

// Checks that `grad` can update `param`; `which` names the parameter in the
// message ("parameter 0 of group 1").
void check_grad(const OptimizerKind& kind, const Tensor& param, const Tensor& grad,
                const std::string& which);

// Makes the state entries `param` lacks (outside any recording).
void init_state(const OptimizerKind& kind, const Tensor& param, TensorMap& state,
                const Hyperparams& options);

// One parameter's update, in place and unrecorded by autograd; `options`
// complete (complete_options). Makes the state entries it lacks first.
void update_parameter(const OptimizerKind& kind, const Tensor& param, const Tensor& grad,
                      TensorMap& state, const Hyperparams& options, const LearningRate& lr);

// update_parameter over one group: params[i] from grads[i] with states[i];
// `options` override the kind's defaults (complete_options).
void update_parameters(const OptimizerKind& kind, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& grads, std::vector<TensorMap>& states,
                       const Hyperparams& options, const LearningRate& lr);

}  // namespace kiln
