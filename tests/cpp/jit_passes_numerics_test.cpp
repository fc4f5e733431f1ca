// Passes keep results: with only the passes that cannot change rounding,
// an optimized graph gives what eager gives, bit for bit. Over traced code
// (SCENARIOS.md §4's fancy_func), W1 and LeNet (frozen or not), and every
// row of the op test table: over graph inputs, and over constants, where
// every row without effects folds to its eager result.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/nn/container.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/normalization.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "op_refs.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

PassOptions checked(bool frozen = false) {
  PassOptions options{.frozen = frozen};
  options.verify = true;
  options.dump_after.clear();
  return options;
}

std::shared_ptr<Graph> optimized_copy(const Graph& g, const PassOptions& options) {
  std::shared_ptr<Graph> copy = g.clone();
  optimize(*copy, options);
  return copy;
}

Tensors fancy_func(const Tensors& in) {
  auto add = [](const Tensor& a, const Tensor& b) { return a + b; };
  Tensor e = add(in[0], in[1]);
  Tensor f = add(in[2], in[3]);
  return {add(e, f)};
}

// SCENARIOS.md §4: a compiled fancy_func on constant inputs returns the
// constant 10 from a graph with no add left.
TEST(PassNumerics, FancyFuncOnConstantsFoldsToTen) {
  CapturedWarnings captured;
  CompiledFunction traced = trace(
      [](const Tensors&) {
        return fancy_func({tensor({1.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})});
      },
      {});
  std::shared_ptr<Graph> g = optimized_copy(traced.graph(), checked());
  EXPECT_EQ(g->num_nodes(), 0u);
  ASSERT_EQ(g->constants().size(), 1u);
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0], g->constants()[0]);
  EXPECT_EQ(g->constants()[0]->data().item<double>(), 10.0);
  CompiledFunction compiled(g, 1);
  EXPECT_EQ(compiled({})[0].item<double>(), 10.0);
}

TEST(PassNumerics, FancyFuncOnInputsKeepsItsAdds) {
  Tensors in = {tensor({1.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})};
  CompiledFunction traced = trace(fancy_func, in);
  std::shared_ptr<Graph> g = optimized_copy(traced.graph(), checked());
  EXPECT_EQ(count_op_runs(*g, "add"), 3u);  // fused into one node, still three adds
  EXPECT_EQ(CompiledFunction(g, 1)(in)[0].item<double>(), 10.0);
}

// y = x @ (w * 2): frozen, w * 2 folds (through mul's own kernel); the
// parameter stays, being the state_dict.
TEST(PassNumerics, FrozenParameterSubgraphsFold) {
  Graph g;
  Value* x = g.add_input(meta(DType::Float32, {2, 3}), "x");
  Tensor weight = randn({3, 4});
  weight.impl()->requires_grad = true;  // a module's weight; folding must not record
  Value* w = g.add_param("w", meta(DType::Float32, {3, 4}), weight);
  Value* two = g.add_constant(scalar_tensor(Scalar(2.0), TensorOptions(DType::Float32)));
  Node* scaled = g.append(op("mul"), {w, two});
  g.set_outputs({g.append(op("matmul"), {x, scaled->output()})->output()});

  std::shared_ptr<Graph> thawed = optimized_copy(g, checked());
  EXPECT_EQ(thawed->num_nodes(), 2u);
  std::shared_ptr<Graph> frozen = optimized_copy(g, checked(/*frozen=*/true));
  EXPECT_EQ(frozen->num_nodes(), 1u);
  EXPECT_EQ(frozen->params().size(), 1u);
  ASSERT_EQ(frozen->constants().size(), 1u);
  EXPECT_FALSE(frozen->constants()[0]->data().requires_grad());

  Tensor in = randn({2, 3});
  Tensor expected = Executable(g.clone()).run({in})[0];
  EXPECT_TRUE(bitwise_equal(Executable(thawed).run({in})[0], expected));
  EXPECT_TRUE(bitwise_equal(Executable(frozen).run({in})[0], expected));
}

std::shared_ptr<nn::Sequential> make_w1() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

std::shared_ptr<nn::Sequential> make_lenet() {
  using namespace nn;
  return std::make_shared<Sequential>(
      std::make_shared<Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<Sigmoid>(), std::make_shared<AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<Conv2d>(6, 16, IntList{5}), std::make_shared<Sigmoid>(),
      std::make_shared<AvgPool2d>(IntList{2}, IntList{2}), std::make_shared<Flatten>(),
      std::make_shared<Linear>(16 * 5 * 5, 120), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(120, 84), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(84, 10));
}

