// kiln's float32 GEMM (kernels/cpu/gemm_f32.h): against a float64 loop over
// shapes that hit every tile and panel remainder, both K-block counts and
// all three layouts of b; packed once == packed per call, bit for bit; and
// the same bits on one thread as on several.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/kernels/cpu/gemm_f32.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

// b's three layouts: Wᵀ of a row-major W (k contiguous: a linear layer),
// row-major [K, N] (n contiguous), and neither (every element strided).
enum class Layout { KContiguous, NContiguous, Strided };

struct Problem {
  int64_t m, k, n;
  Layout layout;
  bool bias;
  int64_t a_pad = 0, out_pad = 0;  // extra floats at the end of each row

  std::vector<float> a, b_storage, bias_values;
  GemmB b;

  void fill(std::mt19937& rng) {
    std::normal_distribution<float> normal;
    a.resize(size_t(m * (k + a_pad)));
    for (float& v : a)
      v = normal(rng);
    b_storage.resize(size_t(k * n * 2));
    for (float& v : b_storage)
      v = normal(rng);
    bias_values.resize(size_t(n));
    for (float& v : bias_values)
      v = normal(rng);
    switch (layout) {
      case Layout::KContiguous:
        b = GemmB{b_storage.data(), k, n, 1, k};
        break;
      case Layout::NContiguous:
        b = GemmB{b_storage.data(), k, n, n, 1};
        break;
      case Layout::Strided:
        b = GemmB{b_storage.data(), k, n, 2, 2 * k};
        break;
    }
  }
  int64_t ldo() const { return n + out_pad; }
  GemmRows rows(std::vector<float>& out) const {
    return GemmRows{out.data(), ldo(), a.data(), k + a_pad, bias ? bias_values.data() : nullptr, m};
  }
  std::vector<float> output() const { return std::vector<float>(size_t(m * ldo()), -7.0f); }
  double reference(int64_t i, int64_t j) const {
    double sum = bias ? bias_values[size_t(j)] : 0.0;
    for (int64_t p = 0; p < k; ++p)
      sum +=
          double(a[size_t(i * (k + a_pad) + p)]) * double(b.data[p * b.k_stride + j * b.n_stride]);
    return sum;
  }
};

// float32 sums of K products of N(0,1) values: error grows like sqrt(K) ulps.
double tolerance(int64_t k) {
  return 2e-6 * std::sqrt(double(k)) + 1e-6;
}

class GemmTest : public testing::Test {
 protected:
  std::mt19937 rng_{2024};
};

TEST_F(GemmTest, MatchesFloat64ReferenceOnEveryRemainder) {
  // 6-row tiles, their rest (1 to 3 left split the last two tiles: 7, 8, 9, 13, 32), 96-row blocks
  const int64_t ms[] = {1, 2, 5, 6, 7, 8, 9, 13, 32, 200};
  const int64_t ks[] = {1, 9, 256, 300, 513};  // one K block, two, three
  const int64_t ns[] = {5, 16, 17, 40};        // whole and partial 16-wide panels
  int checked = 0;
  for (int64_t m : ms) {
    for (int64_t k : ks) {
      for (int64_t n : ns) {
        const Layout layout = Layout(checked % 3);
        Problem p{m, k, n, layout, checked % 2 == 0, checked % 4 == 1 ? 3 : 0, checked % 5 == 2};
        p.fill(rng_);
        std::vector<float> out = p.output();
        gemm_f32(p.rows(out), p.b);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const double want = p.reference(i, j);
            ASSERT_LE(std::fabs(out[size_t(i * p.ldo() + j)] - want),
                      tolerance(k) * (1 + std::fabs(want)))
                << "m " << m << " k " << k << " n " << n << " layout " << int(layout) << " at ("
                << i << ", " << j << ")";
          }
          for (int64_t j = n; j < p.ldo(); ++j)
            ASSERT_EQ(out[size_t(i * p.ldo() + j)], -7.0f) << "wrote past the row's end";
        }
        ++checked;
      }
    }
  }
}

TEST_F(GemmTest, PackedOnceEqualsPackedPerCallBitwise) {
  // 70 rows pack b panel by panel on the way; 250 pack all of b first.
  for (Layout layout : {Layout::KContiguous, Layout::NContiguous, Layout::Strided}) {
    Problem p{layout == Layout::NContiguous ? 250 : 70, 600, 45, layout, true};
    p.fill(rng_);
    std::vector<float> per_call = p.output(), prepacked = p.output();
    gemm_f32(p.rows(per_call), p.b);
    PackedB packed;
    packed.pack(p.b);
    gemm_f32_packed(p.rows(prepacked), packed);
    EXPECT_EQ(per_call, prepacked) << "layout " << int(layout);
  }
}

