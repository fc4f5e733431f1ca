#include "kiln/kernels/cpu/unary.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

// Runs the generic lambda `f` (called with a value of the element type) over
// out[i] = f(in[i]) for the dtypes `visit` accepts.
template <typename Visit, typename F>
void same_dtype_loop(Visit visit, const StridedView& out, const StridedView& in, F f) {
  visit(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(out, in, [f](T x) { return T(f(x)); });
  });
}

template <typename F>
void floating_loop(const StridedView& out, const StridedView& in, F f) {
  same_dtype_loop([](DType d, auto&& fn) { return visit_floating(d, fn); }, out, in, f);
}

template <typename F>
void numeric_loop(const StridedView& out, const StridedView& in, F f) {
  same_dtype_loop([](DType d, auto&& fn) { return visit_numeric(d, fn); }, out, in, f);
}

template <typename T>
T abs_of(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);  // clears the sign of -0 too
  return x < 0 ? T(-x) : x;
}

// float32 goes through the vectorizable versions (on every layout, so a
// result never depends on the input's strides); float64 through libm.
template <typename T>
T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  return std::exp(x);
}

template <typename T>
T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>) return sigmoid_f32(x);
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>) return tanh_f32(x);
  return std::tanh(x);
}

template <typename T>
T gelu_of(T x) {
  constexpr T kInvSqrt2 = T(0.70710678118654752440);
  return T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2));
}

template <typename T>
T gelu_tanh_of(T x) {
  constexpr T kSqrt2OverPi = T(0.79788456080286535588);
  constexpr T kCoeff = T(0.044715);
  T inner = kSqrt2OverPi * (x + kCoeff * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

// log1p(exp(beta x)) / beta, returning x itself once beta x passes the
// threshold (where the two agree to rounding and exp would overflow).
template <typename T>
T softplus_of(T x, T beta, T threshold) {
  T scaled = x * beta;
  return scaled > threshold ? x : std::log1p(std::exp(scaled)) / beta;
}

// NaN passes through every clamp, as in PyTorch: comparisons with NaN are
// false, so the input is kept.
template <typename T>
T clamp_min_of(T x, T lo) {
  return x < lo ? lo : x;
}
template <typename T>
T clamp_max_of(T x, T hi) {
  return x > hi ? hi : x;
}

void logical_not(const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<bool, T>(out, in, [](T x) { return !(x != T(0)); });
  });
}

// Bounds arrive as doubles; a bound outside an integer type's range clamps
// to that range before the conversion so it cannot overflow.
template <typename T>
T bound_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return T(v);
}

void clamp(UnaryOp op, const StridedView& out, const StridedView& in, double lo, double hi) {
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (op == UnaryOp::ClampMin) {
      const T min = bound_as<T>(lo);
      unary_loop<T, T>(out, in, [min](T x) { return clamp_min_of(x, min); });
      return;
    }
    if (op == UnaryOp::ClampMax) {
      const T max = bound_as<T>(lo);  // a lone bound always travels in alpha
      unary_loop<T, T>(out, in, [max](T x) { return clamp_max_of(x, max); });
      return;
    }
    const T min = bound_as<T>(lo), max = bound_as<T>(hi);
    unary_loop<T, T>(out, in, [min, max](T x) { return clamp_max_of(clamp_min_of(x, min), max); });
  });
}

}  // namespace

void unary(UnaryOp op, const StridedView& out, const StridedView& in, double alpha, double beta) {
  switch (op) {
    case UnaryOp::Neg:
      return numeric_loop(out, in, [](auto x) { return -x; });
    case UnaryOp::Abs:
      return numeric_loop(out, in, [](auto x) { return abs_of(x); });
    case UnaryOp::Exp:
      return floating_loop(out, in, [](auto x) { return exp_of(x); });
    case UnaryOp::Log:
      return floating_loop(out, in, [](auto x) { return std::log(x); });
    case UnaryOp::Sqrt:
      return floating_loop(out, in, [](auto x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt:
      return floating_loop(out, in, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
    case UnaryOp::Sin:
      return floating_loop(out, in, [](auto x) { return std::sin(x); });
    case UnaryOp::Cos:
      return floating_loop(out, in, [](auto x) { return std::cos(x); });
    case UnaryOp::Tanh:
      return floating_loop(out, in, [](auto x) { return tanh_of(x); });
    case UnaryOp::Sigmoid:
      return floating_loop(out, in, [](auto x) { return sigmoid_of(x); });
    case UnaryOp::Relu:
      // x < 0 rather than x > 0 so NaN passes through, as in PyTorch.
      return numeric_loop(out, in, [](auto x) { return x < 0 ? decltype(x)(0) : x; });
    case UnaryOp::LeakyRelu:
      return floating_loop(out, in, [alpha](auto x) {
        using T = decltype(x);
        return x > 0 ? x : x * T(alpha);
      });
    case UnaryOp::Gelu:
      return floating_loop(out, in, [](auto x) { return gelu_of(x); });
    case UnaryOp::GeluTanh:
      return floating_loop(out, in, [](auto x) { return gelu_tanh_of(x); });
    case UnaryOp::Elu:
      return floating_loop(out, in, [alpha](auto x) {
        using T = decltype(x);
        return x > 0 ? x : T(alpha) * std::expm1(x);
      });
    case UnaryOp::Softplus:
      return floating_loop(out, in, [alpha, beta](auto x) {
        using T = decltype(x);
        return softplus_of(x, T(alpha), T(beta));
      });
    case UnaryOp::LogicalNot:
      return logical_not(out, in);
    case UnaryOp::ClampMin:
    case UnaryOp::ClampMax:
    case UnaryOp::Clamp:
      return clamp(op, out, in, alpha, beta);
  }
}

}  // namespace kiln::cpu