void expect_model_matches_eager(nn::Module& net, const IntList& input_shape) {
  net.eval();
  for (bool frozen : {false, true}) {
    Tensor x = rand(input_shape);
    CompiledFunction traced = trace(net, x);
    std::shared_ptr<Graph> g = optimized_copy(traced.graph(), checked(frozen));
    EXPECT_EQ(g->params().size(), traced.graph().params().size()) << "the state_dict stays";
    Tensor x2 = rand(input_shape);
    NoGradGuard no_grad;
    EXPECT_TRUE(bitwise_equal(Executable(g).run({x2})[0], net.forward(x2))) << "frozen " << frozen;
  }
}

TEST(PassNumerics, W1OptimizedEqualsEagerBitwise) {
  manual_seed(3);
  auto net = make_w1();
  expect_model_matches_eager(*net, {1, 512});
  expect_model_matches_eager(*net, {64, 512});
}

TEST(PassNumerics, LeNetOptimizedEqualsEagerBitwise) {
  manual_seed(4);
  auto net = make_lenet();
  expect_model_matches_eager(*net, {1, 1, 28, 28});
  expect_model_matches_eager(*net, {8, 1, 28, 28});
}

// ---------------------------------------------------------------- all passes

// With every pass, the rounding-changing ones too (fast-math, frozen):
// within float32 tolerance of eager, no longer bit for bit.
PassOptions all_passes() {
  PassOptions options = checked(/*frozen=*/true);
  options.fast_math = true;
  return options;
}

testing::AssertionResult close_to(const Tensor& got, const Tensor& want, double rtol = 1e-4,
                                  double atol = 1e-5) {
  if (got.shape() != want.shape()) return testing::AssertionFailure() << "shapes differ";
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if ((std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i]) continue;  // infinities too
    if (!(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]))) {
      return testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i];
    }
  }
  return testing::AssertionSuccess();
}

void expect_all_passes_close_to_eager(nn::Module& net, const IntList& input_shape) {
  net.eval();
  CompiledFunction traced = trace(net, rand(input_shape));
  std::shared_ptr<Graph> g = optimized_copy(traced.graph(), all_passes());
  Tensor x = rand(input_shape);
  NoGradGuard no_grad;
  EXPECT_TRUE(close_to(Executable(g).run({x})[0], net.forward(x)));
}

TEST(PassNumerics, W1AndLeNetWithAllPassesStayWithinTolerance) {
  manual_seed(5);
  auto w1 = make_w1();
  expect_all_passes_close_to_eager(*w1, {64, 512});
  auto lenet = make_lenet();
  expect_all_passes_close_to_eager(*lenet, {8, 1, 28, 28});
}

// Conv and linear layers followed by batch norm, with running statistics
// from a few training steps: frozen (by default, or with fast-math), both
// batch_norms fold; frozen and exact, neither does, and the result is
// eager's to the bit.
TEST(PassNumerics, BatchNormFoldsIntoConvAndLinearWithinTolerance) {
  using namespace nn;
  manual_seed(6);
  auto net = std::make_shared<Sequential>(
      std::make_shared<Conv2d>(3, 4, IntList{3}), std::make_shared<BatchNorm2d>(4),
      std::make_shared<ReLU>(), std::make_shared<Flatten>(), std::make_shared<Linear>(4 * 6 * 6, 5),
      std::make_shared<BatchNorm1d>(5));
  {
    NoGradGuard no_grad;
    for (int step = 0; step < 3; ++step)
      net->forward(randn({6, 3, 8, 8}) * 2.0 + 1.0);  // moves the running statistics
  }
  net->eval();
  CompiledFunction traced = trace(*net, rand({2, 3, 8, 8}));
  std::shared_ptr<Graph> folded = optimized_copy(traced.graph(), all_passes());
  EXPECT_EQ(count_op_runs(*folded, "batch_norm"), 0u) << to_text(*folded);
  std::shared_ptr<Graph> inference = optimized_copy(traced.graph(), checked(/*frozen=*/true));
  EXPECT_EQ(count_op_runs(*inference, "batch_norm"), 0u) << "frozen folds by default";
  PassOptions exact = checked(/*frozen=*/true);
  exact.exact = true;
  std::shared_ptr<Graph> kept = optimized_copy(traced.graph(), exact);
  EXPECT_EQ(count_op_runs(*kept, "batch_norm"), 2u) << "exact keeps eager's rounding";
  Tensor x = rand({2, 3, 8, 8});
  NoGradGuard no_grad;
  Tensor eager = net->forward(x);
  EXPECT_TRUE(close_to(Executable(folded).run({x})[0], eager));
  EXPECT_TRUE(close_to(Executable(inference).run({x})[0], eager));
  EXPECT_TRUE(bitwise_equal(Executable(kept).run({x})[0], eager));
}

