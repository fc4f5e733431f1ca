#include "kiln/nn/init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/trace_hook.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/view.h"

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

// The inverse of erf on (-1, 1): a rational first guess refined by Newton
// steps on erf itself, which the standard library has (erfinv it has not).
double erfinv(double y) {
  if (y <= -1.0 || y >= 1.0) return std::copysign(INFINITY, y);
  // Giles' single-precision approximation as the starting point.
  double w = -std::log((1.0 - y) * (1.0 + y));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 3; ++i)  // Newton: erf'(x) = 2/sqrt(pi) exp(-x^2)
    x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
  return x;
}

// Orthonormal columns of the m x n matrix `a` (m >= n, columns stored one
// after another), by modified Gram-Schmidt run twice (the second pass
// removes what rounding left of the first). Each column's norm is what QR's
// R would hold on its diagonal, positive, so no sign fix is needed.
void orthonormalize_columns(std::vector<std::vector<double>>& a) {
  for (size_t j = 0; j < a.size(); ++j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        double dot = 0.0;
        for (size_t i = 0; i < a[j].size(); ++i)
          dot += a[k][i] * a[j][i];
        for (size_t i = 0; i < a[j].size(); ++i)
          a[j][i] -= dot * a[k][i];
      }
    }
    double norm = 0.0;
    for (double v : a[j])
      norm += v * v;
    norm = std::sqrt(norm);
    KILN_CHECK_VALUE(norm > 0.0, "init.orthogonal_: the random draw was rank-deficient");
    for (double& v : a[j])
      v /= norm;
  }
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

const Tensor& trunc_normal_(const Tensor& t, double mean, double std, double a, double b,
                            Generator* gen) {
  check_floating(t, "trunc_normal_");
  KILN_CHECK_VALUE(std > 0.0 && a < b,
                   "init.trunc_normal_: expects std > 0 and a < b, got std=", std, " a=", a,
                   " b=", b);
  auto cdf = [](double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); };
  double low = cdf((a - mean) / std), high = cdf((b - mean) / std);
  return fill_random("init.trunc_normal_", t, gen, [&](Generator& g, auto* p, int64_t n) {
    fill_uniform(g, p, n, 2.0 * low - 1.0, 2.0 * high - 1.0);
    for (int64_t i = 0; i < n; ++i) {
      double x = mean + std * std::sqrt(2.0) * erfinv(double(p[i]));
      p[i] = std::clamp(x, a, b);
    }
  });
}

const Tensor& orthogonal_(const Tensor& t, double gain, Generator* gen) {
  check_floating(t, "orthogonal_");
  KILN_CHECK_VALUE(t.dim() >= 2,
                   "init.orthogonal_: only tensors with 2 or more dimensions are "
                   "supported (got shape ",
                   t.shape(), ")");
  if (t.numel() == 0) return t;
  int64_t rows = t.size(0), cols = t.numel() / rows;
  int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  report_random_draw("init.orthogonal_", std::source_location());
  std::vector<double> drawn(static_cast<size_t>(m * n));
  fill_normal(gen ? *gen : default_generator(), drawn.data(), m * n, 0.0, 1.0);
  std::vector<std::vector<double>> columns(static_cast<size_t>(n),
                                           std::vector<double>(static_cast<size_t>(m)));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      columns[size_t(j)][size_t(i)] = drawn[size_t(i * n + j)];
  }
  orthonormalize_columns(columns);
  // rows >= cols: the result is Q (m x n); otherwise Q transposed.
  Tensor values = empty({rows, cols}, DType::Float64);
  double* out = values.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      double q = rows >= cols ? columns[size_t(c)][size_t(r)] : columns[size_t(r)][size_t(c)];
      out[r * cols + c] = gain * q;
    }
  }
  NoGradGuard no_grad;
  return copy_(t, reshape(values, t.shape()));
}

const Tensor& eye_(const Tensor& t) {
  KILN_CHECK_VALUE(t.defined() && t.dim() == 2,
                   "init.eye_: only 2-D tensors are supported (got "
                   "shape ",
                   t.defined() ? t.shape() : IntList{}, ")");
  NoGradGuard no_grad;
  return copy_(t, eye(t.size(0), t.size(1), t.dtype()));
}

const Tensor& dirac_(const Tensor& t, int64_t groups) {
  KILN_CHECK_VALUE(t.defined() && t.dim() >= 3 && t.dim() <= 5,
                   "init.dirac_: only 3, 4 and 5-D tensors are supported (got shape ",
                   t.defined() ? t.shape() : IntList{}, ")");
  KILN_CHECK_VALUE(groups > 0 && t.size(0) % groups == 0, "init.dirac_: dim 0 (", t.size(0),
                   ") must be divisible by groups (", groups, ")");
  int64_t out_per_group = t.size(0) / groups;
  int64_t channels = std::min(out_per_group, t.size(1));
  Tensor values = zeros(t.shape(), DType::Float64);
  IntList strides = contiguous_strides(t.shape());
  int64_t centre = 0;
  for (int64_t d = 2; d < t.dim(); ++d)
    centre += (t.size(d) / 2) * strides[size_t(d)];
  double* out = values.data<double>();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < channels; ++c)
      out[(g * out_per_group + c) * strides[0] + c * strides[1] + centre] = 1.0;
  }
  NoGradGuard no_grad;
  return copy_(t, values);
}

}  // namespace kiln::nn::init
