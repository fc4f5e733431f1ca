// float32 exp, sigmoid and tanh written so that a loop calling them
// vectorizes (sigmoid and tanh also come as sigmoid_f32x8 and tanh_f32x8
// for kernels that hold their values in registers): no branches (both
// sides are computed and selected), no calls, integer work through bit
// casts. std::exp and friends are calls into libm,
// which the compiler cannot vectorize; these run 8 lanes at a time on AVX2.
// The scalar references are std::exp / std::tanh themselves;
// tests/cpp/elementwise_test.cpp compares the two over the whole float range.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::cpu {

// c ? a : b as bit operations. A plain ?: whose arms hold arithmetic is
// kept as a branch by GCC (under the default -ftrapping-math it may not
// evaluate both arms), which stops the loop from vectorizing.
inline float select_f32(bool c, float a, float b) {
  uint32_t mask = 0u - uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

// exp(x), within 1 ulp of the correctly rounded result for normal outputs.
// Range reduction x = k ln2 + r with |r| <= ln2/2 (ln2 split in two so k ln2
// is exact to ~2^-32), then Cephes' degree-7 polynomial for exp(r), then
// scaling by 2^k built straight in the exponent bits.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits, so k * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  // exp overflows above 88.73 and rounds to 0 below -103.98; clamping just
  // outside keeps k within what the two-step scaling below can represent
  // while still producing inf and 0 there. NaN is kept out of the integer
  // conversion and put back at the end.
  float clamped = std::min(std::max(x, -104.0f), 89.0f);
  clamped = select_f32(std::isnan(x), 0.0f, clamped);
  float k = std::nearbyint(clamped * kLog2e);
  float r = std::fma(k, -kLn2Hi, clamped);
  r = std::fma(k, -kLn2Lo, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r) + 1.0f;
  // 2^k in two factors: k spans [-150, 128], beyond one float exponent
  // field, and results below 2^-126 must round once, at the last multiply.
  int32_t ki = int32_t(k);
  int32_t k1 = ki >> 1, k2 = ki - k1;
  float s1 = std::bit_cast<float>((k1 + 127) << 23);
  float s2 = std::bit_cast<float>((k2 + 127) << 23);
  float y = p * s1 * s2;
  return select_f32(std::isnan(x), x, y);
}

// exp(a) for a <= 0 (or NaN, which passes), the half of exp that sigmoid
// and tanh need: it never overflows, so against exp_f32 it saves the NaN
// selects and the upper clamp, k comes out of the rounding itself (adding
// 1.5 * 2^23 leaves it in the low mantissa bits: no round or int
// conversion), and 2^k is one exponent built for k + 64 then one multiply
// by 2^-64, which rounds once where the result is subnormal. a is clamped
// at -110, where exp has long rounded to 0 (and k + 64 stays a normal
// exponent); std::max returns its first operand when it is NaN. exp(r) on
// |r| <= ln2 / 2 is the Cephes polynomial of exp_f32.
inline float exp_nonpositive_f32(float a) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  a = std::max(a, -110.0f);
  const float kf = std::fma(a, kLog2e, kShifter);  // k = round(a log2 e) in the low bits
  const float k = kf - kShifter;
  float r = std::fma(k, -kLn2Hi, a);
  r = std::fma(k, -kLn2Lo, r);
  // exp(r) = 1 + r + r^2 P(r), Cephes' degree-5 P evaluated as
  // (c5 r + c4) r^4 + (c3 r + c2) r^2 + (c1 r + c0): the same terms as
  // Horner's rule with fewer dependent steps (measured: same speed and same
  // worst-case error as Horner here; it only shortens each lane's chain).
  const float r2 = r * r, r4 = r2 * r2;
  const float p54 = std::fma(1.9875691500e-4f, r, 1.3981999507e-3f);
  const float p32 = std::fma(8.3334519073e-3f, r, 4.1665795894e-2f);
  const float p10 = std::fma(1.6666665459e-1f, r, 5.0000001201e-1f);
  const float poly = std::fma(p54, r4, std::fma(p32, r2, p10));
  const float q = std::fma(poly, r2, r);  // exp(r) - 1
  // 2^(k + 64): k's low bits shifted into the exponent field (the shifter's
  // own bits shift out), plus the bias 127 + 64. (q + 1) * 2^(k + 64) is
  // one fma, rounded once as (q + 1) would be (the scale is a power of 2 and
  // the product normal); the multiply by 2^-64 rounds subnormal results.
  const float scale = std::bit_cast<float>((std::bit_cast<uint32_t>(kf) << 23) + (191u << 23));
  return std::fma(q, scale, scale) * 0x1p-64f;
}

