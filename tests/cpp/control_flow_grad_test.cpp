// Gradients through cond, scan and a bounded while_loop when they run as
// one unit (autograd/control_flow_grad.h): replayed from a compiled graph
// (whose backward graph holds control flow too), and recorded inside a
// compiled training step (forward, backward() and the optimizer's step in
// one trace). Each is checked against eager autograd of the same code.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/rnn_modules.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "kiln/optim/sgd.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

bool near(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (a.shape() != b.shape()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::abs(x[i] - y[i]) > 1e-6 + 1e-5 * std::abs(y[i])) return false;
  }
  return true;
}

// d(sum of outputs * seeds)/d(inputs), eagerly and through the compiled
// function (whose backward graph holds control flow too).
void expect_same_gradients(const TracedFn& fn, const std::vector<Tensor>& example,
                           const std::vector<std::vector<Tensor>>& calls) {
  CompiledFunction compiled = trace(fn, example);
  for (size_t k = 0; k < calls.size(); ++k) {
    std::vector<Tensor> eager_in, compiled_in;
    for (const Tensor& t : calls[k]) {
      eager_in.push_back(requires_grad_(clone(t), is_floating(t.dtype())));
      compiled_in.push_back(requires_grad_(clone(t), is_floating(t.dtype())));
    }
    auto loss = [](const std::vector<Tensor>& outs) {
      Tensor total = scalar_tensor(0.0, DType::Float64);
      for (size_t i = 0; i < outs.size(); ++i)
        total = add(total, sum(mul(to(outs[i], DType::Float64), double(i + 1))));
      return total;
    };
    std::vector<Tensor> wrt_eager, wrt_compiled;
    for (size_t i = 0; i < eager_in.size(); ++i) {
      if (!is_floating(eager_in[i].dtype())) continue;
      wrt_eager.push_back(eager_in[i]);
      wrt_compiled.push_back(compiled_in[i]);
    }
    std::vector<Tensor> want = grad({loss(fn(eager_in))}, wrt_eager, {}, false, false, true);
    std::vector<Tensor> got =
        grad({loss(compiled(compiled_in))}, wrt_compiled, {}, false, false, true);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(got[i].defined()) << "call " << k << " input " << i;
      Tensor expected = want[i].defined() ? want[i] : zeros_like(got[i]);
      EXPECT_TRUE(near(got[i], expected)) << "call " << k << " grad " << i << "\n"
                                          << got[i] << "\n"
                                          << expected;
    }
  }
}

TEST(JitControlFlowGrad, ThroughCondOnEachBranch) {
  auto fn = [](const Tensors& in) {
    Tensor w = in[1];
    return cond(
        gt(sum(in[0]), 0.0), [&](const Tensors& v) { return Tensors{mul(mul(v[0], v[0]), w)}; },
        [&](const Tensors& v) { return Tensors{sin(add(v[0], w))}; }, {in[0]});
  };
  Tensor x = tensor<float>({1, 2, 3}), w = tensor<float>({0.5f, -1, 2});
  expect_same_gradients(fn, {x, w}, {{x, w}, {neg(x), w}});
}

TEST(JitControlFlowGrad, ThroughScanOverStepsAndCapturedWeights) {
  auto fn = [](const Tensors& in) {
    Tensor w = in[2];
    ScanResult r = scan(
        [&](const Tensors& carry, const Tensors& x) {
          Tensor h = tanh(add(matmul(carry[0], w), x[0]));
          return std::pair<Tensors, Tensors>{{h}, {mul(h, 2.0)}};
        },
        {in[0]}, {in[1]});
    return Tensors{r.carry[0], r.ys[0]};
  };
  Tensor h0 = randn({2, 3}, DType::Float64), xs = randn({4, 2, 3}, DType::Float64);
  Tensor w = mul(randn({3, 3}, DType::Float64), 0.5);
  expect_same_gradients(fn, {h0, xs, w}, {{h0, xs, w}, {randn({2, 3}, DType::Float64), xs, w}});
}

TEST(JitControlFlowGrad, ThroughReverseScanAndStaticForiLoop) {
  auto fn = [](const Tensors& in) {
    ScanResult r = scan(
        [](const Tensors& carry, const Tensors& x) {
          Tensor next = add(mul(carry[0], x[0]), 1.0);
          return std::pair<Tensors, Tensors>{{next}, {next}};
        },
        {in[0]}, {in[1]}, /*reverse=*/true);
    Tensors looped = fori_loop(
        1, 4,
        [](const Tensor& i, const Tensors& v) { return Tensors{mul(v[0], to(i, DType::Float64))}; },
        {r.carry[0]});
    return Tensors{looped[0], r.ys[0]};
  };
  Tensor c = tensor<double>({0.5, 2}), xs = tensor<double>({{1, 2}, {3, -1}, {0.5, 0.25}});
  expect_same_gradients(fn, {c, xs}, {{c, xs}});
}

// The loop's trip count depends on the input: 0, some, and exactly the bound.
Tensors grow_until_large(const Tensors& in) {
  Tensor w = in[1];
  return while_loop(
      [](const Tensors& v) { return lt(sum(abs(v[0])), 6.0); },
      [&](const Tensors& v) {
        return Tensors{add(tanh(matmul(v[0], w)), mul(v[0], 1.5)), add(v[1], int64_t(1))};
      },
      {in[0], zeros({}, DType::Int64)}, /*max_iterations=*/7);
}

