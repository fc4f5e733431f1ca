#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/random.h"

namespace kiln {
namespace {

TEST(Dropout, KeepsAboutOneMinusPAndScalesSurvivors) {
  manual_seed(3);
  const int64_t n = 100000;
  Tensor x = ones({n});
  auto outs = dispatch(op("dropout"), {x}, {{"p", 0.3}});
  auto y = outs[0].to_vector<float>();
  auto mask = outs[1].to_vector<bool>();
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += mask[size_t(i)];
    ASSERT_FLOAT_EQ(y[size_t(i)], mask[size_t(i)] ? 1.0f / 0.7f : 0.0f);
  }
  EXPECT_NEAR(double(kept) / n, 0.7, 0.01);
}

TEST(Dropout, SeedFixesTheMaskAndEvalIsIdentity) {
  Tensor x = randn({64});
  manual_seed(11);
  auto a = dropout(x, 0.5).to_vector<float>();
  manual_seed(11);
  EXPECT_EQ(dropout(x, 0.5).to_vector<float>(), a);
  EXPECT_TRUE(dropout(x, 0.5, /*train=*/false).is_same(x));
}

TEST(BatchNorm, TrainingUpdatesRunningStatistics) {
  Tensor x = tensor({{1.f, 10.f}, {3.f, 20.f}, {5.f, 30.f}});
  Tensor running_mean = zeros({2}), running_var = ones({2});
  uint64_t version = running_mean.version();
  batch_norm(x, {}, {}, running_mean, running_var, /*training=*/true, 0.5);
  // mean = (3, 20); unbiased var = (4, 100); new = 0.5 * old + 0.5 * batch
  EXPECT_EQ(running_mean.to_vector<float>(), (std::vector<float>{1.5f, 10.f}));
  EXPECT_EQ(running_var.to_vector<float>(), (std::vector<float>{2.5f, 50.5f}));
  EXPECT_GT(running_mean.version(), version);
}

TEST(LayerNorm, ReturnsMeanAndRstdForBackward) {
  Tensor x = tensor({{1.f, 3.f}, {2.f, 6.f}});
  auto outs =
      dispatch(op("layer_norm"), {x, Tensor(), Tensor()}, {{"normalized_shape", IntList{2}}});
  EXPECT_EQ(outs[1].shape(), (IntList{2, 1}));
  EXPECT_EQ(outs[1].to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  EXPECT_NEAR(outs[2].to_vector<float>()[0], 1.0 / std::sqrt(1.0 + 1e-5), 1e-6);
}

}  // namespace
}  // namespace kiln
