#include "kiln/kernels/cpu/conv_epilogue.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

struct NamedActivation {
  std::string_view name;
  EpilogueActivation activation;
};
constexpr NamedActivation kActivations[] = {
    {"none", EpilogueActivation::None},
    {"relu", EpilogueActivation::Relu},
    {"clamp", EpilogueActivation::Clamp},
    {"hardsigmoid", EpilogueActivation::HardSigmoid},
    {"hardswish", EpilogueActivation::HardSwish},
    {"sigmoid", EpilogueActivation::Sigmoid},
    {"silu", EpilogueActivation::Silu},
    {"tanh", EpilogueActivation::Tanh},
    {"leaky_relu", EpilogueActivation::LeakyRelu},
};

// NaN passes through every form below: _mm256_max_ps / _mm256_min_ps return
// their second operand when one is NaN, and v is always that operand.
__m256 clamp_f32x8(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
}

template <typename T>
T clamp_scalar(T v, T lo, T hi) {
  if (std::isnan(v)) return v;
  return std::min(std::max(v, lo), hi);
}

template <EpilogueActivation A>
__m256 activate_f32x8(__m256 v, __m256 alpha, __m256 beta) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  if constexpr (A == EpilogueActivation::Relu) return _mm256_max_ps(zero, v);
  if constexpr (A == EpilogueActivation::Clamp) return clamp_f32x8(v, alpha, beta);
  if constexpr (A == EpilogueActivation::HardSigmoid)
    return clamp_f32x8(_mm256_add_ps(_mm256_mul_ps(v, alpha), beta), zero, one);
  if constexpr (A == EpilogueActivation::HardSwish)
    return _mm256_mul_ps(v, clamp_f32x8(_mm256_add_ps(_mm256_mul_ps(v, alpha), beta), zero, one));
  if constexpr (A == EpilogueActivation::Sigmoid) return sigmoid_f32x8(v);
  if constexpr (A == EpilogueActivation::Silu) return _mm256_mul_ps(v, sigmoid_f32x8(v));
  if constexpr (A == EpilogueActivation::Tanh) return tanh_f32x8(v);
  if constexpr (A == EpilogueActivation::LeakyRelu) {
    // v * alpha where v is not above 0 (NaN included), then the floor.
    const __m256 leaky =
        _mm256_blendv_ps(_mm256_mul_ps(v, alpha), v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    return _mm256_max_ps(beta, leaky);
  }
  return v;
}

template <EpilogueActivation A, typename T>
T activate_scalar(T v, T alpha, T beta) {
  auto sigmoid = [](T x) {
    if constexpr (std::is_same_v<T, float>) return sigmoid_f32(x);
    return T(1) / (T(1) + std::exp(-x));
  };
  if constexpr (A == EpilogueActivation::Relu) return std::isnan(v) ? v : std::max(T(0), v);
  if constexpr (A == EpilogueActivation::Clamp) return clamp_scalar(v, alpha, beta);
  if constexpr (A == EpilogueActivation::HardSigmoid)
    return clamp_scalar(v * alpha + beta, T(0), T(1));
  if constexpr (A == EpilogueActivation::HardSwish)
    return v * clamp_scalar(v * alpha + beta, T(0), T(1));
  if constexpr (A == EpilogueActivation::Sigmoid) return sigmoid(v);
  if constexpr (A == EpilogueActivation::Silu) return v * sigmoid(v);
  if constexpr (A == EpilogueActivation::Tanh) {
    if constexpr (std::is_same_v<T, float>) return tanh_f32(v);
    return std::tanh(v);
  }
  if constexpr (A == EpilogueActivation::LeakyRelu) {
    const T leaky = v > T(0) ? v : v * alpha;
    return leaky < beta ? beta : leaky;  // NaN stays
  }
  return v;
}

// The epilogue's numbers as float32.
struct Params32 {
  float alpha, beta, scale, shift;
  bool affine;
};

template <EpilogueActivation A>
void epilogue_f32(float* out, const float* residual, int64_t n, const Params32& p) {
  const __m256 alpha = _mm256_set1_ps(p.alpha), beta = _mm256_set1_ps(p.beta);
  const __m256 scale = _mm256_set1_ps(p.scale), shift = _mm256_set1_ps(p.shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(out + i);
    if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
    v = activate_f32x8<A>(v, alpha, beta);
    if (p.affine) v = _mm256_add_ps(_mm256_mul_ps(v, scale), shift);
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) {
    float v = activate_scalar<A>(residual ? out[i] + residual[i] : out[i], p.alpha, p.beta);
    out[i] = p.affine ? v * p.scale + p.shift : v;
  }
}

