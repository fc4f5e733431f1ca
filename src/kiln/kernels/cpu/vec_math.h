// float32 exp, sigmoid and tanh written so that a loop calling them
// vectorizes: no branches (both sides are computed and selected), no calls,
// integer work through bit casts. std::exp and friends are calls into libm,
// which the compiler cannot vectorize; these run 8 lanes at a time on AVX2.
// The scalar references are std::exp / std::tanh themselves;
// tests/cpp/elementwise_test.cpp compares the two over the whole float range.
#pragma once

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

inline float sigmoid_f32(float x) {
  return 1.0f / (1.0f + exp_f32(-x));
}

// tanh(|x|) is x + x^3 P(x^2) below 0.625 (a least-squares fit for relative
// error, < 1 ulp), where 1 - 2 / (exp(2|x|) + 1) would lose digits to
// cancellation; above, that formula is accurate to a few ulp and reaches
// exactly 1 once exp overflows.
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float t = ax * ax;
  float p = 2.15361756272614e-3f;
  p = std::fma(p, t, -8.1899743527174e-3f);
  p = std::fma(p, t, 2.1706262603402138e-2f);
  p = std::fma(p, t, -5.394789204001427e-2f);
  p = std::fma(p, t, 1.3333216309547424e-1f);
  p = std::fma(p, t, -3.333333134651184e-1f);
  float small = std::fma(ax * t, p, ax);
  float large = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  float magnitude = select_f32(ax < 0.625f, small, large);
  return std::copysign(magnitude, x);
}

}  // namespace kiln::cpu
