// nn::init: PyTorch's formulas, checked through the distributions they draw
// (bounds, mean and standard deviation over large tensors), not exact values.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/init.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace init = nn::init;

struct Moments {
  double min, max, mean, std;
};

Moments moments_of(const Tensor& t) {
  return {amin(t).item<double>(), amax(t).item<double>(), mean(t).item<double>(),
          kiln::std(t).item<double>()};
}

TEST(Init, UniformStaysInBoundsWithTheRightMoments) {
  manual_seed(0);
  Tensor t = empty({200, 500});
  init::uniform_(t, -2.0, 4.0);
  Moments m = moments_of(t);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LT(m.max, 4.0);
  EXPECT_NEAR(m.mean, 1.0, 0.02);
  EXPECT_NEAR(m.std, 6.0 / std::sqrt(12.0), 0.02);
}

TEST(Init, NormalHasTheRequestedMeanAndStd) {
  manual_seed(0);
  Tensor t = empty({100000}, DType::Float64);
  init::normal_(t, 3.0, 0.5);
  Moments m = moments_of(t);
  EXPECT_NEAR(m.mean, 3.0, 0.01);
  EXPECT_NEAR(m.std, 0.5, 0.01);
}

TEST(Init, ConstantsAndStridedViews) {
  Tensor t = empty({3, 4});
  EXPECT_EQ(init::constant_(t, 2.5).to_vector<float>(), std::vector<float>(12, 2.5f));
  EXPECT_EQ(init::zeros_(t).to_vector<float>(), std::vector<float>(12, 0.f));
  EXPECT_EQ(init::ones_(t).to_vector<float>(), std::vector<float>(12, 1.f));
  // A transposed view is filled through its strides, leaving nothing out.
  Tensor base = zeros({50, 40});
  init::uniform_(transpose(base, 0, 1), 1.0, 2.0);
  EXPECT_GE(amin(base).item<double>(), 1.0);
}

TEST(Init, AnExplicitGeneratorReplaysItsStream) {
  Generator a(42), b(42);
  Tensor x = empty({64}), y = empty({64});
  init::normal_(x, 0.0, 1.0, &a);
  init::normal_(y, 0.0, 1.0, &b);
  EXPECT_EQ(x.to_vector<float>(), y.to_vector<float>());
}

TEST(Init, FanInAndFanOut) {
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({5, 3})), std::make_pair(3L, 5L));
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 2})), std::make_pair(24L, 48L));
  EXPECT_TRUE(mentions(error_of([] { init::calculate_fan_in_and_fan_out(empty({5})); }),
                       "fewer than 2 dimensions"));
}

TEST(Init, GainsAreTorchs) {
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_EQ(error_of([] { init::calculate_gain("swish"); }).kind(), ErrorKind::Value);
}

TEST(Init, KaimingUsesTheGainOverTheChosenFan) {
  manual_seed(1);
  Tensor w = empty({300, 200});  // fan_in 200, fan_out 300
  init::kaiming_uniform_(w, 0.0, "fan_in", "relu");
  double bound = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(200.0);
  Moments m = moments_of(w);
  EXPECT_GE(m.min, -bound);
  EXPECT_LE(m.max, bound);
  EXPECT_NEAR(m.std, bound / std::sqrt(3.0), 0.01 * bound);

  init::kaiming_normal_(w, 0.0, "fan_out", "relu");
  EXPECT_NEAR(moments_of(w).std, std::sqrt(2.0 / 300.0), 0.002);
  EXPECT_NEAR(moments_of(w).mean, 0.0, 0.002);
  EXPECT_TRUE(mentions(error_of([&] { init::kaiming_normal_(w, 0.0, "fan_avg"); }),
                       "mode fan_avg not supported"));
}

TEST(Init, XavierUsesBothFans) {
  manual_seed(2);
  Tensor w = empty({250, 150});
  init::xavier_uniform_(w, 2.0);
  double std = 2.0 * std::sqrt(2.0 / 400.0);
  Moments m = moments_of(w);
  EXPECT_LE(m.max, std::sqrt(3.0) * std);
  EXPECT_GE(m.min, -std::sqrt(3.0) * std);
  EXPECT_NEAR(m.std, std, 0.01 * std);
  init::xavier_normal_(w);
  EXPECT_NEAR(moments_of(w).std, std::sqrt(2.0 / 400.0), 0.01 * std);
}

TEST(Init, RejectsIntegerTensors) {
  Tensor t = zeros({3, 3}, DType::Int64);
  EXPECT_EQ(error_of([&] { init::normal_(t); }).kind(), ErrorKind::Type);
  EXPECT_EQ(error_of([&] { init::kaiming_uniform_(t); }).kind(), ErrorKind::Type);
}

}  // namespace
}  // namespace kiln