TEST(JitControlFlowGrad, ThroughWhileLoopGivenMaxIterations) {
  Tensor x = tensor<double>({{0.5, -0.25}}), w = tensor<double>({{0.5, 0.1}, {-0.3, 0.8}});
  for (double scale : {0.05, 1.0, 10.0}) {  // 7 iterations (the bound), 3, none
    Tensor start = mul(x, scale);
    Tensors run = grow_until_large({start, w});
    SCOPED_TRACE("iterations " + std::to_string(run[1].item<int64_t>()));
    expect_same_gradients(grow_until_large, {x, w}, {{start, w}});
  }
}

TEST(JitControlFlowGrad, WhileLoopWithoutABoundSaysHowToGetGradients) {
  auto fn = [](const Tensors& in) {
    return while_loop([](const Tensors& v) { return lt(sum(v[0]), 10.0); },
                      [](const Tensors& v) { return Tensors{mul(v[0], 2.0)}; }, {in[0]});
  };
  Tensor x = tensor<float>({1, 1});
  CompiledFunction compiled = trace(fn, {x});
  Tensor leaf = requires_grad_(clone(x));
  Tensor out = compiled({leaf})[0];  // the forward runs; the backward cannot
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{8, 8}));
  EXPECT_THROW_WITH(backward(sum(out)), "no gradient without max_iterations");
}

// grad() with respect to an intermediate runs only what leads to it: the
// history below stays for a later backward.
TEST(AutogradEngine, GradOfAnIntermediateLeavesTheHistoryBelowIt) {
  Tensor x = requires_grad_(tensor<float>({1, 2, 3}));
  Tensor y = mul(x, x);
  Tensor z = mul(y, 3.0);
  Tensors dy = grad({sum(z)}, {y});
  EXPECT_EQ(dy[0].to_vector<float>(), (std::vector<float>{3, 3, 3}));
  backward(sum(y));  // x*x's saved inputs are still there
  EXPECT_EQ(kiln::grad(x).to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

// A compiled training step (trace_and_run with bind_outside_state: what
// Python's kiln.compile does) of a model whose forward holds control flow
// leaves the weights and gradients eager steps leave.
struct TrainRun {
  std::vector<float> losses;
  std::vector<Tensor> params, grads;
};

void expect_same_training(const TrainRun& eager, const TrainRun& compiled) {
  ASSERT_EQ(eager.losses.size(), compiled.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i)
    EXPECT_NEAR(compiled.losses[i], eager.losses[i], 1e-5 * std::abs(eager.losses[i]) + 1e-6);
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(near(compiled.grads[i], eager.grads[i])) << "grad " << i << "\n"
                                                         << compiled.grads[i] << "\n"
                                                         << eager.grads[i];
    EXPECT_TRUE(near(compiled.params[i], eager.params[i])) << "parameter " << i;
  }
}

template <class Forward>
TrainRun train(bool compiled, nn::Module& model, Forward forward, const Tensor& x,
               const Tensor& target) {
  SGD opt(model.parameters(), {.lr = 0.05});
  auto step = [&](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = mean(mul(sub(forward(in[0]), in[1]), sub(forward(in[0]), in[1])));
    backward(loss);
    opt.step();
    return std::vector<Tensor>{loss};
  };
  TrainRun run;
  CompiledFunction f;
  for (int i = 0; i < 4; ++i) {
    Tensor input = mul(x, 1.0 - 0.5 * i);  // other inputs, other branches and trip counts
    Tensor loss;
    if (compiled && i == 0) {  // records while taking the first step
      TraceRun first = trace_and_run(step, {input, target}, {.bind_outside_state = true});
      f = first.compiled;
      loss = first.outputs[0];
    } else {
      loss = compiled ? f({input, target})[0] : step({input, target})[0];
    }
    run.losses.push_back(loss.item<float>());
  }
  for (const Tensor& p : model.parameters()) {
    run.params.push_back(clone(detach(p)));
    run.grads.push_back(clone(kiln::grad(p)));
  }
  return run;
}

TEST(JitControlFlowGrad, CompiledTrainingStepOfAnLstm) {
  auto run = [](bool compiled) {
    manual_seed(0);
    nn::LSTM lstm(3, 4, {.num_layers = 2, .batch_first = true});
    manual_seed(1);
    Tensor x = randn({2, 5, 3}), target = randn({2, 5, 4});
    return train(
        compiled, lstm, [&](const Tensor& in) { return lstm.forward(in); }, x, target);
  };
  expect_same_training(run(false), run(true));
}

TEST(JitControlFlowGrad, CompiledTrainingStepThroughCondAndBoundedWhileLoop) {
  auto run = [](bool compiled) {
    manual_seed(0);
    nn::Linear fc(3, 3);
    manual_seed(1);
    Tensor x = randn({2, 3}), target = randn({2, 3});
    auto forward = [&](const Tensor& in) {
      Tensor h = cond(
          gt(sum(in), 0.0), [&](const Tensors& v) { return Tensors{tanh(fc.forward(v[0]))}; },
          [&](const Tensors& v) { return Tensors{mul(fc.forward(v[0]), 0.5)}; }, {in})[0];
      return while_loop([](const Tensors& v) { return lt(sum(abs(v[0])), 4.0); },
                        [&](const Tensors& v) {
                          return Tensors{add(mul(fc.forward(v[0]), 0.1), mul(v[0], 2.0))};
                        },
                        {h}, /*max_iterations=*/40)[0];
    };
    return train(compiled, fc, forward, x, target);
  };
  expect_same_training(run(false), run(true));
}

}  // namespace
}  // namespace kiln::jit
