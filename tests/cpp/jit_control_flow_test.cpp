// kiln::cond, while_loop, scan and fori_loop: eager, traced into one node
// owning blocks, and run compiled (Executable) and replayed (Interpreter)
// for inputs that take other paths than the traced one.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/exec/interpreter.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << what;
}

// fn traced on `example`, then eager == compiled == replayed on each input.
void expect_compiles(const TracedFn& fn, const std::vector<Tensor>& example,
                     const std::vector<std::vector<Tensor>>& calls, const std::string& op) {
  CompiledFunction compiled = trace(fn, example);
  const Graph& graph = compiled.graph();
  EXPECT_NO_THROW(verify(graph));
  size_t found = 0;
  for (const Node* node : graph.nodes())
    found += node->op().name == op;
  EXPECT_EQ(found, 1u) << to_text(graph);
  Interpreter replay(compiled.shared_graph());
  for (size_t k = 0; k < calls.size(); ++k) {
    std::vector<Tensor> eager = fn(calls[k]);
    std::vector<Tensor> run = compiled(calls[k]);
    std::vector<Tensor> replayed = replay.run_unchecked(calls[k]);
    ASSERT_EQ(run.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      expect_same(run[i], eager[i], str(op, " call ", k, " output ", i, "\n", to_text(graph)));
      expect_same(replayed[i], eager[i], str(op, " replayed, call ", k, " output ", i));
    }
  }
}

Tensors branchy(const Tensors& in) {
  const Tensor& x = in[0];
  Tensor w = full({4}, 3.0);  // read by a branch from outside: a capture
  return cond(
      gt(sum(x), 0.0), [&](const Tensors& v) { return Tensors{mul(v[0], w)}; },
      [](const Tensors& v) { return Tensors{neg(v[0])}; }, {x});
}

TEST(JitControlFlow, CondTakesEachBranchCompiled) {
  Tensor pos = tensor<float>({1, 2, 3, 4}), neg_x = tensor<float>({-1, -2, 0, 1});
  expect_compiles(branchy, {pos}, {{pos}, {neg_x}, {pos}}, "cond");
}

TEST(JitControlFlow, WhileLoopRunsAsManyIterationsAsTheInputsSay) {
  auto fn = [](const Tensors& in) {
    return while_loop([](const Tensors& v) { return lt(sum(v[0]), v[1]); },
                      [](const Tensors& v) {
                        return Tensors{mul(v[0], 2.0), v[1]};
                      },
                      {in[0], in[1]});
  };
  Tensor x = tensor<float>({1, 1}), limit = scalar_tensor(10.0, DType::Float32);
  expect_compiles(fn, {x, limit},
                  {{x, limit},
                   {x, scalar_tensor(1000.0, DType::Float32)},
                   {x, scalar_tensor(0.0, DType::Float32)}},
                  "while_loop");
}

TEST(JitControlFlow, ScanThreadsACarryAndStacksTheYs) {
  Tensor w = mul(randn({3, 3}), 0.5);
  auto fn = [w](const Tensors& in) {
    ScanResult r = scan(
        [&](const Tensors& carry, const Tensors& x) {
          Tensor h = tanh(add(matmul(carry[0], w), x[0]));
          return std::pair<Tensors, Tensors>{{h}, {h, sum(h)}};
        },
        {in[0]}, {in[1]});
    return Tensors{r.carry[0], r.ys[0], r.ys[1]};
  };
  Tensor h0 = randn({2, 3}), xs = randn({5, 2, 3});
  expect_compiles(fn, {h0, xs}, {{h0, xs}, {randn({2, 3}), randn({5, 2, 3})}}, "scan");
}

TEST(JitControlFlow, ReverseScanVisitsTheLastSliceFirst) {
  auto fn = [](const Tensors& in) {
    ScanResult r = scan(
        [](const Tensors& carry, const Tensors& x) {
          Tensor next = add(mul(carry[0], 10.0), x[0]);
          return std::pair<Tensors, Tensors>{{next}, {next}};
        },
        {in[0]}, {in[1]}, /*reverse=*/true);
    return Tensors{r.carry[0], r.ys[0]};
  };
  Tensor zero = scalar_tensor(0.0, DType::Float64), xs = tensor<double>({1, 2, 3});
  std::vector<Tensor> eager = fn({zero, xs});
  EXPECT_EQ(eager[0].item<double>(), 321.0);
  EXPECT_EQ(eager[1].to_vector<double>(), (std::vector<double>{321, 32, 3}));
  expect_compiles(fn, {zero, xs}, {{zero, xs}, {zero, tensor<double>({4, 5, 6})}}, "scan");
}

