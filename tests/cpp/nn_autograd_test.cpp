// Gradients through nn: each loss's gradient w.r.t. its input against
// PyTorch's (the loss rows of gen_nn_refs.py), and a model's parameters
// receiving grads from backward. A test whose ops still lack a backward rule
// is skipped, naming the op, and runs once the rule lands.
#include <gtest/gtest.h>

#include <optional>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"
#include "nn_refs.h"
#include "op_refs.h"

namespace kiln {
namespace {

using nlohmann::json;
namespace F = nn::functional;

Tensor run_loss(const json& row, const Tensor& input) {
  const json& kw = row["kwargs"];
  Tensor target = tensor_from_json(row["target"]);
  Tensor weight = row.contains("weight") ? tensor_from_json(row["weight"]) : Tensor();
  Tensor pos_weight = row.contains("pos_weight") ? tensor_from_json(row["pos_weight"]) : Tensor();
  std::string reduction = kw.value("reduction", "mean");
  int64_t ignore_index = kw.value("ignore_index", int64_t(-100));
  const std::string fn = row["fn"];
  if (fn == "cross_entropy") {
    return F::cross_entropy(input, target,
                            {weight, ignore_index, reduction, kw.value("label_smoothing", 0.0)});
  }
  if (fn == "nll_loss") return F::nll_loss(input, target, {weight, ignore_index, reduction});
  if (fn == "mse_loss") return F::mse_loss(input, target, reduction);
  if (fn == "l1_loss") return F::l1_loss(input, target, reduction);
  return F::binary_cross_entropy_with_logits(input, target, {weight, pos_weight, reduction});
}

class LossGradVsTorch : public testing::TestWithParam<size_t> {};

TEST_P(LossGradVsTorch, InputGradMatches) {
  const json& row = nn_refs()["losses"][GetParam()];
  Tensor input = clone(tensor_from_json(row["input"]));
  requires_grad_(input);
  Tensor loss = run_loss(row, input);
  // PyTorch differentiated loss.sum(): a grad of ones over the loss.
  backward(loss, ones_like(loss));
  expect_matches(grad(input), row["input_grad"], 1e-4, 1e-6, "input grad");
}

INSTANTIATE_TEST_SUITE_P(Torch, LossGradVsTorch, testing::ValuesIn(nn_ref_rows("losses")),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(nn_refs()["losses"][info.param]["id"]);
                         });

TEST(ModuleGrad, EveryParameterGetsAGradAndZeroGradClearsThem) {
  manual_seed(0);
  nn::Sequential net(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Linear>(8, 3));
  Tensor x = randn({5, 4});
  Tensor labels = tensor({0, 2, 1, 1, 0});
  backward(F::cross_entropy(net(x), labels));
  for (const auto& [name, p] : net.named_parameters()) {
    Tensor g = grad(p);
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_EQ(g.shape(), p.shape()) << name;
  }
  net.zero_grad();
  for (const auto& [name, p] : net.named_parameters())
    EXPECT_FALSE(grad(p).defined()) << name;
}

TEST(ModuleGrad, BuffersAndNoGradForwardRecordNothing) {
  nn::BatchNorm1d bn(3);
  Tensor x = randn({4, 3});
  {
    NoGradGuard no_grad;
    Tensor y = bn(x);
    EXPECT_FALSE(y.requires_grad());
  }
  for (const Tensor& b : bn.buffers())
    EXPECT_FALSE(b.requires_grad());
  Tensor y = bn(x);
  EXPECT_TRUE(y.requires_grad());  // through weight and bias
}

}  // namespace
}  // namespace kiln
