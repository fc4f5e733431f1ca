// Post-accumulate-grad hooks and end-of-backward callbacks (hooks.h): what
// DistributedDataParallel builds its overlapped all-reduce on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/hooks.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) {
  return to(t, DType::Float64).to_vector<double>();
}

TEST(PostAccumulateGradHook, SeesTheAccumulatedGradOncePerBackward) {
  Tensor w = requires_grad_(tensor({1.0f, -2.0f}));
  set_grad(w, tensor({10.0f, 10.0f}));
  std::vector<std::vector<double>> seen;
  register_post_accumulate_grad_hook(
      w, [&](const Tensor& leaf) { seen.push_back(values(grad(leaf))); });
  // Two uses of w: the engine sums them, then accumulates once.
  backward(sum(w * 2.0) + sum(w * w));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{14.0, 8.0}));  // 10 + 2 + 2w
}

TEST(PostAccumulateGradHook, RemovedHooksStopAndGradWritesNone) {
  Tensor w = requires_grad_(tensor({1.0f}));
  int calls = 0;
  HookHandle handle = register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; });
  kiln::grad({sum(w * 3.0)}, {w});  // writes no .grad, so runs no hook
  EXPECT_EQ(calls, 0);
  backward(sum(w * 3.0));
  handle.remove();
  backward(sum(w * 3.0));
  EXPECT_EQ(calls, 1);
}

TEST(PostAccumulateGradHook, RefusesNonLeavesAndTensorsWithoutGrad) {
  Tensor w = requires_grad_(tensor({1.0f}));
  EXPECT_THROW(register_post_accumulate_grad_hook(w * 2.0, [](const Tensor&) {}), Error);
  EXPECT_THROW(register_post_accumulate_grad_hook(tensor({1.0f}), [](const Tensor&) {}), Error);
}

TEST(QueueCallback, RunsAfterTheWholeWalkInTheOrderQueued) {
  Tensor a = requires_grad_(tensor({1.0f}));
  Tensor b = requires_grad_(tensor({2.0f}));
  std::vector<std::string> events;
  for (auto [leaf, name] : {std::pair{a, std::string("a")}, std::pair{b, std::string("b")}}) {
    register_post_accumulate_grad_hook(leaf, [&events, name](const Tensor&) {
      events.push_back(name);
      queue_callback([&events, name] {
        events.push_back("after " + name);
        if (name == "a") queue_callback([&events] { events.push_back("queued by a callback"); });
      });
    });
  }
  backward(sum(a * b));
  ASSERT_EQ(events.size(), 5u);
  const std::string first = events[0], second = events[1];
  EXPECT_EQ(events, (std::vector<std::string>{first, second, "after " + first, "after " + second,
                                              "queued by a callback"}));
}

TEST(QueueCallback, OutsideBackwardIsAnErrorAndAThrowingCallbackReachesTheCaller) {
  EXPECT_THROW(queue_callback([] {}), Error);
  Tensor w = requires_grad_(tensor({1.0f}));
  register_post_accumulate_grad_hook(
      w, [](const Tensor&) { queue_callback([] { KILN_CHECK(false, "from the callback"); }); });
  EXPECT_THROW(backward(sum(w * 2.0)), Error);
  EXPECT_THROW(queue_callback([] {}), Error);  // the failed backward left nothing behind
}

}  // namespace
}  // namespace kiln