TEST(JitControlFlow, ForiLoopWithStaticAndTensorBounds) {
  auto static_bounds = [](const Tensors& in) {
    return fori_loop(
        0, 4,
        [](const Tensor& i, const Tensors& v) { return Tensors{add(v[0], to(i, DType::Float32))}; },
        {in[0]});
  };
  Tensor x = tensor<float>({0.5f, 1.5f});
  expect_compiles(static_bounds, {x}, {{x}, {tensor<float>({2, 3})}}, "scan");
  auto tensor_bounds = [](const Tensors& in) {
    return fori_loop(scalar_tensor(int64_t(0), DType::Int64), in[1],
                     [](const Tensor& i, const Tensors& v) { return Tensors{mul(v[0], 2.0)}; },
                     {in[0]});
  };
  Tensor n = scalar_tensor(int64_t(3), DType::Int64);
  expect_compiles(tensor_bounds, {x, n},
                  {{x, n},
                   {x, scalar_tensor(int64_t(0), DType::Int64)},
                   {x, scalar_tensor(int64_t(6), DType::Int64)}},
                  "while_loop");
}

TEST(JitControlFlow, NestedControlFlowCapturesThroughEachLevel) {
  auto fn = [](const Tensors& in) {
    Tensor x = in[0], scale = in[1];
    return fori_loop(0, 3,
                     [&](const Tensor&, const Tensors& v) {
                       return cond(
                           gt(sum(v[0]), 0.0),
                           [&](const Tensors& u) { return Tensors{mul(u[0], scale)}; },
                           [&](const Tensors& u) { return Tensors{add(u[0], scale)}; }, {v[0]});
                     },
                     {x});
  };
  Tensor s = tensor<float>({2, -3});
  expect_compiles(fn, {tensor<float>({1, 1}), s},
                  {{tensor<float>({1, 1}), s}, {tensor<float>({-5, -5}), s}}, "scan");
}

TEST(JitControlFlow, ATracedPredicateThatIsConstantIsDecidedWhileTracing) {
  auto fn = [](const Tensors& in) {
    return cond(
        gt(full({}, 1.0), 0.0), [](const Tensors& v) { return Tensors{neg(v[0])}; },
        [](const Tensors& v) { return Tensors{v[0]}; }, {in[0]});
  };
  CompiledFunction compiled = trace(fn, {tensor<float>({1, 2})});
  for (const Node* node : compiled.graph().nodes())
    EXPECT_NE(node->op().name, "cond") << to_text(compiled.graph());
}

// Regression: the eager result of a loop that ran no iteration, or of a
// branch that returns its operand, is the operand itself; binding it to the
// node's output made the input a written state (the graph wrote the result
// back into it) and its later uses read the node's output.
TEST(JitControlFlow, ResultsThatAreOperandsStayApartFromThem) {
  auto loop = [](const Tensors& in) {
    return fori_loop(scalar_tensor(int64_t(0), DType::Int64), in[1],
                     [](const Tensor&, const Tensors& v) { return Tensors{mul(v[0], 2.0)}; },
                     {in[0]});
  };
  Tensor x = tensor<float>({1, 2});
  expect_compiles(
      loop, {x, scalar_tensor(int64_t(0), DType::Int64)},
      {{x, scalar_tensor(int64_t(3), DType::Int64)}, {x, scalar_tensor(int64_t(0), DType::Int64)}},
      "while_loop");
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
  auto identity_branch = [](const Tensors& in) {
    Tensors y = cond(
        gt(sum(in[0]), 0.0), [](const Tensors& v) { return v; },
        [](const Tensors& v) { return Tensors{mul(v[0], 3.0)}; }, {in[0]});
    return Tensors{y[0], add(in[0], 1.0)};
  };
  expect_compiles(identity_branch, {x}, {{x}, {neg(x)}}, "cond");
}

