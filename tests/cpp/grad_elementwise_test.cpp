// Second derivatives of the elementwise ops: their backward rules are made
// of kiln ops, so differentiating the first gradient again (create_graph)
// must give the closed-form second derivative. Also dropout's gradient,
// which the op table cannot check against PyTorch (the masks differ).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

double scalar(const Tensor& t) {
  return to(t, DType::Float64).item<double>();
}

// (f'(x0), f''(x0)) through kiln's backward, in float64. A first derivative
// that does not depend on x (relu, neg) records no history: f'' = 0.
std::pair<double, double> derivatives(const Fn& f, double x0) {
  Tensor x = requires_grad_(tensor({x0}, DType::Float64));
  Tensor dy = grad({sum(f(x))}, {x}, {}, false, /*create_graph=*/true)[0];
  if (!dy.requires_grad()) return {scalar(dy), 0.0};
  Tensor d2y = grad({sum(dy)}, {x})[0];
  return {scalar(dy), scalar(d2y)};
}

double sigmoid_of(double x) {
  return 1 / (1 + std::exp(-x));
}

struct SecondDerivativeCase {
  const char* name;
  Fn f;
  double x0;
  double first, second;  // closed forms at x0
};

TEST(GradElementwise, SecondDerivativesMatchClosedForms) {
  const double x = 0.7, t = std::tanh(x), s = sigmoid_of(x);
  const double phi = std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
  const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
  const std::vector<SecondDerivativeCase> cases = {
      {"neg", [](const Tensor& v) { return neg(v); }, x, -1, 0},
      {"abs", [](const Tensor& v) { return abs(v); }, -x, -1, 0},
      {"exp", [](const Tensor& v) { return exp(v); }, x, std::exp(x), std::exp(x)},
      {"log", [](const Tensor& v) { return log(v); }, x, 1 / x, -1 / (x * x)},
      {"sqrt", [](const Tensor& v) { return sqrt(v); }, x, 0.5 / std::sqrt(x),
       -0.25 * std::pow(x, -1.5)},
      {"rsqrt", [](const Tensor& v) { return rsqrt(v); }, x, -0.5 * std::pow(x, -1.5),
       0.75 * std::pow(x, -2.5)},
      {"sin", [](const Tensor& v) { return sin(v); }, x, std::cos(x), -std::sin(x)},
      {"cos", [](const Tensor& v) { return cos(v); }, x, -std::sin(x), -std::cos(x)},
      // d tanh = 1 - t², d² tanh = -2 t (1 - t²)
      {"tanh", [](const Tensor& v) { return tanh(v); }, x, 1 - t * t, -2 * t * (1 - t * t)},
      // d σ = σ(1 - σ), d² σ = σ(1 - σ)(1 - 2σ)
      {"sigmoid", [](const Tensor& v) { return sigmoid(v); }, x, s * (1 - s),
       s * (1 - s) * (1 - 2 * s)},
      {"relu", [](const Tensor& v) { return relu(v); }, x, 1, 0},
      {"leaky_relu", [](const Tensor& v) { return leaky_relu(v, 0.2); }, -x, 0.2, 0},
      // gelu = x Φ(x): d = Φ + x φ, d² = φ (2 - x²)
      {"gelu", [](const Tensor& v) { return gelu(v); }, x, cdf + x * phi, phi * (2 - x * x)},
      {"gelu_at_zero", [](const Tensor& v) { return gelu(v); }, 0.0, 0.5,
       2 / std::sqrt(2 * std::numbers::pi)},
      // elu below 0: alpha e^x, twice
      {"elu", [](const Tensor& v) { return elu(v, 1.5); }, -x, 1.5 * std::exp(-x),
       1.5 * std::exp(-x)},
      // softplus_beta: d = σ(βx), d² = β σ(βx)(1 - σ(βx))
      {"softplus", [](const Tensor& v) { return softplus(v, 2.0); }, x, sigmoid_of(2 * x),
       2 * sigmoid_of(2 * x) * (1 - sigmoid_of(2 * x))},
      {"clamp", [](const Tensor& v) { return clamp(v * v, 0.0, 1.0); }, x, 2 * x, 2},
      // x³ through pow with a number exponent: 3x², 6x
      {"pow_number", [](const Tensor& v) { return pow(v, int64_t(3)); }, x, 3 * x * x, 6 * x},
      // 2^x: ln2 2^x, ln²2 2^x
      {"pow_number_base", [](const Tensor& v) { return pow(2.0, v); }, x,
       std::log(2.0) * std::pow(2.0, x), std::log(2.0) * std::log(2.0) * std::pow(2.0, x)},
      // 1/x through div: -1/x², 2/x³
      {"div", [](const Tensor& v) { return 1.0 / v; }, x, -1 / (x * x), 2 / (x * x * x)},
      {"sub", [](const Tensor& v) { return 1.0 - v * v; }, x, -2 * x, -2},
      {"maximum", [](const Tensor& v) { return maximum(v * v, v); }, x, 1, 0},
      {"minimum", [](const Tensor& v) { return minimum(v * v, v); }, x, 2 * x, 2},
      {"where", [](const Tensor& v) { return where(v > 0.0, v * v * v, v); }, x, 3 * x * x, 6 * x},
  };
  for (const SecondDerivativeCase& c : cases) {
    auto [first, second] = derivatives(c.f, c.x0);
    EXPECT_NEAR(first, c.first, 1e-12 + 1e-9 * std::fabs(c.first)) << c.name;
    EXPECT_NEAR(second, c.second, 1e-12 + 1e-9 * std::fabs(c.second)) << c.name;
  }
}

