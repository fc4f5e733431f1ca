// jit::differentiate on graphs written as IR text: where the cut falls, what
// is saved, and that building a backward changes nothing the caller sees.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/autodiff.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/nn/container.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"
#include "kiln/optim/sgd.h"

namespace kiln::jit {
namespace {

std::shared_ptr<Graph> bound(std::string_view text) {
  std::shared_ptr<Graph> g = parse_graph(text);
  for (Value* p : g->params()) {
    Tensor t = randn(to_static(p->shape()));
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

namespace kiln::jit {
namespace {

// A whole training step traced from C++ with bind_outside_state (what
// Python's kiln.compile does): five compiled steps of SGD with momentum
// leave the weights, gradients and momentum buffers eager steps leave.
TEST(JitAutodiff, CompiledTrainingStepEqualsEagerSteps) {
  struct Run {
    std::vector<Tensor> params, grads, buffers;
    std::vector<float> losses;
  };
  auto train = [](bool compiled) {
    manual_seed(0);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(10, 5),
                                                  std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(5, 2));
    SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    auto step = [&](const std::vector<Tensor>& in) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(in[0]), in[1]);
      backward(loss);
      opt.step();
      return std::vector<Tensor>{loss};
    };
    manual_seed(1);
    Run run;
    CompiledFunction f;
    for (int i = 0; i < 5; ++i) {
      std::vector<Tensor> batch = {randn({10, 10}), randint(0, 2, {10})};
      Tensor loss;
      if (compiled && i == 0) {  // records while taking the first step
        TraceRun first = trace_and_run(step, batch, {.bind_outside_state = true});
        f = first.compiled;
        loss = first.outputs[0];
      } else {
        loss = compiled ? f(batch)[0] : step(batch)[0];
      }
      run.losses.push_back(loss.item<float>());
    }
    for (const Tensor& p : model->parameters()) {
      run.params.push_back(clone(detach(p)));
      run.grads.push_back(clone(grad(p)));
    }
    for (int64_t i = 0; i < 4; ++i)
      run.buffers.push_back(opt.state(i).buffers.at("momentum_buffer"));
    EXPECT_EQ(opt.state(0).step, 5);
    return run;
  };
  Run eager = train(false), compiled = train(true);
  EXPECT_EQ(compiled.losses, eager.losses);
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(compiled.params[i], eager.params[i])) << "parameter " << i;
    EXPECT_TRUE(bitwise_equal(compiled.grads[i], eager.grads[i])) << "grad " << i;
    EXPECT_TRUE(bitwise_equal(compiled.buffers[i], eager.buffers[i])) << "buffer " << i;
  }
}

// Whether a graph can be differentiated is decided up front, from the op
// table, not by catching whatever error building the backward throws.
TEST(JitAutodiff, SaysWhichOpHasNoGradRule) {
  std::shared_ptr<Graph> g = parse_graph(R"(graph(%g : f32[1, 2, 1, 1], %x : f32[1, 2, 3, 3]) {
  %d = adaptive_avg_pool2d_backward(%g, %x)
  %m = eq(%x, %x)
  %y = mul(%d, %x)
  return (%y, %m)
})");
  EXPECT_EQ(why_not_differentiable(*g, {true, false}, {}),
            "op 'adaptive_avg_pool2d_backward' has no grad rule");
  EXPECT_EQ(why_not_differentiable(*g, {false, true}, {}),
            "op 'adaptive_avg_pool2d_backward' has no grad rule");
  EXPECT_EQ(why_not_differentiable(*g, {false, false}, {}), "");

  // eq has no rule either, but its bool output carries no gradient.
  std::shared_ptr<Graph> masks = parse_graph(R"(graph(%x : f32[3]) {
  %m = eq(%x, %x)
  %y = where(%m, %x, %x)
  return (%y)
})");
  EXPECT_EQ(why_not_differentiable(*masks, {true}, {}), "");
}

// Such a graph gets no grad plan: its calls replay through dispatch, and
// eager autograd names the op when a backward reaches it.
TEST(JitAutodiff, AGraphWithoutAGradRuleReplaysThroughDispatch) {
  std::shared_ptr<Graph> g = parse_graph(R"(graph(%g : f32[1, 2, 1, 1], %x : f32[1, 2, 3, 3]) {
  %d = adaptive_avg_pool2d_backward(%g, %x)
  return (%d)
})");
  CompiledFunction f(g, 1);
  Tensor grad_in = randn({1, 2, 1, 1});
  requires_grad_(grad_in);
  std::vector<Tensor> inputs = {grad_in, randn({1, 2, 3, 3})};
  EXPECT_EQ(f.grad_plan(inputs), nullptr);
  EXPECT_TRUE(f.replays_through_dispatch(inputs));
  Tensor out = f(inputs)[0];
  Error e = error_of([&] { backward(sum(out)); });
  EXPECT_TRUE(mentions(e, "adaptive_avg_pool2d_backward")) << e.what();
}

}  // namespace
}  // namespace kiln::jit