// Up to 256 rows whose a fits in 1 MiB, b is read once, panel by panel;
// otherwise swept once per 96 rows. Each output sums the same K blocks in
// the same order either way: the first rows of a product that sweeps equal
// a product of those rows alone that streams, and the float64 reference.
TEST_F(GemmTest, TheLoopOrderDoesNotChangeTheBits) {
  EXPECT_TRUE(gemm_reads_b_once(96, 100000));
  EXPECT_TRUE(gemm_reads_b_once(256, 1024));  // 1 MiB of a
  EXPECT_FALSE(gemm_reads_b_once(256, 1025));
  EXPECT_FALSE(gemm_reads_b_once(257, 8));
  Problem all{300, 520, 40, Layout::KContiguous, true};  // 300 rows: swept
  all.fill(rng_);
  std::vector<float> swept = all.output();
  PackedB packed;
  packed.pack(all.b);
  gemm_f32_packed(all.rows(swept), packed);
  for (int64_t m : {97, 200, 256}) {  // read once
    Problem first = all;
    first.m = m;
    first.b.data = first.b_storage.data();
    std::vector<float> streamed = first.output();
    gemm_f32_packed(first.rows(streamed), packed);
    EXPECT_TRUE(std::equal(streamed.begin(), streamed.end(), swept.begin())) << m << " rows";
    for (int64_t i : {int64_t(0), m - 1})
      EXPECT_NEAR(streamed[size_t(i * first.ldo() + 7)], first.reference(i, 7), tolerance(first.k));
  }
}

TEST_F(GemmTest, BiasIsAddedAfterTheSum) {
  // As matmul(a, b) + bias rounds: the sum first, then one addition.
  Problem p{8, 300, 20, Layout::KContiguous, true};
  p.fill(rng_);
  std::vector<float> with_bias = p.output();
  gemm_f32(p.rows(with_bias), p.b);
  p.bias = false;
  std::vector<float> without = p.output();
  gemm_f32(p.rows(without), p.b);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      const size_t at = size_t(i * p.ldo() + j);
      ASSERT_EQ(with_bias[at], without[at] + p.bias_values[size_t(j)]) << i << ", " << j;
    }
  }
}

TEST_F(GemmTest, ReluInTheStoreEqualsReluAfterwards) {
  // x < 0 ? 0 : x on the stored value, NaN passing, as the relu kernel does.
  for (int64_t m : {7, 250}) {  // packed on the way, panel by panel and whole
    Problem p{m, 300, 21, Layout::KContiguous, true};
    p.fill(rng_);
    p.a[5] = std::nanf("");  // row 0 of the result is NaN throughout
    std::vector<float> plain = p.output(), fused = p.output();
    gemm_f32(p.rows(plain), p.b);
    GemmRows rows = p.rows(fused);
    rows.relu = true;
    gemm_f32(rows, p.b);
    for (size_t i = 0; i < plain.size(); ++i) {
      const float want = plain[i] < 0 ? 0.0f : plain[i];
      ASSERT_EQ(std::memcmp(&fused[i], &want, sizeof(float)), 0) << "element " << i;
    }
    EXPECT_TRUE(std::isnan(fused[0]));
  }
}

TEST_F(GemmTest, KZeroWritesTheBias) {
  Problem p{3, 0, 17, Layout::NContiguous, true};
  p.fill(rng_);
  std::vector<float> out = p.output();
  gemm_f32(p.rows(out), p.b);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j)
      EXPECT_EQ(out[size_t(i * p.ldo() + j)], p.bias_values[size_t(j)]);
  }
}

TEST_F(GemmTest, ThreadsGiveTheSameBits) {
  const int threads_before = max_threads();
  for (int64_t m : {6, 32, 64, 500}) {  // split by panels (up to 96 rows), else by rows
    Problem p{m, 512, 256, Layout::KContiguous, true};
    p.fill(rng_);
    PackedB packed;
    set_num_threads(1);
    packed.pack(p.b);
    std::vector<float> one = p.output();
    gemm_f32_packed(p.rows(one), packed);
    set_num_threads(4);
    PackedB packed4;
    packed4.pack(p.b);  // packing splits across threads too
    std::vector<float> four = p.output();
    gemm_f32_packed(p.rows(four), packed4);
    EXPECT_EQ(one, four) << "m " << m;
    std::vector<float> per_call = p.output();
    gemm_f32(p.rows(per_call), p.b);  // split by panels packed on the way
    EXPECT_EQ(one, per_call) << "m " << m;
  }
  set_num_threads(threads_before);
}

TEST_F(GemmTest, RepackingReusesTheBuffer) {
  Problem p{4, 64, 32, Layout::KContiguous, false};
  p.fill(rng_);
  PackedB packed;
  packed.pack(p.b);
  const float* first = packed.panel(0);
  p.b_storage[0] += 1.0f;
  packed.pack(p.b);
  EXPECT_EQ(packed.panel(0), first);
  EXPECT_EQ(packed.panel(0)[0], p.b_storage[0]) << "the new value was packed";
}

}  // namespace
}  // namespace kiln::cpu