// exp_nonpositive_f32 on 8 lanes, operation for operation (_mm256_max_ps
// returns its second operand when either is NaN, so a goes second).
inline __m256 exp_nonpositive_f32x8(__m256 a) {
  const __m256 shifter = _mm256_set1_ps(12582912.0f);
  a = _mm256_max_ps(_mm256_set1_ps(-110.0f), a);
  const __m256 kf = _mm256_fmadd_ps(a, _mm256_set1_ps(1.44269504088896341f), shifter);
  const __m256 k = _mm256_sub_ps(kf, shifter);
  __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0.693359375f), a);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
  const __m256 r2 = _mm256_mul_ps(r, r), r4 = _mm256_mul_ps(r2, r2);
  const __m256 p54 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  const __m256 p32 =
      _mm256_fmadd_ps(_mm256_set1_ps(8.3334519073e-3f), r, _mm256_set1_ps(4.1665795894e-2f));
  const __m256 p10 =
      _mm256_fmadd_ps(_mm256_set1_ps(1.6666665459e-1f), r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 poly = _mm256_fmadd_ps(p54, r4, _mm256_fmadd_ps(p32, r2, p10));
  const __m256 q = _mm256_fmadd_ps(poly, r2, r);
  const __m256 scale = _mm256_castsi256_ps(_mm256_add_epi32(
      _mm256_slli_epi32(_mm256_castps_si256(kf), 23), _mm256_set1_epi32(191 << 23)));
  return _mm256_mul_ps(_mm256_fmadd_ps(q, scale, scale), _mm256_set1_ps(0x1p-64f));
}

// sigmoid(x) from e = exp(-|x|), which never overflows: 1 / (1 + e) for
// x >= 0 and e / (1 + e) below, one division either way. Against
// 1 / (1 + exp_f32(-x)) it is the cheaper half of exp (above), and results
// below 2^-126 (x below -87.3, which 1 / (1 + exp(-x)) flushed to 0) round
// once. NaN propagates through every step (a NaN p times any scale is NaN).
// Within 2 ulp of the exact value everywhere (w2kern/sigmoid_bench.cpp
// checks all 2^32 inputs).
inline float sigmoid_f32(float x) {
  const float e = exp_nonpositive_f32(-std::fabs(x));
  // e for negative x (the sign bit, so -0 and negative NaNs too), else 1.
  const uint32_t negative = uint32_t(std::bit_cast<int32_t>(x) >> 31);
  const float num = std::bit_cast<float>((std::bit_cast<uint32_t>(e) & negative) |
                                         (std::bit_cast<uint32_t>(1.0f) & ~negative));
  return num / (1.0f + e);
}

// sigmoid_f32 on 8 lanes, operation for operation.
inline __m256 sigmoid_f32x8(__m256 x) {
  const __m256 e = exp_nonpositive_f32x8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
  const __m256 num = _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, x);  // by x's sign bit
  return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// tanh(|x|) is x + x^3 P(x^2) below 0.625 (a least-squares fit for relative
// error, < 1 ulp), where the formula through exp would lose digits to
// cancellation; above, 1 - 2 e / (1 + e) with e = exp(-2|x|) (that is,
// 1 - 2 sigmoid(-2|x|)), whose subtraction loses little as 2 e / (1 + e)
// is below 0.45 there, and which reaches exactly 1 once e is tiny. Against
// 1 - 2 / (exp(2|x|) + 1) it takes the cheap half of exp (the LSTM cell's
// two tanh per unit are a third of its time). Within 1.5 ulp of the exact
// value (tests/cpp/elementwise_test.cpp).
inline float tanh_f32(float x) {
  const float ax = std::fabs(x);
  const float t = ax * ax;
  float p = 2.15361756272614e-3f;
  p = std::fma(p, t, -8.1899743527174e-3f);
  p = std::fma(p, t, 2.1706262603402138e-2f);
  p = std::fma(p, t, -5.394789204001427e-2f);
  p = std::fma(p, t, 1.3333216309547424e-1f);
  p = std::fma(p, t, -3.333333134651184e-1f);
  const float small = std::fma(ax * t, p, ax);
  const float e = exp_nonpositive_f32(ax * -2.0f);
  const float large = std::fma(-2.0f, e / (1.0f + e), 1.0f);
  // NaN fails the comparison and takes `large`, which is NaN too.
  const float magnitude = select_f32(ax < 0.625f, small, large);
  return std::copysign(magnitude, x);
}

// tanh_f32 on 8 lanes, operation for operation.
inline __m256 tanh_f32x8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 t = _mm256_mul_ps(ax, ax);
  __m256 p = _mm256_set1_ps(2.15361756272614e-3f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-8.1899743527174e-3f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(2.1706262603402138e-2f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-5.394789204001427e-2f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.3333216309547424e-1f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-3.333333134651184e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(ax, t), p, ax);
  const __m256 e = exp_nonpositive_f32x8(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
  const __m256 s = _mm256_div_ps(e, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 large = _mm256_fnmadd_ps(_mm256_set1_ps(2.0f), s, _mm256_set1_ps(1.0f));
  const __m256 magnitude =
      _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
  return _mm256_or_ps(magnitude, _mm256_and_ps(x, sign));
}

// In place, an 8 x 8 block held in eight registers: r[j] becomes
// [r0[j] .. r7[j]]. Packing weights (conv, GEMM) transposes through it.
inline void transpose8x8(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace kiln::cpu
