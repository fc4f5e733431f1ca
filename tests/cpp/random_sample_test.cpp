// bernoulli, multinomial and randperm (ops/random_sample_ops.cpp) and the
// initializers that draw from a generator (nn/init.h: trunc_normal_,
// orthogonal_) or none (eye_, dirac_). The op table rows check fixed draws
// and errors; here: the statistics of real draws, a generator of one's own
// giving the same numbers for the same seed, and compiled code drawing anew.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "jit_test_util.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/init.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

TEST(RandomSample, BernoulliMatchesItsProbabilities) {
  manual_seed(4);
  Tensor p = full({50000}, 0.3);
  Tensor draws = bernoulli(p);
  std::vector<float> v = draws.to_vector<float>();
  double ones = std::count(v.begin(), v.end(), 1.0f);
  EXPECT_EQ(ones + double(std::count(v.begin(), v.end(), 0.0f)), 50000.0);
  EXPECT_NEAR(ones / 50000.0, 0.3, 0.01);
}

TEST(RandomSample, MultinomialWithReplacementFollowsTheWeights) {
  manual_seed(5);
  Tensor weights = tensor<double>({1.0, 0.0, 3.0}, DType::Float64);
  std::vector<int64_t> v = multinomial(weights, 40000, true).to_vector<int64_t>();
  EXPECT_EQ(std::count(v.begin(), v.end(), 1), 0);  // zero weight: never drawn
  EXPECT_NEAR(double(std::count(v.begin(), v.end(), 2)) / 40000.0, 0.75, 0.01);
}

TEST(RandomSample, MultinomialWithoutReplacementDrawsDistinctCategories) {
  manual_seed(6);
  Tensor weights = rand({8, 10});
  Tensor drawn = multinomial(weights, 10, false);
  ASSERT_EQ(drawn.shape(), (IntList{8, 10}));
  std::vector<int64_t> v = drawn.to_vector<int64_t>();
  for (int64_t row = 0; row < 8; ++row) {
    std::set<int64_t> seen(v.begin() + row * 10, v.begin() + row * 10 + 10);
    EXPECT_EQ(seen.size(), 10u) << "row " << row;
  }
  // The heavier category comes first more often: weights 9:1, one sample.
  Tensor skewed = tensor<float>({9.0f, 1.0f});
  int first = 0;
  for (int i = 0; i < 2000; ++i)
    first += multinomial(skewed, 1, false).to_vector<int64_t>()[0] == 0;
  EXPECT_NEAR(first / 2000.0, 0.9, 0.03);
}

TEST(RandomSample, RandpermIsAPermutation) {
  manual_seed(7);
  std::vector<int64_t> v = randperm(1000).to_vector<int64_t>();
  std::vector<int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(v, expected);
}

TEST(RandomSample, AGeneratorOfOnesOwnRepeatsItsStream) {
  Generator a(123), b(123);
  Tensor p = full({64}, 0.5);
  EXPECT_TRUE(bitwise_equal(bernoulli(p, &a), bernoulli(p, &b)));
  EXPECT_TRUE(bitwise_equal(randperm(50, DType::Int64, &a), randperm(50, DType::Int64, &b)));
  Tensor weights = rand({3, 5});
  EXPECT_TRUE(bitwise_equal(multinomial(weights, 4, true, &a), multinomial(weights, 4, true, &b)));
  Generator c(123);
  Tensor first = randperm(50, DType::Int64, &c);
  c.manual_seed(123);
  EXPECT_TRUE(bitwise_equal(randperm(50, DType::Int64, &c), first));
}

}  // namespace
}  // namespace kiln

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

Tensors sample_all(const Tensors& in) {
  return {bernoulli(in[0]), multinomial(in[0], 2, false)};
}

TEST(RandomSample, ACompiledCallDrawsAnewAsEagerDoes) {
  Tensor p = full({4, 6}, 0.5);
  CompiledFunction f = trace(sample_all, {p});
  manual_seed(11);
  Tensors eager = sample_all({p});
  manual_seed(11);
  Tensors first = f({p});
  Tensors second = f({p});
  for (size_t i = 0; i < 2; ++i)
    EXPECT_TRUE(bitwise_equal(first[i], eager[i])) << "output " << i;
  EXPECT_FALSE(bitwise_equal(first[0], second[0]));
}

}  // namespace
}  // namespace kiln::jit

namespace kiln {
namespace {

TEST(Init, TruncNormalStaysInItsBoundsWithTheRightMean) {
  Generator gen(8);
  Tensor t = empty({20000}, DType::Float64);
  nn::init::trunc_normal_(t, 1.0, 2.0, -1.0, 2.0, &gen);
  std::vector<double> v = t.to_vector<double>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -1.0);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), 2.0);
  // Mean of N(1, 2) truncated to [-1, 2]: mu + sigma (phi(a') - phi(b')) / Z.
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  double a = -1.0, b = 0.5;
  double expected = 1.0 + 2.0 * (phi(a) - phi(b)) / (cdf(b) - cdf(a));
  EXPECT_NEAR(std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()), expected, 0.02);
}

TEST(Init, OrthogonalGivesOrthonormalRowsOrColumns) {
  for (IntList shape : {IntList{6, 4}, IntList{4, 6}, IntList{3, 2, 2}}) {
    Tensor t = empty(shape, DType::Float64);
    nn::init::orthogonal_(t, 2.0);
    Tensor m = reshape(t, {shape[0], t.numel() / shape[0]});
    bool tall = m.size(0) >= m.size(1);
    Tensor gram = tall ? matmul(transpose(m, 0, 1), m) : matmul(m, transpose(m, 0, 1));
    int64_t n = gram.size(0);
    std::vector<double> g = gram.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(g[size_t(i * n + j)], i == j ? 4.0 : 0.0, 1e-9)
            << ::testing::PrintToString(shape);
    }
  }
}

TEST(Init, EyeAndDirac) {
  Tensor e = empty({2, 3});
  nn::init::eye_(e);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor w = full({4, 2, 3}, 7.0);
  nn::init::dirac_(w, 2);
  std::vector<float> v = w.to_vector<float>();
  // groups of 2 output channels; in each, out c passes in channel c at the centre.
  std::vector<float> expected(24, 0.0f);
  for (int g = 0; g < 2; ++g) {
    for (int c = 0; c < 2; ++c)
      expected[size_t((g * 2 + c) * 6 + c * 3 + 1)] = 1.0f;
  }
  EXPECT_EQ(v, expected);
  EXPECT_THROW(nn::init::dirac_(full({3, 2, 3}, 0.0), 2), Error);
  EXPECT_THROW(nn::init::eye_(full({3}, 0.0)), Error);
}

}  // namespace
}  // namespace kiln
