#include "kiln/nn/init.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/trace_hook.h"
#include "kiln/ops/copy.h"

namespace kiln::nn::init {

namespace {

void check_floating(const Tensor& t, const char* fn) {
  KILN_CHECK_TYPE(t.defined(), "init.", fn, ": got an undefined tensor");
  KILN_CHECK_TYPE(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, "init.", fn,
                  ": expected a floating tensor, got ", t.dtype());
}

// Draws into a fresh contiguous tensor, then copies into `t`: `t` may be a
// strided view, and the copy bumps its version like any in-place write.
template <typename Fill>
const Tensor& fill_random(const char* what, const Tensor& t, Generator* gen, Fill fill) {
  // A trace recording on this thread freezes these numbers into its graph.
  report_random_draw(what, std::source_location());
  Generator& g = gen ? *gen : default_generator();
  Tensor values = empty(t.shape(), t.dtype());
  if (t.dtype() == DType::Float32) {
    fill(g, values.data<float>(), values.numel());
  } else {
    fill(g, values.data<double>(), values.numel());
  }
  NoGradGuard no_grad;
  return copy_(t, values);
}

double fan_for_mode(const Tensor& t, const std::string& mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  KILN_CHECK_VALUE(mode == "fan_in" || mode == "fan_out", "init: mode ", mode,
                   " not supported, please use one of fan_in, fan_out");
  return double(mode == "fan_in" ? fan_in : fan_out);
}

}  // namespace

const Tensor& uniform_(const Tensor& t, double low, double high, Generator* gen) {
  check_floating(t, "uniform_");
  KILN_CHECK_VALUE(low <= high, "init.uniform_: expects low <= high, got low=", low,
                   " and high=", high);
  return fill_random("init.uniform_", t, gen,
                     [&](Generator& g, auto* p, int64_t n) { fill_uniform(g, p, n, low, high); });
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  KILN_CHECK_VALUE(std >= 0.0, "init.normal_: expects std >= 0.0, got std=", std);
  return fill_random("init.normal_", t, gen,
                     [&](Generator& g, auto* p, int64_t n) { fill_normal(g, p, n, mean, std); });
}

const Tensor& constant_(const Tensor& t, double value) {
  KILN_CHECK_TYPE(t.defined(), "init.constant_: got an undefined tensor");
  NoGradGuard no_grad;
  return fill_(t, value);
}

const Tensor& zeros_(const Tensor& t) {
  return constant_(t, 0.0);
}
const Tensor& ones_(const Tensor& t) {
  return constant_(t, 1.0);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  KILN_CHECK_VALUE(t.dim() >= 2,
                   "init: fan in and fan out can not be computed for a tensor with fewer than 2 "
                   "dimensions (got shape ",
                   t.shape(), ")");
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < t.dim(); ++d)
    receptive_field *= t.size(d);
  return {t.size(1) * receptive_field, t.size(0) * receptive_field};
}

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  static const char* kUnitGain[] = {"linear",           "conv1d",           "conv2d",
                                    "conv3d",           "conv_transpose1d", "conv_transpose2d",
                                    "conv_transpose3d", "sigmoid"};
  for (const char* name : kUnitGain) {
    if (nonlinearity == name) return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  // SELU's gain is chosen for self-normalizing nets (PyTorch uses 3/4).
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw Error(ErrorKind::Value,
              str("init.calculate_gain: unsupported nonlinearity ", nonlinearity));
}

const Tensor& kaiming_uniform_(const Tensor& t, double a, const std::string& mode,
                               const std::string& nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;  // PyTorch warns and skips empty tensors
  double fan = fan_for_mode(t, mode);
  double std = calculate_gain(nonlinearity, a) / std::sqrt(fan);
  double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

const Tensor& kaiming_normal_(const Tensor& t, double a, const std::string& mode,
                              const std::string& nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  double fan = fan_for_mode(t, mode);
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan), gen);
}

const Tensor& xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / double(fan_in + fan_out));
  double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

const Tensor& xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / double(fan_in + fan_out)), gen);
}

}  // namespace kiln::nn::init
