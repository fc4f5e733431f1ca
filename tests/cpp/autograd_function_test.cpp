// Custom autograd functions (function_node.h) and tensor hooks (hooks.h):
// gradients a user's backward computes, what the engine checks of them, saved
// tensors, double backward, and hooks that see and replace gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/function_node.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/autodiff.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) {
  return to(t, DType::Float64).to_vector<double>();
}

// y = x^3 with the backward written by hand: 3 x^2 g (from the saved input).
CustomFunction cube() {
  return {"Cube",
          [](FunctionContext& ctx, const std::vector<Tensor>& in) {
            ctx.save_for_backward({in[0]});
            return std::vector<Tensor>{in[0] * in[0] * in[0]};
          },
          [](FunctionContext& ctx, const std::vector<Tensor>& grads) {
            Tensor x = ctx.saved_tensors()[0];
            return std::vector<Tensor>{grads[0] * x * x * 3.0};
          }};
}

TEST(AutogradFunction, BackwardIsTheUsersRule) {
  Tensor x = requires_grad_(tensor({1.0, 2.0, -3.0}));
  Tensor y = apply_function(cube(), {x})[0];
  EXPECT_EQ(grad_fn_name(y), "CubeBackward");
  EXPECT_EQ(values(y), (std::vector<double>{1, 8, -27}));
  backward(sum(y));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{3, 12, 27}));
}

TEST(AutogradFunction, TheBackwardIsUsedNotTheForwardsOps) {
  // The backward deliberately differs from the derivative of the forward:
  // a straight-through estimator, round() forward, identity backward.
  CustomFunction straight_through{
      "StraightThrough",
      [](FunctionContext&, const std::vector<Tensor>& in) {
        return std::vector<Tensor>{round(in[0])};
      },
      [](FunctionContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; }};
  Tensor x = requires_grad_(tensor({0.4, 1.6}));
  backward(sum(apply_function(straight_through, {x})[0] * 2.0));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{2, 2}));
}

TEST(AutogradFunction, NeedsInputGradAndUndefinedInputs) {
  std::vector<bool> seen;
  CustomFunction scale{
      "Scale",
      [&](FunctionContext& ctx, const std::vector<Tensor>& in) {
        seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)};
        return std::vector<Tensor>{in[0] * in[1]};
      },
      [](FunctionContext&, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{g[0] * 5.0, g[0], Tensor()};
      }};
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  Tensor s = tensor({4.0, 4.0});  // needs no gradient: its one is dropped
  backward(sum(apply_function(scale, {x, s, Tensor()})[0]));
  EXPECT_EQ(seen, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{5, 5}));
  EXPECT_FALSE(grad(s).defined());
}

TEST(AutogradFunction, GradientsAreCheckedAgainstTheInputs) {
  auto returning = [](std::function<std::vector<Tensor>(const Tensor&)> rule) {
    return CustomFunction{
        "Bad",
        [](FunctionContext&, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{in[0] * 2.0};
        },
        [rule](FunctionContext&, const std::vector<Tensor>& g) { return rule(g[0]); }};
  };
  Tensor x = requires_grad_(zeros({2, 3}, DType::Float64));
  auto run = [&](const CustomFunction& fn) { backward(sum(apply_function(fn, {x})[0])); };
  EXPECT_THROW_WITH(run(returning([](const Tensor& g) { return std::vector<Tensor>{}; })),
                    "function BadBackward returned an incorrect number of gradients (expected "
                    "1, got 0)");
  EXPECT_THROW_WITH(run(returning([](const Tensor& g) { return std::vector<Tensor>{sum(g)}; })),
                    "returned an invalid gradient at index 0 - got [] but expected shape "
                    "compatible with [2, 3]");
  // A broadcast gradient is summed back; another dtype is converted.
  run(returning([](const Tensor& g) { return std::vector<Tensor>{ones({4, 2, 3})}; }));
  EXPECT_EQ(values(grad(x)), std::vector<double>(6, 4.0));
  run(returning([](const Tensor& g) {
    return std::vector<Tensor>{ones({2, 3}, DType::Float32), Tensor()};
  }));
  EXPECT_EQ(grad(x).dtype(), DType::Float64);
  EXPECT_EQ(values(grad(x)), std::vector<double>(6, 5.0));
}

TEST(AutogradFunction, SavedTensorsAreVersionCheckedAndFreed) {
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  Tensor y = apply_function(cube(), {x})[0];
  {
    NoGradGuard no_grad;  // as an optimizer's step writes
    mul_(x, 2.0);
  }
  EXPECT_THROW_WITH(backward(sum(y)), "saved tensor 0 of CubeBackward is at version");
}

TEST(AutogradFunction, SavedTensorsAreFreed) {
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  Tensor z = apply_function(cube(), {x})[0];
  backward(sum(z), {}, /*retain_graph=*/true);
  backward(sum(z));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{6, 24}));
  EXPECT_THROW_WITH(backward(sum(z)), "CubeBackward's saved tensors were freed");
}

