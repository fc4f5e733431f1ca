// What the update functions of functional.h share: the two number types,
// torch's fused tensor ops with their rounding (add_ with alpha, addcdiv_;
// kiln's lerp_ and addcmul_ ops round as torch's already), and making
// state. Internal to kiln/optim.
//
// Note [One update, two number types]
// An update derives numbers from the step count and the learning rate (a
// bias correction 1 - beta^t, a step size lr / (1 - beta^t)). Eagerly they
// are doubles, computed as torch computes them in Python, so the parameters
// match torch's. While a training step is being compiled they must be
// tensors, or the graph would hold the first call's values as constants.
// Each update is written once, as a generic lambda over its numbers, and
// with_numbers() calls it with doubles or with float64 0-d tensors: the
// helpers below (power, half_power, value_of) and kiln's operators take
// either, and a tensor times a number rounds as a tensor times a 0-d tensor
// (the number is cast to the tensor's dtype first), so both agree.
#pragma once

#include <cmath>
#include <string>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/optim/functional.h"

namespace kiln::optim_math {

// A trace records on this thread: a training step is being compiled.
bool compiling();

// Python's base ** exponent.
inline double power(double base, double exponent) {
  return std::pow(base, exponent);
}
inline Tensor power(double base, const Tensor& exponent) {
  return pow(Scalar(base), exponent);
}
// Python's x ** 0.5 (pow, which torch uses for its bias corrections).
inline double half_power(double x) {
  return std::pow(x, 0.5);
}
inline Tensor half_power(const Tensor& x) {
  return pow(x, 0.5);
}
// A 0-d state tensor as a number of the kind `like` is.
inline double value_of(const Tensor& t, double /*like*/) {
  return t.item<double>();
}
inline Tensor value_of(const Tensor& t, const Tensor& /*like*/) {
  return to(t, DType::Float64);
}
// A number cast to `t`'s dtype, as torch casts a Python number an in-place
// op on `t` takes (x.mul_(0.9) on float32 multiplies by 0.9f).
inline double cast_like(double x, const Tensor& /*t*/) {
  return x;  // the kernel casts it
}
inline Tensor cast_like(const Tensor& x, const Tensor& t) {
  return to(x, t.dtype());
}

// Calls update(lr, step) with the learning rate and the step count as
// doubles (eager) or float64 0-d tensors (compiling; `lr.tensor` then
// required). `step` is the "step" state, already advanced.
template <typename Update>
void with_numbers(const std::string& name, const LearningRate& lr, const Tensor& step,
                  Update&& update) {
  if (!compiling()) {
    update(lr.value, step.defined() ? step.item<double>() : 0.0);
    return;
  }
  KILN_CHECK_VALUE(lr.tensor.defined(), name,
                   ": compiling a training step needs the learning rate as a tensor");
  update(to(lr.tensor, DType::Float64), step.defined() ? to(step, DType::Float64) : Tensor());
}

// cond ? if_true() : if_false() for a number; where(cond, if_true(),
// if_false()) for a tensor, which computes both.
template <typename A, typename B>
Tensor choose(bool cond, A&& if_true, B&& if_false) {
  return cond ? if_true() : if_false();
}
template <typename A, typename B>
Tensor choose(const Tensor& cond, A&& if_true, B&& if_false) {
  return where(cond, if_true(), if_false());
}

// Advances the "step" state by one and returns it.
const Tensor& advance_step(TensorMap& state);

// maximize ? -grad : grad, then + weight_decay * param (torch's coupled
// weight decay, grad.add(param, alpha=weight_decay)).
Tensor direction(const Tensor& param, const Tensor& grad, bool maximize, double weight_decay);

// x += alpha * other rounded once, as torch's x.add_(other, alpha=...)
// (Note [Add with alpha] in ops/elementwise_binary_ops.cpp); alpha a number,
// or a 0-d tensor while compiling (Note [One update, two number types]).
inline void add_with_alpha_(const Tensor& x, const Tensor& other, double alpha) {
  add_(x, other, Scalar(alpha));
}
inline void add_with_alpha_(const Tensor& x, const Tensor& other, const Tensor& alpha) {
  kiln::add_scaled_(x, other, alpha);
}

// self += value * a / b, in addcdiv_'s order ((value * a) / b).
template <typename Number>
void addcdiv_(const Tensor& self, const Tensor& a, const Tensor& b, const Number& value) {
  Tensor scaled = mul(a, value);
  div_(scaled, b);
  add_(self, scaled);
}

// The state entry `name`, made as zeros of `like`'s shape when missing.
const Tensor& zeros_entry(TensorMap& state, const std::string& name, const Tensor& like);
// The 0-d entry `name` (torch's float32 "step"), made holding `value`.
const Tensor& scalar_entry(TensorMap& state, const std::string& name, double value);

bool flag(const Hyperparams& options, const std::string& name);

// torch's checks of the options most algorithms share, for those `options`
// holds: lr, eps and weight_decay at least 0, beta1 and beta2 in [0, 1).
void check_common(const std::string& name, const Hyperparams& options);

}  // namespace kiln::optim_math
