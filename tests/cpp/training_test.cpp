// A whole training step (forward, loss, backward, optimizer step) allocates
// no more memory after the first: live bytes return to the same level after
// every step, so a long training run holds steady.
#include <gtest/gtest.h>

#include "kiln/core/allocator.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

template <typename Optimizer, typename Options>
void expect_flat_memory(Options options) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(10, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(16, 2));
  Optimizer optimizer(model->parameters(), options);
  Tensor x = randn({10, 10});
  Tensor target = randint(0, 2, {10});
  std::vector<int64_t> live_after_step;
  for (int step = 0; step < 6; ++step) {
    {
      Tensor loss = nn::functional::cross_entropy((*model)(x), target);
      optimizer.zero_grad();
      backward(loss);
      optimizer.step();
    }
    live_after_step.push_back(allocator_stats().live_bytes);
  }
  for (size_t step = 2; step < live_after_step.size(); ++step) {
    EXPECT_EQ(live_after_step[step], live_after_step[1]) << "step " << step;
  }
}

TEST(Training, SgdStepsAllocateNothingNewAfterTheFirst) {
  expect_flat_memory<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9});
}

TEST(Training, AdamStepsAllocateNothingNewAfterTheFirst) {
  expect_flat_memory<Adam>(AdamOptions{.lr = 1e-3});
}

}  // namespace
}  // namespace kiln
