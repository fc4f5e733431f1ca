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
#include "kiln/jit/trace/trace.h"
#include "kiln/nn/container.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers.h"
#include "kiln/ops/copy.h"
#include "kiln/optim/sgd.h"

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
        TraceRun first = trace_and_run(step, batch, {}, {.bind_outside_state = true});
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

}  // namespace
}  // namespace kiln::jit
