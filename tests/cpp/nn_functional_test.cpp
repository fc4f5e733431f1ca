// Losses: what the reference rows (nn_refs_test.cpp) cannot show — the
// errors bad arguments give, and a few values worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/random.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = nn::functional;

TEST(Loss, CrossEntropyOfAConfidentRightAnswerIsSmall) {
  Tensor logits = tensor({{10.f, 0.f, 0.f}, {0.f, 0.f, 10.f}});
  Tensor target = tensor({0, 2});
  EXPECT_NEAR(F::cross_entropy(logits, target).item<double>(), std::log(1 + 2 * std::exp(-10.0)),
              1e-6);
  // mean with ignore_index divides by the targets that count: one here.
  Tensor half_ignored = tensor({0, -100});
  EXPECT_NEAR(F::cross_entropy(logits, half_ignored).item<double>(),
              std::log(1 + 2 * std::exp(-10.0)), 1e-6);
}

TEST(Loss, IgnoredMinusInfinityGivesZeroNotNaN) {
  Tensor log_probs = tensor({{-INFINITY, 0.f}, {0.f, -INFINITY}});
  Tensor target = tensor({int64_t(0), int64_t(0)});
  Tensor loss = F::nll_loss(log_probs, target, {.ignore_index = 0, .reduction = "none"});
  EXPECT_EQ(loss.to_vector<float>(), (std::vector<float>{0.f, 0.f}));
}

TEST(Loss, BadReductionIsAValueError) {
  Tensor x = randn({2, 3});
  Error e = error_of([&] { F::mse_loss(x, x, "avg"); });
  EXPECT_EQ(e.kind(), ErrorKind::Value);
  EXPECT_TRUE(mentions(e, "mse_loss: avg is not a valid value for reduction")) << e.what();
  EXPECT_TRUE(mentions(error_of([] { nn::CrossEntropyLoss({.reduction = "max"}); }),
                       "CrossEntropyLoss: max"));
}

TEST(Loss, ClassTargetsAreCheckedAgainstTheInput) {
  Tensor x = randn({4, 3});
  Error e = error_of([&] { F::cross_entropy(x, tensor({0, 1, 2})); });
  EXPECT_TRUE(mentions(e, "expected a target of shape [4]")) << e.what();
  e = error_of([&] { F::nll_loss(x, tensor({0, 1, 2, 1}, DType::Int32)); });
  EXPECT_EQ(e.kind(), ErrorKind::Type);
  EXPECT_TRUE(mentions(e, "int64")) << e.what();
  e = error_of([&] { F::cross_entropy(x, tensor({0, 1, 2, 1}), {.weight = ones({4})}); });
  EXPECT_TRUE(mentions(e, "weight tensor should be defined either for all 3 classes")) << e.what();
  // An out-of-range class reaches gather, which names it.
  e = error_of([&] { F::cross_entropy(x, tensor({0, 1, 3, 1})); });
  EXPECT_TRUE(mentions(e, "3")) << e.what();
}

TEST(Loss, CrossEntropyOptionChecks) {
  Tensor x = randn({4, 3});
  Tensor probs = softmax(randn({4, 3}), 1);
  EXPECT_TRUE(mentions(error_of([&] { F::cross_entropy(x, probs, {.ignore_index = 1}); }),
                       "ignore_index is not supported for floating point target"));
  EXPECT_TRUE(mentions(error_of([&] {
                         F::cross_entropy(x, tensor({0, 1, 2, 1}), {.label_smoothing = 1.5});
                       }),
                       "label_smoothing must be between 0.0 and 1.0"));
  EXPECT_TRUE(mentions(error_of([&] {
                         F::cross_entropy(x, randn({4, 2}));
                       }),
                       "must have the input's shape [4, 3]"));
}

TEST(Loss, BCEWithLogitsNeedsMatchingShapes) {
  Tensor x = randn({4, 3});
  EXPECT_TRUE(mentions(error_of([&] { F::binary_cross_entropy_with_logits(x, randn({4})); }),
                       "target size ([4]) must be the same as input size ([4, 3])"));
}

TEST(Loss, ModulesKeepTheirClassWeightAsABuffer) {
  nn::CrossEntropyLoss loss({.weight = ones({3})});
  ASSERT_EQ(loss.state_dict().size(), 1u);
  EXPECT_EQ(loss.state_dict()[0].first, "weight");
  EXPECT_TRUE(nn::MSELoss().state_dict().empty());
  EXPECT_TRUE(nn::CrossEntropyLoss().state_dict().empty());
}

}  // namespace
}  // namespace kiln