TEST(AutogradFunction, DifferentiatesItsBackwardAgain) {
  // d/dx (3 x^2) = 6 x: the backward's ops are recorded under create_graph,
  // and a saved output links back to the node.
  CustomFunction exp_fn{"Exp",
                        [](FunctionContext& ctx, const std::vector<Tensor>& in) {
                          Tensor y = exp(in[0]);
                          ctx.save_for_backward({y});
                          return std::vector<Tensor>{y};
                        },
                        [](FunctionContext& ctx, const std::vector<Tensor>& g) {
                          return std::vector<Tensor>{g[0] * ctx.saved_tensors()[0]};
                        }};
  Tensor x = requires_grad_(tensor({0.5, 1.0}, DType::Float64));
  Tensor dx = kiln::grad({sum(apply_function(cube(), {x})[0])}, {x}, {}, false, true)[0];
  EXPECT_EQ(values(kiln::grad({sum(dx)}, {x})[0]), (std::vector<double>{3, 6}));
  Tensor de = kiln::grad({sum(apply_function(exp_fn, {x})[0])}, {x}, {}, false, true)[0];
  std::vector<double> second = values(kiln::grad({sum(de)}, {x})[0]);
  EXPECT_NEAR(second[0], std::exp(0.5), 1e-12);
  EXPECT_NEAR(second[1], std::exp(1.0), 1e-12);
}

TEST(AutogradFunction, NonDifferentiableOutputsAndMaterializedGrads) {
  std::vector<bool> arrived;
  auto split = [&](bool materialize) {
    return CustomFunction{"Split",
                          [materialize](FunctionContext& ctx, const std::vector<Tensor>& in) {
                            Tensor mask = in[0] * 0.0;
                            ctx.mark_non_differentiable({mask});
                            ctx.set_materialize_grads(materialize);
                            return std::vector<Tensor>{in[0] * 2.0, mask};
                          },
                          [&](FunctionContext&, const std::vector<Tensor>& g) {
                            arrived = {g[0].defined(), g[1].defined()};
                            return std::vector<Tensor>{g[0] * 2.0};
                          }};
  };
  Tensor x = requires_grad_(tensor({1.0}));
  std::vector<Tensor> out = apply_function(split(true), {x});
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  backward(sum(out[0]));
  EXPECT_EQ(arrived, (std::vector<bool>{true, true}));  // zeros for the mask
  EXPECT_EQ(values(grad(x)), (std::vector<double>{2}));
  backward(sum(apply_function(split(false), {x})[0]));
  EXPECT_EQ(arrived, (std::vector<bool>{true, false}));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{4}));
}

TEST(AutogradFunction, DirtyInputsAndReturnedInputs) {
  CustomFunction double_in_place{"DoubleInPlace",
                                 [](FunctionContext& ctx, const std::vector<Tensor>& in) {
                                   mul_(in[0], 2.0);
                                   ctx.mark_dirty({in[0]});
                                   return std::vector<Tensor>{in[0]};
                                 },
                                 [](FunctionContext&, const std::vector<Tensor>& g) {
                                   return std::vector<Tensor>{g[0] * 2.0};
                                 }};
  Tensor x = requires_grad_(tensor({1.0, 3.0}));
  Tensor a = x + 0.0;
  Tensor out = apply_function(double_in_place, {a})[0];
  EXPECT_TRUE(out.is_same(a));
  EXPECT_EQ(grad_fn_name(a), "DoubleInPlaceBackward");
  backward(sum(a * a));  // d/dx (2x)^2 = 8x
  EXPECT_EQ(values(grad(x)), (std::vector<double>{8, 24}));
  EXPECT_THROW_WITH(apply_function(double_in_place, {x}), "a leaf Variable that requires grad");

  CustomFunction identity{"Identity",
                          [](FunctionContext&, const std::vector<Tensor>& in) { return in; },
                          [](FunctionContext&, const std::vector<Tensor>& g) { return g; }};
  Tensor b = x * 1.0;
  Tensor alias = apply_function(identity, {b})[0];
  EXPECT_FALSE(alias.is_same(b));  // a new tensor carries the new history
  EXPECT_EQ(grad_fn_name(alias), "IdentityBackward");
  EXPECT_EQ(grad_fn_name(b), "MulBackward0");
}