// Regression: an unbatched conv's output is [C, H, W], where batch_norm's
// dim 1 is H, not the conv's channels: no fold there.
TEST(PassNumerics, BatchNormAfterAnUnbatchedConvIsNotFolded) {
  using namespace nn;
  manual_seed(8);
  auto net = std::make_shared<Sequential>(std::make_shared<Conv2d>(3, 6, IntList{3}),
                                          std::make_shared<BatchNorm1d>(6));
  {
    NoGradGuard no_grad;
    net->forward(randn({3, 8, 8}) * 3.0);
  }
  net->eval();
  CompiledFunction traced = trace(*net, rand({3, 8, 8}));
  std::shared_ptr<Graph> g = optimized_copy(traced.graph(), all_passes());
  EXPECT_EQ(count_op_runs(*g, "batch_norm"), 1u);
  Tensor x = rand({3, 8, 8});
  NoGradGuard no_grad;
  EXPECT_TRUE(close_to(Executable(g).run({x})[0], net->forward(x)));
}

// ---------------------------------------------------------------- op rows

std::vector<Tensor> inputs_of(const nlohmann::json& row) {
  std::vector<Tensor> inputs;
  for (const nlohmann::json& in : row["inputs"])
    inputs.push_back(tensor_from_json(in));
  return inputs;
}

std::vector<Tensor> graph_inputs_of(const nlohmann::json& row) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : inputs_of(row)) {
    if (t.defined() && !t.impl()->wrapped_number) inputs.push_back(t);
  }
  return inputs;
}

std::vector<Tensor> eager_of(const nlohmann::json& row) {
  const OpDef& def = op(row["op"].get<std::string>());
  manual_seed(7);
  return dispatch(def, inputs_of(row), attrs_from_json(def, row["attrs"]));
}

template <typename Fn>
void for_each_value_row(Fn&& fn) {
  for (const nlohmann::json& row : op_refs()["cases"]) {
    if (!row.contains("error")) fn(row, row["id"].get<std::string>());
  }
}

bool any_node_has_effects(const Graph& g) {
  for (const Node* node : g.nodes()) {
    if (has_effects(*node)) return true;
  }
  return false;
}

// Over constants, every row without effects folds: no node left, and the
// constants returned are eager's results. The size limit, a policy, is
// lifted so that rows with large results (sort/many_lines) fold too.
TEST(PassNumerics, EveryOpRowOverConstantsFoldsToEagersResult) {
  PassOptions options = checked();
  options.fold_size_limit_bytes = std::numeric_limits<int64_t>::max();
  size_t folded = 0;
  for_each_value_row([&](const nlohmann::json& row, const std::string& id) {
    std::unique_ptr<Graph> original = graph_of_row(row, true);
    std::shared_ptr<Graph> g = optimized_copy(*original, options);
    std::vector<Tensor> expected = eager_of(row);
    manual_seed(7);
    std::vector<Tensor> got = Executable(g).run({});
    ASSERT_EQ(got.size(), expected.size()) << id;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(bitwise_equal(got[i], expected[i])) << id << " output " << i;
    if (any_node_has_effects(*original)) return;  // random draws, in-place writes
    EXPECT_EQ(g->num_nodes(), 0u) << id;
    folded += g->num_nodes() == 0;
  });
  EXPECT_GT(folded, 300u);
}

// Every value row as a graph over inputs, optimized with `options` and run,
// each output handed to `compare(got, expected)` beside eager's.
template <typename Compare>
void expect_rows_match_eager(const PassOptions& options, Compare compare) {
  for_each_value_row([&](const nlohmann::json& row, const std::string& id) {
    std::shared_ptr<Graph> g = optimized_copy(*graph_of_row(row, false), options);
    std::vector<Tensor> expected = eager_of(row);
    manual_seed(7);
    std::vector<Tensor> got = Executable(g).run(graph_inputs_of(row));
    ASSERT_EQ(got.size(), expected.size()) << id;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(compare(got[i], expected[i])) << id << " output " << i;
  });
}

// Over graph inputs with every pass (fast-math, frozen): within tolerance.
TEST(PassNumerics, EveryOpRowWithAllPassesStaysWithinTolerance) {
  expect_rows_match_eager(
      all_passes(), [](const Tensor& got, const Tensor& want) { return close_to(got, want); });
}

// Over graph inputs, the optimized graph runs to eager's results.
TEST(PassNumerics, EveryOpRowOverInputsEqualsEagerBitwise) {
  expect_rows_match_eager(
      checked(), [](const Tensor& got, const Tensor& want) { return bitwise_equal(got, want); });
}

}  // namespace
}  // namespace kiln::jit