template <EpilogueActivation A>
void epilogue_f64(double* out, const double* residual, int64_t n, const ConvEpilogue& e) {
  const bool affine = e.has_affine_after();
  for (int64_t i = 0; i < n; ++i) {
    const double v = activate_scalar<A>(residual ? out[i] + residual[i] : out[i], e.alpha, e.beta);
    out[i] = affine ? v * e.scale_after + e.shift_after : v;
  }
}

// Calls body.template operator()<A>() for the epilogue's activation.
template <typename Body>
void visit_activation(EpilogueActivation activation, Body body) {
  using E = EpilogueActivation;
  switch (activation) {
    case E::None:
      return body.template operator()<E::None>();
    case E::Relu:
      return body.template operator()<E::Relu>();
    case E::Clamp:
      return body.template operator()<E::Clamp>();
    case E::HardSigmoid:
      return body.template operator()<E::HardSigmoid>();
    case E::HardSwish:
      return body.template operator()<E::HardSwish>();
    case E::Sigmoid:
      return body.template operator()<E::Sigmoid>();
    case E::Silu:
      return body.template operator()<E::Silu>();
    case E::Tanh:
      return body.template operator()<E::Tanh>();
    case E::LeakyRelu:
      return body.template operator()<E::LeakyRelu>();
  }
}

}  // namespace

bool epilogue_activation_from_name(std::string_view name, EpilogueActivation& activation) {
  for (const NamedActivation& named : kActivations) {
    if (named.name != name) continue;
    activation = named.activation;
    return true;
  }
  return false;
}

const char* epilogue_activation_name(EpilogueActivation activation) {
  for (const NamedActivation& named : kActivations)
    if (named.activation == activation) return named.name.data();
  return "?";
}

void apply_conv_epilogue_f32(float* out, const float* residual, int64_t n,
                             const ConvEpilogue& epilogue) {
  if (epilogue.activation == EpilogueActivation::None && !residual &&
      !epilogue.has_affine_after()) {
    return;
  }
  const Params32 params{float(epilogue.alpha), float(epilogue.beta), float(epilogue.scale_after),
                        float(epilogue.shift_after), epilogue.has_affine_after()};
  visit_activation(epilogue.activation,
                   [&]<EpilogueActivation A>() { epilogue_f32<A>(out, residual, n, params); });
}

void apply_conv_epilogue_f64(double* out, const double* residual, int64_t n,
                             const ConvEpilogue& epilogue) {
  if (epilogue.activation == EpilogueActivation::None && !residual &&
      !epilogue.has_affine_after()) {
    return;
  }
  visit_activation(epilogue.activation,
                   [&]<EpilogueActivation A>() { epilogue_f64<A>(out, residual, n, epilogue); });
}

void apply_conv_epilogue(const StridedView& out, const StridedView& residual,
                         const ConvEpilogue& epilogue) {
  const int64_t n = out.numel();
  if (out.dtype == DType::Float32) {
    std::vector<float> copy;
    const float* r = residual.data ? contiguous_residual_f32(residual, copy) : nullptr;
    apply_conv_epilogue_f32(out.ptr<float>(), r, n, epilogue);
    return;
  }
  std::vector<double> copy;
  const double* r = nullptr;
  if (residual.data && residual.is_contiguous()) r = residual.ptr<const double>();
  if (residual.data && !r) {
    copy.resize(size_t(n));
    StridedView dense = out;
    dense.data = copy.data();
    copy_convert(dense, residual);
    r = copy.data();
  }
  apply_conv_epilogue_f64(out.ptr<double>(), r, n, epilogue);
}

const float* contiguous_residual_f32(const StridedView& residual, std::vector<float>& storage) {
  if (residual.is_contiguous()) return residual.ptr<const float>();
  StridedView dense = residual;
  storage.resize(size_t(residual.numel()));
  dense.data = storage.data();
  int64_t stride = 1;
  for (int d = dense.ndim - 1; d >= 0; --d) {
    dense.strides[d] = stride;
    stride *= dense.shape[d];
  }
  copy_convert(dense, residual);
  return storage.data();
}

}  // namespace kiln::cpu
