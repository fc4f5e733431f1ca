// float32 gelu, both forms, written as vec_math.h's functions are: no
// branches, no calls, so a loop over gelu_erf_f32 vectorizes, and an x8
// twin that does the same operations in the same order, so a kernel that
// applies gelu to values it holds in registers (a GEMM's epilogue) gets the
// bits the elementwise gelu op gets.
//
// The erf form, x Φ(x), takes Φ from erfc: Φ(x) = erfc(|x|/√2)/2 for x < 0
// and 1 - erfc(|x|/√2)/2 above. erfc(z) = t exp(-z² + P(t)), t = 1/(1 +
// z/2), is the Chebyshev fit of Numerical Recipes (erfcc), whose relative
// error is below 1.2e-7 for every z >= 0: so Φ is accurate relative to
// itself on the far negative side too, where gelu is tiny (libm's erf
// route, 1 + erf(x/√2), loses every digit there to cancellation, and
// PyTorch's float kernel is 17% off at x = -5). -z² + P(t) is one fma.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/strided.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {

namespace gelu_detail {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kErfcPoly[10] = {-1.26551223f, 1.00002368f, 0.37409196f,  0.09678418f,
                                 -0.18628806f, 0.27886807f, -1.13520398f, 1.48851587f,
                                 -0.82215223f, 0.17087277f};
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kTanhCoeff = 0.044715f;
}  // namespace gelu_detail

// x Φ(x) (gelu with approximate="none"); NaN passes, gelu(+inf) = +inf,
// gelu(-inf) = NaN (-inf times 0), as in float64 PyTorch.
inline float gelu_erf_f32(float x) {
  using namespace gelu_detail;
  const float z = std::fabs(x) * kInvSqrt2;
  const float t = 1.0f / std::fma(0.5f, z, 1.0f);
  float p = kErfcPoly[9];
  for (int i = 8; i >= 0; --i)
    p = std::fma(p, t, kErfcPoly[i]);
  const float half_erfc = 0.5f * t * exp_nonpositive_f32(std::fma(-z, z, p));
  const float cdf = select_f32(x < 0.0f, half_erfc, 1.0f - half_erfc);
  return x * cdf;
}

inline __m256 gelu_erf_f32x8(__m256 x) {
  using namespace gelu_detail;
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 z =
      _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kInvSqrt2));
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
  __m256 p = _mm256_set1_ps(kErfcPoly[9]);
  for (int i = 8; i >= 0; --i)
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfcPoly[i]));
  const __m256 e = exp_nonpositive_f32x8(_mm256_fnmadd_ps(z, z, p));
  const __m256 half_erfc = _mm256_mul_ps(_mm256_mul_ps(half, t), e);
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 cdf = _mm256_blendv_ps(_mm256_sub_ps(one, half_erfc), half_erfc, negative);
  return _mm256_mul_ps(x, cdf);
}

// The tanh approximation, x/2 (1 + tanh(√(2/π) (x + 0.044715 x³))),
// through vec_math.h's tanh_f32 (1.5 ulp).
inline float gelu_tanh_f32(float x) {
  using namespace gelu_detail;
  const float cube_term = kTanhCoeff * x * x * x;
  const float inner = kSqrt2OverPi * (x + cube_term);
  return 0.5f * x * (1.0f + tanh_f32(inner));
}

inline __m256 gelu_tanh_f32x8(__m256 x) {
  using namespace gelu_detail;
  const __m256 cube_term =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kTanhCoeff), x), x), x);
  const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), _mm256_add_ps(x, cube_term));
  const __m256 one_plus = _mm256_add_ps(_mm256_set1_ps(1.0f), tanh_f32x8(inner));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), one_plus);
}

// out = gelu(in) over dense float32 views of one shape (in place too),
// eight at a time and the rest one by one: the same bits as the scalar
// functions above, at a fraction of their time (GCC does not vectorize
// the scalar loop); split across threads in chunks of 8192 (multiples of
// 8, so the split changes no result) from loops.h's grain on. False, and
// nothing done, for any other views.
inline bool gelu_dense_f32(const StridedView& out, const StridedView& in, bool tanh_form) {
  if (out.dtype != DType::Float32 || in.dtype != DType::Float32 || !out.is_contiguous() ||
      !in.is_contiguous() || out.numel() != in.numel())
    return false;
  const float* x = in.ptr<const float>();
  float* y = out.ptr<float>();
  const int64_t n = out.numel();
  constexpr int64_t kChunk = 8192;
  parallel_for((n + kChunk - 1) / kChunk, n >= kParallelGrain && max_threads() > 1,
               [&](int64_t chunk) {
                 const int64_t end = std::min(n, (chunk + 1) * kChunk);
                 int64_t i = chunk * kChunk;
                 for (; i + 8 <= end; i += 8) {
                   const __m256 v = _mm256_loadu_ps(x + i);
                   _mm256_storeu_ps(y + i, tanh_form ? gelu_tanh_f32x8(v) : gelu_erf_f32x8(v));
                 }
                 for (; i < end; ++i)
                   y[i] = tanh_form ? gelu_tanh_f32(x[i]) : gelu_erf_f32(x[i]);
               });
  return true;
}

}  // namespace kiln::cpu
