// jit::differentiate on graphs written as IR text: where the cut falls, what
// is saved, and that building a backward changes nothing the caller sees.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/trace/autodiff.h"

namespace kiln::jit {
namespace {

std::shared_ptr<Graph> bound(std::string_view text) {
  std::shared_ptr<Graph> g = parse_graph(text);
  for (Value* p : g->params()) {
    Tensor t = randn(p->shape());
    requires_grad_(t);
    p->set_data(t);
  }
  return g;
}

TEST(JitAutodiff, SavesOnlyWhatTheBackwardReads) {
  auto g = bound(R"(graph(%x : f32[4, 3]) {
  %w1 : f32[5, 3] = param
  %w2 : f32[2, 5] = param
  %0 : f32[4, 5] = linear(%x, %w1)
  %1 : f32[4, 5] = relu(%0)
  %2 : f32[4, 2] = linear(%1, %w2)
  %3 : f32[4, 2] = tanh(%2)
  return (%3)
})");
  Tensor x = randn({4, 3});
  DifferentiatedGraph d = differentiate(*g, 1, {&x, 1}, {false}, {true, true});
  // Saved: relu's output (its grad rule and w2's gradient read it), tanh's
  // output (its grad rule reads it) and the input x (w1's gradient).
  ASSERT_EQ(d.saved.size(), 3u);
  EXPECT_EQ(d.forward->outputs().size(), 3u);  // tanh's output doubles as a saved value
  std::string backward = to_text(*d.backward);
  EXPECT_EQ(backward.find("linear("), std::string::npos) << backward;
  EXPECT_EQ(backward.find("= relu("), std::string::npos) << backward;
  EXPECT_NE(backward.find("%grad_out0 : f32[4, 2]"), std::string::npos) << backward;
  ASSERT_EQ(d.targets.size(), 2u);
  EXPECT_EQ(d.targets[0].param, "w1");
  EXPECT_EQ(d.targets[1].param, "w2");
  EXPECT_EQ(d.backward->params().size(), 1u);  // w2, for the gradient of relu's output
}

TEST(JitAutodiff, UnusedTargetsAndIntegerOutputsGetNoGradient) {
  auto g = bound(R"(graph(%x : f32[4, 3]) {
  %w : f32[3] = param
  %unused : f32[3] = param
  %0 : f32[4, 3] = mul(%x, %w)
  %1 : i64[4] = argmax(%0) {dim=1}
  return (%0, %1)
})");
  Tensor x = randn({4, 3});
  DifferentiatedGraph d = differentiate(*g, 2, {&x, 1}, {true}, {true, true});
  ASSERT_EQ(d.grad_outputs, std::vector<size_t>{0});
  ASSERT_EQ(d.targets.size(), 2u);  // w and x; `unused` has none
  EXPECT_EQ(d.targets[0].param, "w");
  EXPECT_EQ(d.targets[1].kind, ValueKind::Input);
}

TEST(JitAutodiff, BuildingTheBackwardDrawsNoRandomNumbersAndWritesNoState) {
  auto g = bound(R"(graph(%x : f32[8, 4]) {
  %w : f32[4] = param
  %0 : f32[8, 4] = mul(%x, %w)
  %1 : f32[8, 4], %2 : bool[8, 4] = dropout(%0) {p=0.5, train=true}
  return (%1)
})");
  Tensor w_before = clone(g->find_param("w")->data());
  manual_seed(5);
  Tensor expected = rand({3});
  manual_seed(5);
  Tensor x = randn({8, 4});
  manual_seed(5);
  DifferentiatedGraph d = differentiate(*g, 1, {&x, 1}, {false}, {true});
  EXPECT_TRUE(bitwise_equal(rand({3}), expected));  // the stream is where it was
  EXPECT_TRUE(bitwise_equal(g->find_param("w")->data(), w_before));
  // The mask crosses the cut: dropout runs once, in the forward.
  EXPECT_NE(to_text(*d.forward).find("dropout("), std::string::npos);
  EXPECT_EQ(to_text(*d.backward).find("dropout("), std::string::npos);
}

}  // namespace
}  // namespace kiln::jit
