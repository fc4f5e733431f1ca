// The C++ modules of conv_layers.h, resample_layers.h and normalization.h
// (GroupNorm, InstanceNorm): shapes, what their forwards compute in terms
// of the functions (which the Python tests check against PyTorch), running
// statistics and errors.
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/conv_layers.h"
#include "kiln/nn/normalization.h"
#include "kiln/nn/resample_layers.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::nn {
namespace {

namespace F = functional;

void expect_near(const Tensor& a, const Tensor& b, double tolerance) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], y[i], tolerance) << "at " << i;
}

TEST(GroupNormModule, NormalizesEachGroupThenScales) {
  GroupNorm norm(2, 4);
  Tensor x = randn({3, 4, 5});
  Tensor y = norm.forward(x);
  expect_near(y, F::group_norm(x, 2), 1e-6);
  // Each (sample, group) of 2 channels x 5 values: mean 0, biased variance ~1.
  Tensor grouped = reshape(y, IntList{3, 2, 10});
  expect_near(mean(grouped, {2}), zeros({3, 2}), 1e-5);
  expect_near(var(grouped, {2}, 0), ones({3, 2}), 1e-3);
  EXPECT_EQ(norm.extra_repr(), "2, 4, eps=1e-05, affine=True, bias=True");
  EXPECT_THROW_WITH(GroupNorm(3, 4), "num_channels (4) must be divisible by num_groups (3)");
}

TEST(InstanceNormModule, TracksRunningStatsInTrainingAndUsesThemInEval) {
  InstanceNorm1d norm(3, 1e-5, 0.5, /*affine=*/false, /*track_running_stats=*/true);
  Tensor x = randn({2, 3, 6});
  Tensor y = norm.forward(x);
  expect_near(y, F::instance_norm(x), 1e-6);
  // running = 0.5 * initial + 0.5 * the batch mean of the per-instance statistics.
  expect_near(norm.running_mean, mean(mean(x, {2}), {0}) * 0.5, 1e-6);
  expect_near(norm.running_var, mean(var(x, {2}), {0}) * 0.5 + 0.5, 1e-6);
  EXPECT_EQ(norm.num_batches_tracked.item<int64_t>(), 0);  // never counted, as in PyTorch
  norm.eval();
  Tensor expected = (x - reshape(norm.running_mean, IntList{3, 1})) /
                    sqrt(reshape(norm.running_var, IntList{3, 1}) + 1e-5);
  expect_near(norm.forward(x), expected, 1e-5);
  // Unbatched input is one sample.
  expect_near(norm.forward(select(x, 0, 1)), select(expected, 0, 1), 1e-5);
}

TEST(InstanceNormModule, ChecksDimsAndFeatures) {
  InstanceNorm2d norm(3, 1e-5, 0.1, /*affine=*/true);
  EXPECT_EQ(norm.weight.shape(), (IntList{3}));
  EXPECT_THROW_WITH(norm.forward(ones({3, 4})), "expected 3D or 4D input (got 2D");
  EXPECT_THROW_WITH(norm.forward(ones({1, 2, 4, 4})),
                    "expected input's size at dim=1 to match num_features (3), but got: 2");
  EXPECT_THROW_WITH(F::instance_norm(ones({2, 3, 1})), "more than 1 spatial element");
}

TEST(ConvModules, ShapesPaddingModesAndOutputSize) {
  Conv1d same(4, 6, 4, 1, std::string("same"), 1, 2, true, "reflect");
  EXPECT_EQ(same.forward(randn({2, 4, 9})).shape(), (IntList{2, 6, 9}));
  EXPECT_EQ(same.extra_repr(),
            "4, 6, kernel_size=(4,), stride=(1,), padding=same, groups=2, padding_mode=reflect");
  Tensor x = randn({2, 4, 9});
  expect_near(F::conv1d(x, same.weight, same.bias, {1}, std::string("same"), {1}, 2),
              F::conv1d(pad(x, {1, 2}), same.weight, same.bias, {1}, IntList{0}, {1}, 2), 1e-5);
  // padding_mode pads with F.pad first: the odd element on the right.
  expect_near(same.forward(x),
              F::conv1d(pad(x, {1, 2}, "reflect"), same.weight, same.bias, {1}, IntList{0}, {1}, 2),
              1e-5);
  ConvTranspose2d up(4, 3, {3}, {2});
  EXPECT_EQ(up.weight.shape(), (IntList{4, 3, 3, 3}));
  EXPECT_EQ(up.forward(randn({1, 4, 5, 5}), {12, 11}).shape(), (IntList{1, 3, 12, 11}));
  EXPECT_THROW_WITH(up.forward(randn({1, 4, 5, 5}), {13, 11}),
                    "valid sizes range from [11, 11] to [12, 12]");
  EXPECT_THROW_WITH(ConvTranspose1d(4, 3, 3, 1, 0, 0, 1, true, 1, "reflect"),
                    "Only \"zeros\" padding mode is supported for ConvTranspose1d");
}

TEST(ResampleModules, UpsampleAndPixelShuffleRoundTrip) {
  Upsample up({.scale_factor = std::vector<double>{2.0, 2.0}});
  Tensor x = randn({1, 2, 3, 3});
  EXPECT_EQ(up.forward(x).shape(), (IntList{1, 2, 6, 6}));
  EXPECT_EQ(up.extra_repr(), "scale_factor=(2.0, 2.0), mode='nearest'");
  PixelShuffle shuffle(2);
  PixelUnshuffle unshuffle(2);
  Tensor y = randn({2, 8, 3, 5});
  EXPECT_EQ(unshuffle.forward(shuffle.forward(y)).to_vector<float>(), y.to_vector<float>());
}

}  // namespace
}  // namespace kiln::nn
