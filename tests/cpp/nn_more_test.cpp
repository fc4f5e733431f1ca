// kiln/nn/layers_more.h and loss_more.h from C++: each family on a few
// values worked out by hand (tests/python/test_nn_more_*_torch.py compare
// the same functions with torch over many arguments, gradients included).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/nn/layers_more.h"
#include "kiln/nn/loss_more.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::nn {
namespace {

namespace F = functional;

using Values = std::vector<double>;

Values values_of(const Tensor& t) {
  return t.to_vector<double>();
}

TEST(NnMore, Activations) {
  Tensor x = tensor<double>({-2, -0.25, 0, 3}, DType::Float64);
  EXPECT_EQ(values_of(F::threshold(x, 0.0, 9.0)), (Values{9, 9, 9, 3}));
  EXPECT_EQ(values_of(F::softsign(x)), (Values{-2.0 / 3, -0.2, 0, 0.75}));
  EXPECT_EQ(values_of(F::hardshrink(x, 0.5)), (Values{-2, 0, 0, 3}));
  EXPECT_EQ(values_of(F::softshrink(x, 0.5)), (Values{-1.5, 0, 0, 2.5}));
  EXPECT_EQ(values_of(F::prelu(x, tensor<double>({0.5}, DType::Float64))),
            (Values{-1, -0.125, 0, 3}));
  Values logsigmoid = values_of(F::logsigmoid(x));
  for (size_t i = 0; i < 4; ++i) {
    const double v = values_of(x)[i];
    EXPECT_NEAR(logsigmoid[i], -std::log1p(std::exp(-v)), 1e-15);
  }
  // glu: the first half gated by the sigmoid of the second.
  Tensor halves = tensor<double>({{1, 2, 0, 100}}, DType::Float64);
  Values gated = values_of(F::glu(halves, 1));
  EXPECT_DOUBLE_EQ(gated[0], 0.5);
  EXPECT_NEAR(gated[1], 2.0, 1e-15);
  EXPECT_THROW_WITH(F::glu(ones({3}), 0), "glu: Halving dimension must be even");
}

TEST(NnMore, AdaptiveMaxPoolFindsEachWindowsMaximumAndIndex) {
  // Length 5 into 3 windows: [0, 2), [1, 4), [3, 5).
  Tensor x = tensor<double>({{{4, 1, 7, 2, 3}}}, DType::Float64);
  auto [values, indices] = F::adaptive_max_pool1d_with_indices(x, {3});
  EXPECT_EQ(values_of(values), (Values{4, 7, 3}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  // 2-d: a 3x3 plane into 2x2 windows of 2x2 (overlapping by one).
  Tensor plane = reshape(arange(0.0, 9.0, 1.0, DType::Float64), {1, 3, 3});
  auto [maxima, where] = F::adaptive_max_pool2d_with_indices(plane, {2, 2});
  EXPECT_EQ(values_of(maxima), (Values{4, 5, 7, 8}));
  EXPECT_EQ(where.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 7, 8}));
}

TEST(NnMore, FoldSumsWhatUnfoldCopies) {
  // Every position of a 3x3 plane appears in as many 2x2 blocks as fold
  // then adds back: 1, 2 or 4 of them.
  Tensor plane = ones({1, 1, 3, 3}, DType::Float64);
  Tensor columns = F::unfold(plane, {2});
  EXPECT_EQ(columns.shape(), (IntList{1, 4, 4}));
  EXPECT_EQ(values_of(F::fold(columns, {3, 3}, {2})), (Values{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(NnMore, ChannelDropoutDropsWholeChannels) {
  manual_seed(7);
  Tensor y = F::feature_dropout(ones({4, 16, 3}), 0.5, true);
  Values v = values_of(y);
  for (size_t channel = 0; channel < 64; ++channel) {
    EXPECT_EQ(v[3 * channel], v[3 * channel + 1]);
    EXPECT_EQ(v[3 * channel], v[3 * channel + 2]);
    EXPECT_TRUE(v[3 * channel] == 0.0 || v[3 * channel] == 2.0);
  }
  EXPECT_EQ(values_of(F::dropout1d(ones({2, 3}), 0.5, false)), (Values(6, 1.0)));
  EXPECT_THROW_WITH(F::dropout1d(ones({2, 3, 4, 5}), 0.5), "dropout1d: Expected 2D or 3D input");
}

TEST(NnMore, RmsNormAndShapes) {
  Tensor x = tensor<double>({{3, 4}}, DType::Float64);  // mean square 12.5
  Values normed = values_of(F::rms_norm(x, {2}, {}, 0.0));
  EXPECT_NEAR(normed[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(normed[1], 4 / std::sqrt(12.5), 1e-15);
  EXPECT_EQ(F::unflatten(ones({2, 6}), 1, {3, -1}).shape(), (IntList{2, 3, 2}));
  Tensor channels = reshape(arange(0.0, 6.0, 1.0, DType::Float64), {1, 6, 1});
  EXPECT_EQ(values_of(F::channel_shuffle(channels, 2)), (Values{0, 3, 1, 4, 2, 5}));
}

TEST(NnMore, EmbeddingBagReducesEachBag) {
  Tensor weight = tensor<double>({{1, 10}, {2, 20}, {3, 30}}, DType::Float64);
  Tensor input = tensor<int64_t>({0, 1, 2, 2});
  Tensor offsets = tensor<int64_t>({0, 2, 2});  // bags {0, 1}, {}, {2, 2}
  F::EmbeddingBagOptions sum{.offsets = offsets, .mode = "sum"};
  EXPECT_EQ(values_of(F::embedding_bag(input, weight, sum)), (Values{3, 30, 0, 0, 6, 60}));
  F::EmbeddingBagOptions max{.offsets = offsets, .mode = "max", .padding_idx = 0};
  EXPECT_EQ(values_of(F::embedding_bag(input, weight, max)), (Values{2, 20, 0, 0, 3, 30}));
  F::EmbeddingBagOptions mean{.mode = "mean"};
  EXPECT_EQ(values_of(F::embedding_bag(reshape(input, {2, 2}), weight, mean)),
            (Values{1.5, 15, 3, 30}));
}

TEST(NnMore, EmbeddingRenormScalesOnlyTheNamedLongRows) {
  Tensor weight = tensor<double>({{3, 4}, {6, 8}, {0.3, 0.4}}, DType::Float64);
  F::embedding_renorm_(weight, tensor<int64_t>({1, 2, 1}), 1.0);
  Values w = values_of(weight);
  EXPECT_EQ((Values{w[0], w[1]}), (Values{3, 4}));  // not named
  EXPECT_NEAR(w[2], 0.6, 1e-7);                     // norm 10 -> 1 (within 1e-7)
  EXPECT_NEAR(w[3], 0.8, 1e-7);
  EXPECT_EQ((Values{w[4], w[5]}), (Values{0.3, 0.4}));  // already short
}

TEST(NnMore, Losses) {
  Tensor a = tensor<double>({1, 2}, DType::Float64), b = tensor<double>({2, 0}, DType::Float64);
  Tensor y = tensor<double>({1, -1}, DType::Float64);
  // max(0, -y (a - b) + 0.5) = {1.5, 2.5}
  EXPECT_EQ(values_of(F::margin_ranking_loss(a, b, y, 0.5, "none")), (Values{1.5, 2.5}));
  // a where y = 1, max(0, 1 - a) where y = -1.
  EXPECT_EQ(values_of(F::hinge_embedding_loss(a, y, 1.0, "none")), (Values{1, 0}));
  EXPECT_NEAR(F::soft_margin_loss(a, y, "sum").item().to_double(),
              std::log1p(std::exp(-1.0)) + std::log1p(std::exp(2.0)), 1e-14);
  // pairwise_distance: |(1 - 2 + 0, 2 - 0 + 0)| = sqrt(5).
  EXPECT_NEAR(F::pairwise_distance(a, b, 2.0, 0.0).item().to_double(), std::sqrt(5.0), 1e-15);
  // multi margin, one sample, label 0: mean over c != 0 of max(0, 1 - x0 + xc).
  Tensor scores = tensor<double>({{0.5, 1.0, -2.0}}, DType::Float64);
  EXPECT_NEAR(F::multi_margin_loss(scores, tensor<int64_t>({0})).item().to_double(), 1.5 / 3,
              1e-15);
  EXPECT_THROW_WITH(F::poisson_nll_loss(a, b, true, false, 1e-8, "avg"),
                    "avg is not a valid value for reduction");
}

TEST(NnMore, GaussianNllClampsVarianceButPassesItsGradient) {
  Tensor var = tensor<double>({1e-9}, DType::Float64);
  requires_grad_(var);
  Tensor x = zeros({1}, DType::Float64);
  Tensor loss = F::gaussian_nll_loss(x, x, var, false, 1e-6, "sum");
  EXPECT_NEAR(loss.item().to_double(), 0.5 * std::log(1e-6), 1e-12);
  backward(loss);
  EXPECT_NEAR(grad(var).item().to_double(), 0.5 / 1e-6, 1e-6);  // d/dv 0.5 log v at v = eps
}

}  // namespace
}  // namespace kiln::nn
