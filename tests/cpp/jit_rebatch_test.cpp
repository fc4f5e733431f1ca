// Re-batching a traced graph: the same results as tracing at the new batch,
// and a clear refusal for graphs whose shapes depend on the batch otherwise.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/rebatch.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

TEST(Rebatch, LeNetTracedAtOneRunsAtSeventeen) {
  manual_seed(8);
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<nn::Sigmoid>(), std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(6 * 14 * 14, 10));
  CompiledFunction at_one = trace(*net, randn({1, 1, 28, 28}));
  EXPECT_EQ(batch_size_of(at_one.graph()), 1);
  std::shared_ptr<Graph> graph = rebatch(at_one.graph(), 17);
  EXPECT_EQ(to_static(graph->outputs()[0]->shape()), (IntList{17, 10}));
  CompiledFunction at_seventeen(graph, 1);
  Tensor x = randn({17, 1, 28, 28});
  EXPECT_TRUE(bitwise_equal(at_seventeen({x})[0], trace(*net, x)({x})[0]));
  EXPECT_EQ(graph->params()[0]->data().data_ptr(), at_one.graph().params()[0]->data().data_ptr());
}

TEST(Rebatch, ShapesThatDependOnTheBatchAreRefused) {
  auto batch_last = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(transpose(in[0], 0, 1))};
  };
  CompiledFunction traced = trace(batch_last, {randn({2, 3})});
  EXPECT_THROW_WITH(rebatch(traced.graph(), 4), "is f32[3, 2] at batch 2 but f32[3, 4] at batch 4");
  auto fixed_reshape = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(reshape(in[0], {1, -1}))};
  };
  EXPECT_THROW_WITH(rebatch(trace(fixed_reshape, {randn({2, 3})}).graph(), 4),
                    "cannot run %0 = view(...) at batch 4 (traced at 2)");
  auto hard_reshape = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{reshape(in[0], {2, 3})};
  };
  EXPECT_THROW_WITH(rebatch(trace(hard_reshape, {randn({1, 6})}).graph(), 4),
                    "cannot run %0 = view(...) at batch 4 (traced at 1)");
  EXPECT_THROW_WITH(rebatch(traced.graph(), 0), "must be positive");
  auto two_batches = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + sum(in[1])};
  };
  EXPECT_THROW_WITH(batch_size_of(trace(two_batches, {randn({2}), randn({3})}).graph()),
                    "disagree on the batch size (2 and 3)");
}

}  // namespace
}  // namespace kiln::jit