// The tanh-approximate gelu's second derivative against a central difference
// of its (analytic) first derivative.
TEST(GradElementwise, GeluTanhSecondDerivativeMatchesDifferenceOfFirst) {
  auto f = [](const Tensor& v) { return gelu(v, "tanh"); };
  for (double x0 : {-2.0, -0.3, 0.0, 0.9}) {
    const double h = 1e-5;
    double second = derivatives(f, x0).second;
    double numeric = (derivatives(f, x0 + h).first - derivatives(f, x0 - h).first) / (2 * h);
    EXPECT_NEAR(second, numeric, 1e-7) << "x = " << x0;
  }
}

// pow in both operands: the mixed partial d²(a^b)/da db = a^(b-1) (1 + b ln a).
TEST(GradElementwise, PowMixedSecondDerivative) {
  const double a0 = 1.3, b0 = 0.6;
  Tensor a = requires_grad_(tensor({a0}, DType::Float64));
  Tensor b = requires_grad_(tensor({b0}, DType::Float64));
  Tensor da = grad({sum(pow(a, b))}, {a}, {}, false, /*create_graph=*/true)[0];
  Tensor dadb = grad({sum(da)}, {b})[0];
  EXPECT_NEAR(scalar(dadb), std::pow(a0, b0 - 1) * (1 + b0 * std::log(a0)), 1e-12);
}

TEST(GradElementwise, ThirdDerivativeOfTanh) {
  // d³ tanh = -2 (1 - t²)(1 - 3t²)
  const double x0 = 0.4, t = std::tanh(x0);
  Tensor x = requires_grad_(tensor({x0}, DType::Float64));
  Tensor d1 = grad({sum(tanh(x))}, {x}, {}, false, true)[0];
  Tensor d2 = grad({sum(d1)}, {x}, {}, false, true)[0];
  Tensor d3 = grad({sum(d2)}, {x})[0];
  EXPECT_NEAR(scalar(d3), -2 * (1 - t * t) * (1 - 3 * t * t), 1e-12);
}

// dropout: dx = g mask / (1 - p), so the gradient of sum(y) is 1/(1 - p)
// exactly where y kept x and 0 where it was dropped.
TEST(GradElementwise, DropoutGradientFollowsTheMask) {
  Tensor x = requires_grad_(add(rand({1000}, DType::Float64), 1.0));  // never 0
  Tensor y = dropout(x, 0.25);
  Tensor gx = grad({sum(y)}, {x})[0];
  std::vector<double> yv = y.to_vector<double>(), gv = gx.to_vector<double>();
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    double want = yv[i] != 0 ? 1 / 0.75 : 0.0;
    kept += yv[i] != 0;
    ASSERT_DOUBLE_EQ(gv[i], want) << "element " << i;
  }
  EXPECT_GT(kept, 650);
  EXPECT_LT(kept, 850);
}

}  // namespace
}  // namespace kiln