// Regression: a body that updates a carried value in place wrote into the
// caller's tensor while recording (reported as a write through an alias).
TEST(JitControlFlow, InPlaceUpdatesOfCarriedValuesStayInTheBody) {
  auto fn = [](const Tensors& in) {
    return while_loop([](const Tensors& v) { return lt(v[1], 3.0); },
                      [](const Tensors& v) {
                        add_(v[1], 1.0);
                        return Tensors{mul(v[0], 2.0), v[1]};
                      },
                      {in[0], zeros({})});
  };
  Tensor x = tensor<float>({1, 2});
  CompiledFunction compiled = trace(fn, {x}, RecordOptions{.strict = true});
  EXPECT_EQ(compiled({x})[0].to_vector<float>(), (std::vector<float>{8, 16}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
}

// Regression: two carried values that start as one tensor (h0 and c0 both
// the same zeros) were one block input, so the step read one for the other.
TEST(JitControlFlow, CarriedValuesThatStartAsOneTensorStayApart) {
  auto fn = [](const Tensors& in) {
    Tensor z = zeros({2});
    ScanResult r = scan(
        [](const Tensors& carry, const Tensors& x) {
          Tensor a = add(carry[0], x[0]);
          Tensor b = add(mul(carry[1], 2.0), 1.0);
          return std::pair<Tensors, Tensors>{{a, b}, {}};
        },
        {z, z}, {in[0]});
    return r.carry;
  };
  Tensor xs = tensor<float>({{1, 2}, {3, 4}});
  expect_compiles(fn, {xs}, {{xs}}, "scan");
  EXPECT_EQ(fn({xs})[1].to_vector<float>(), (std::vector<float>{3, 3}));
}

// A block capturing an activation of a symbolic batch takes it as such (not
// at the traced size), and reads the enclosing graph's names.
TEST(JitControlFlow, CapturesKeepSymbolicSizesAndNames) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    return cond(
        gt(sum(in[0]), 0.0), [&](const Tensors& v) { return Tensors{add(v[0], y)}; },
        [&](const Tensors& v) { return Tensors{sub(v[0], y)}; }, {in[0]});
  };
  RecordOptions record{.input_names = {"x"}, .dynamic_dims = {{0, 0, "batch"}}};
  CompiledFunction compiled = trace(fn, {randn({3, 2})}, record);
  const std::string text = to_text(compiled.graph());
  EXPECT_NE(text.find("then graph(%x : f32[batch, 2], %in1 : f32[batch, 2])"), std::string::npos)
      << text;
  for (int64_t batch : {1, 5}) {
    Tensor x = randn({batch, 2});
    EXPECT_EQ(compiled({x})[0].to_vector<float>(), fn({x})[0].to_vector<float>());
  }
}

// Regression: a loop's scratch buffers were all keyed to its first output in
// a symbolic memory plan, so carried values of other types broke it.
TEST(JitControlFlow, SymbolicLoopsCarryValuesOfEveryType) {
  auto fn = [](const Tensors& in) {
    return while_loop([](const Tensors& v) { return lt(v[1], 3.0); },
                      [](const Tensors& v) {
                        return Tensors{mul(v[0], 2.0), add(v[1], int64_t(1))};
                      },
                      {in[0], zeros({}, DType::Int64)});
  };
  RecordOptions record{.dynamic_dims = {{0, 0, "n"}}};
  CompiledFunction compiled = trace(fn, {randn({3})}, record);
  for (int64_t n : {5, 1}) {
    Tensor x = randn({n});
    EXPECT_EQ(compiled({x})[0].to_vector<float>(), fn({x})[0].to_vector<float>());
  }
}

TEST(JitControlFlow, BadInputIsAnErrorNamingIt) {
  Tensor x = tensor<float>({1, 2});
  auto same = [](const Tensors& v) { return v; };
  EXPECT_THROW_WITH(cond(x, same, same, {x}), "cond: the predicate must be a one-element bool");
  auto recorded = [&](const TracedFn& fn) { return trace(fn, {x}); };
  EXPECT_THROW_WITH(recorded([](const Tensors& in) {
                      return cond(
                          gt(sum(in[0]), 0.0), [](const Tensors& v) { return v; },
                          [](const Tensors& v) { return Tensors{sum(v[0])}; }, {in[0]});
                    }),
                    "cond: result 0 is float32[2] from true_fn but float32[] from false_fn");
  EXPECT_THROW_WITH(recorded([](const Tensors& in) {
                      return while_loop([](const Tensors& v) { return lt(sum(v[0]), 5.0); },
                                        [](const Tensors& v) { return Tensors{sum(v[0])}; },
                                        {in[0]});
                    }),
                    "while_loop: the body changes carried value 0 from float32[2] to float32[]");
  EXPECT_THROW_WITH(while_loop([](const Tensors& v) { return lt(sum(v[0]), 100.0); },
                               [](const Tensors& v) { return Tensors{add(v[0], 1.0)}; }, {x}, 3),
                    "while_loop: the loop exceeded max_iterations=3");
  CompiledFunction bounded = recorded([](const Tensors& in) {
    return while_loop([](const Tensors& v) { return lt(sum(v[0]), 100.0); },
                      [](const Tensors& v) { return Tensors{add(v[0], 1.0)}; }, {in[0]}, 60);
  });
  EXPECT_THROW_WITH(bounded({tensor<float>({-100, 0})}),
                    "while_loop: the loop exceeded max_iterations=60");
}

}  // namespace
}  // namespace kiln::jit
