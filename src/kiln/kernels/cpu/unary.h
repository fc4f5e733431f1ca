// Elementwise math on one operand: out[i] = f(in[i]). Each op's `f` is a
// typed functor next to its OpDef (ops/elementwise_unary_ops.cpp) holding
// the op's own parameters (leaky_relu's slope, clamp's bounds); these are the
// loops that run it and the scalar math those functors share. Inference has
// already cast the input to the dtype the op computes in, so out and in share
// a dtype, except logical_not (any dtype in, bool out).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "kiln/kernels/cpu/gelu_f32.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/strided.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {

// out[i] = f(in[i]) with f called on the element type, for the floating
// dtypes (float32, float64) or for every numeric dtype (not bool). `in`
// broadcasts to out's shape; out may alias in exactly (in-place ops).
template <typename F>
void map_floating(const StridedView& out, const StridedView& in, F f) {
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(out, in, [f](T x) { return T(f(x)); });
  });
}

template <typename F>
void map_numeric(const StridedView& out, const StridedView& in, F f) {
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(out, in, [f](T x) { return T(f(x)); });
  });
}

// out (bool) = !in, for any input dtype.
void logical_not(const StridedView& out, const StridedView& in);

// out (bool) = whether in is NaN / infinite / finite, for any input dtype
// (integers and bools are always finite).
enum class FloatClass { NaN, Inf, Finite };
void classify(FloatClass which, const StridedView& out, const StridedView& in);

// out = in with every element kept, for the dtypes an op passes through
// unchanged (nan_to_num and the roundings of integers).
void copy_same(const StridedView& out, const StridedView& in);

// ---- scalar math the ops' functors share. float32 goes through the
// vectorizable versions (on every layout, so a result never depends on the
// input's strides); float64 through libm.

template <typename T>
T abs_of(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);  // clears the sign of -0 too
  if constexpr (std::is_unsigned_v<T>) return x;
  return x < 0 ? T(-x) : x;  // int8's -128 stays -128, as in PyTorch
}

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

// x Φ(x): float32 through gelu_f32.h (whose x8 twin, run by the gelu op on
// dense views, gives the same bits), float64 through libm's erf.
template <typename T>
T gelu_erf_of(T x) {
  if constexpr (std::is_same_v<T, float>) return gelu_erf_f32(x);
  constexpr T kInvSqrt2 = T(0.70710678118654752440);
  return T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2));
}

// The tanh approximation of gelu (float32 as gelu_erf_of).
template <typename T>
T gelu_tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>) return gelu_tanh_f32(x);
  constexpr T kSqrt2OverPi = T(0.79788456080286535588);
  constexpr T kCoeff = T(0.044715);
  T inner = kSqrt2OverPi * (x + kCoeff * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

// A bound given as a double, in the element type. A bound outside an integer
// type's range clamps to that range before the conversion so it cannot
// overflow.
template <typename T>
T bound_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return T(v);
}

}  // namespace kiln::cpu