// Recorded with grad mode on, the function is one custom_function node: the
// compiled forward runs its forward, and graph autodiff puts its backward's
// ops (not the derivative of the forward's) into the backward graph.
TEST(AutogradFunction, RecordedAsOneNodeWithItsBackward) {
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  jit::Recorder recorder;
  recorder.begin({x});
  Tensor y = apply_function(cube(), {x})[0];
  jit::Capture capture = recorder.end({y});
  EXPECT_EQ(values(y), (std::vector<double>{1, 8}));
  ASSERT_EQ(capture.graph->nodes().size(), 1u);
  const jit::Node* node = capture.graph->nodes()[0];
  EXPECT_EQ(node->op().name, "custom_function");
  EXPECT_EQ(node->attrs().get_string("name"), "Cube");

  jit::DifferentiatedGraph d =
      jit::differentiate(*capture.graph, 1, std::vector<Tensor>{x}, {true}, {});
  size_t muls = 0;  // 3 x^2 g as the user wrote it: g * x * x * 3
  for (const jit::Node* n : d.backward->nodes()) {
    EXPECT_NE(n->op().name, "custom_function");
    muls += n->op().name == "mul";
  }
  EXPECT_EQ(muls, 3u);
  Tensor other = tensor({-1.5, 3.0});
  std::vector<Tensor> forward = jit::Executable(d.forward).run({other});
  EXPECT_EQ(values(forward[0]), (std::vector<double>{-3.375, 27}));
  std::vector<Tensor> backward_inputs;
  for (const jit::SavedValue& s : d.saved)
    backward_inputs.push_back(s.is_input ? other : forward[s.index]);
  backward_inputs.push_back(ones_like(other));
  std::vector<Tensor> grads = jit::Executable(d.backward).run(backward_inputs);
  EXPECT_EQ(values(grads.at(0)), (std::vector<double>{6.75, 27}));
}

TEST(AutogradFunction, ARecordedNodeRefusesWhatItCannotHold) {
  CustomFunction saves_intermediate{
      "SavesIntermediate",
      [](FunctionContext& ctx, const std::vector<Tensor>& in) {
        Tensor square = in[0] * in[0];
        ctx.save_for_backward({square});
        return std::vector<Tensor>{square * 2.0};
      },
      [](FunctionContext&, const std::vector<Tensor>& g) { return g; }};
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  jit::Recorder recorder;
  recorder.begin({x});
  EXPECT_THROW_WITH(apply_function(saves_intermediate, {x}),
                    "SavesIntermediate: save_for_backward got a tensor (saved tensor 0, shape [2]) "
                    "that is neither an input nor an output of forward");
  recorder.abort();
}

TEST(AutogradFunction, ForwardOpsAreRecordedWithoutGrad) {
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  // Without grad (an inference trace) the forward's ops are the graph.
  NoGradGuard no_grad;
  jit::Recorder inference;
  inference.begin({x});
  Tensor y = apply_function(cube(), {x})[0];
  jit::Capture capture = inference.end({y});
  size_t muls = 0;
  for (const jit::Node* node : capture.graph->nodes())
    muls += node->op().name == "mul";
  EXPECT_EQ(muls, 2u);
}

// ---- tensor hooks ----

TEST(TensorHooks, ReplaceTheGradientOfLeavesAndNonLeaves) {
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  Tensor y = x * 3.0;
  std::vector<std::string> order;
  HookHandle on_y = register_hook(y, [&](const Tensor& g) {
    order.push_back("y");
    return g * 10.0;
  });
  register_hook(x, [&](const Tensor& g) {
    order.push_back("x");
    return Tensor();  // keeps it
  });
  retain_grad(y);
  EXPECT_TRUE(retains_grad(y));
  EXPECT_FALSE(retains_grad(x));
  backward(sum(y * y));  // dy = 2y, hooked: 20y; dx = 60y
  EXPECT_EQ(order, (std::vector<std::string>{"y", "x"}));
  EXPECT_EQ(values(grad(y)), (std::vector<double>{60, 120}));  // after the hook
  EXPECT_EQ(values(grad(x)), (std::vector<double>{180, 360}));

  on_y.remove();
  on_y.remove();  // a second time is a no-op
  Tensor z = x * 3.0;
  backward(sum(z));
  EXPECT_EQ(values(grad(x)), (std::vector<double>{183, 363}));
}

TEST(TensorHooks, RunBeforeGradCapturesAndOutliveTheTensor) {
  Tensor x = requires_grad_(tensor({1.0}));
  register_hook(x, [](const Tensor& g) { return g * 2.0; });
  EXPECT_EQ(values(kiln::grad({x * 5.0}, {x})[0]), (std::vector<double>{10}));
  Tensor out;
  {
    Tensor y = x * 1.0;
    register_hook(y, [](const Tensor& g) { return g * 7.0; });
    out = y * 1.0;
  }  // y is gone; its grad_fn (held by out's) keeps the hook
  EXPECT_EQ(values(kiln::grad({out}, {x})[0]), (std::vector<double>{14}));
}

TEST(TensorHooks, Errors) {
  EXPECT_THROW_WITH(register_hook(tensor({1.0}), [](const Tensor& g) { return g; }),
                    "cannot register a hook on a tensor that doesn't require gradient");
  Tensor x = requires_grad_(tensor({1.0, 2.0}));
  register_hook(x, [](const Tensor& g) { return sum(g); });
  EXPECT_THROW_WITH(backward(sum(x * 2.0)), "a hook changed the shape of the gradient");
}

}  // namespace
}  // namespace kiln
