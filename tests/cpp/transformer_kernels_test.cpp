// The transformer encoder's float32 kernels against their references:
// gelu's x8 forms give the scalar forms' bits (a GEMM epilogue or the
// dense loop must agree with the elementwise op), and stay accurate
// against float64 erf; the fused attention's AVX2 path and its scalar
// reference (float32 with strided rows) agree on the same inputs.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/gelu_f32.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/random.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln {
namespace {

// Every 97th float bit pattern (both signs, subnormals, inf, NaN), in
// lanes of eight.
std::vector<float> sampled_floats() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 97 * 4099)
    values.push_back(std::bit_cast<float>(uint32_t(bits)));
  values.resize(values.size() / 8 * 8);
  return values;
}

template <typename Scalar, typename Vector>
void expect_same_bits(Scalar scalar, Vector vector, const char* name) {
  const std::vector<float> x = sampled_floats();
  alignas(32) float lanes[8];
  for (size_t i = 0; i < x.size(); i += 8) {
    _mm256_store_ps(lanes, vector(_mm256_loadu_ps(&x[i])));
    for (size_t j = 0; j < 8; ++j) {
      const float want = scalar(x[i + j]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(lanes[j])) << name << "(" << x[i + j] << ")";
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(lanes[j]), std::bit_cast<uint32_t>(want))
          << name << "(" << x[i + j] << "): " << lanes[j] << " vs " << want;
    }
  }
}

TEST(GeluF32, VectorFormsGiveTheScalarBits) {
  expect_same_bits(cpu::gelu_erf_f32, cpu::gelu_erf_f32x8, "gelu_erf");
  expect_same_bits(cpu::gelu_tanh_f32, cpu::gelu_tanh_f32x8, "gelu_tanh");
}

// x Φ(x) within a few ulp of float64's x erfc(-x/√2)/2 where the result
// is a normal float and x > -6 (further out the rounding of x²/2 in the
// exponent shows, 3e-5 relative at -12).
TEST(GeluF32, ErfFormIsAccurateRelativeToItself) {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 1.0f / 1024) {
    const double exact = 0.5 * double(x) * std::erfc(-double(x) / std::sqrt(2.0));
    if (std::fabs(exact) < 1e-30) continue;
    worst = std::max(worst, std::fabs(double(cpu::gelu_erf_f32(x)) - exact) / std::fabs(exact));
  }
  EXPECT_LT(worst, 5e-6);
  EXPECT_EQ(cpu::gelu_erf_f32(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::gelu_erf_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::signbit(cpu::gelu_erf_f32(-0.0f)));
}

// The AVX2 path (rows contiguous) and the reference (q's rows strided, by
// a transpose of a contiguous [.., E, L]) on the same values, with a mask
// and the causal cut, across a key block boundary (300 keys).
TEST(FusedAttention, VectorPathAgreesWithTheReference) {
  const OpDef& attention = op("scaled_dot_product_attention");
  Tensor q = randn({2, 13, 16}), q_t = contiguous(transpose(q, -2, -1));
  Tensor k = randn({2, 300, 16}), v = randn({2, 300, 24}), mask = randn({13, 300});
  for (bool causal : {false, true}) {
    Attrs attrs{{"scale", 0.25}, {"is_causal", causal}};
    Tensor fast = dispatch1(attention, {q, k, v, mask}, attrs);
    Tensor reference = dispatch1(attention, {transpose(q_t, -2, -1), k, v, mask}, attrs);
    const std::vector<float> a = fast.to_vector<float>(), b = reference.to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-5 + 1e-5 * std::fabs(b[i])) << "causal " << causal << " at " << i;
  }
}

}  // namespace
}  // namespace kiln
