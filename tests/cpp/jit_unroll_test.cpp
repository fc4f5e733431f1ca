// unroll_loops (src/kiln/jit/passes/unroll.cpp) on traced scans, as a plan
// is lowered: eager == compiled with the default pipeline (its plan
// unrolled where the rule says: lowered_graph()) == compiled with the
// passes named (no unrolling: the loop), bit for bit, at the rule's bounds.
// graph() keeps the loop either way.
// The IR-level before/after tests are tests/passes/unroll_loops_*.ir.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

CompileOptions without_unrolling() {
  std::vector<std::string> names = default_pipeline();
  std::erase(names, "unroll_loops");
  return {.passes = names};
}

// Scan nodes anywhere in the graph, blocks included.
size_t count_scans(const Graph& graph) {
  size_t scans = 0;
  for_each_graph(graph, [&](const Graph& g) {
    for (const Node* node : g.nodes())
      scans += node->op().name == "scan";
  });
  return scans;
}

// Values that tell a changed rounding apart: signed zeros, NaN, infinities.
Tensor telling(const IntList& shape, double scale = 1.0) {
  static const double kValues[] = {-0.0, 0.5, NAN, 1.25, INFINITY, -2.0, 0.0, -INFINITY, 3.0};
  std::vector<float> values(size_t(numel_of(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float(kValues[i % std::size(kValues)] * scale + double(i % 7) * 0.125);
  return tensor_from_data(values.data(), DType::Float32, shape, TensorOptions(DType::Float32));
}

// fn traced on `inputs`: `scans_left` scan nodes after the default pipeline,
// all of them without unroll_loops, and every run gives eager's bits.
void expect_unrolled(const TracedFn& fn, const std::vector<Tensor>& inputs, size_t scans_left,
                     size_t scans_recorded = 1) {
  std::vector<Tensor> eager = fn(inputs);
  CompiledFunction unrolled = trace(fn, inputs);
  CompiledFunction loop = trace(fn, inputs, {}, without_unrolling());
  EXPECT_EQ(count_scans((*unrolled.lowered_graph())), scans_left)
      << to_text((*unrolled.lowered_graph()));
  EXPECT_EQ(count_scans((*loop.lowered_graph())), scans_recorded)
      << to_text((*loop.lowered_graph()));
  for (CompiledFunction* compiled : {&unrolled, &loop}) {
    std::vector<Tensor> got = (*compiled)(inputs);
    ASSERT_EQ(got.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(got[i], eager[i])) << "output " << i << "\n"
                                                   << to_text((*compiled->lowered_graph()));
    }
  }
}

// h' = h * x + c (c read from outside: a capture), y = sin(h'), over xs.
TracedFn running(bool reverse = false) {
  return [reverse](const Tensors& in) {
    const Tensor& c = in[2];
    ScanResult r = scan(
        [&](const Tensors& h, const Tensors& x) {
          Tensor next = add(mul(h[0], x[0]), c);
          return std::pair<Tensors, Tensors>({next}, {sin(next)});
        },
        {in[0]}, {in[1]}, reverse);
    // Eagerly a scan of no steps has no ys to know the types of.
    Tensor ys = r.ys.empty() ? zeros({0, in[0].shape().back()}) : r.ys[0];
    return Tensors{r.carry[0], ys};
  };
}

TEST(JitUnroll, ScanOfLengthZeroIsItsInitAndEmptyYs) {
  expect_unrolled(running(), {telling({3}), telling({0, 3}), telling({3})}, 0);
}

TEST(JitUnroll, ForiLoopWithNoStepsIsItsInit) {
  auto fn = [](const Tensors& in) {
    return fori_loop(
        0, 0, [](const Tensor& i, const Tensors& acc) { return Tensors{add(acc[0], i)}; }, {in[0]});
  };
  expect_unrolled(fn, {telling({4})}, 0);
}

TEST(JitUnroll, LengthAtTheBoundUnrollsAndOneMoreStays) {
  expect_unrolled(running(), {telling({4}), telling({64, 4}, 0.25), telling({4})}, 0);
  expect_unrolled(running(), {telling({4}), telling({65, 4}, 0.25), telling({4})}, 1);
}

TEST(JitUnroll, ResultBytesAtTheBoundUnrollAndMoreStay) {
  // Step results: carry and y, 2 x 4 bytes x 8192 = 64 KiB a step; 4 steps
  // are 256 KiB, the bound.
  expect_unrolled(running(), {telling({8192}), telling({4, 8192}), telling({8192})}, 0);
  expect_unrolled(running(), {telling({8193}), telling({4, 8193}), telling({8193})}, 1);
}

// h' = h + sum(x_t W), W [rows, 64] a capture the step reads each time.
TEST(JitUnroll, StepReadingUpTo256KiBOfWeightsUnrollsAndMoreStays) {
  auto fn = [](const Tensors& in) {
    const Tensor& w = in[2];
    ScanResult r = scan(
        [&](const Tensors& h, const Tensors& x) {
          return std::pair<Tensors, Tensors>({add(h[0], sum(matmul(x[0], w)))}, {});
        },
        {in[0]}, {in[1]});
    return r.carry;
  };
  // 1024 x 64 x 4 bytes = 256 KiB, the bound; one row more stays a loop.
  for (int64_t rows : {1024, 1025}) {
    expect_unrolled(fn, {zeros({}), mul(randn({4, 1, rows}), 0.01), mul(randn({rows, 64}), 0.01)},
                    rows == 1024 ? 0 : 1);
  }
}

TEST(JitUnroll, ReverseScanVisitsTheLastSliceFirst) {
  expect_unrolled(running(/*reverse=*/true), {telling({2, 3}), telling({5, 2, 3}), telling({3})},
                  0);
}

TEST(JitUnroll, SeveralCarriesXsAndYs) {
  auto fn = [](const Tensors& in) {
    const Tensor& w = in[4];  // a capture
    ScanResult r = scan(
        [&](const Tensors& h, const Tensors& x) {
          Tensor a = add(matmul(h[0], w), x[0]);
          Tensor b = mul(h[1], x[1]);
          return std::pair<Tensors, Tensors>({tanh(a), sub(b, h[0])}, {a, exp(b), h[1]});
        },
        {in[0], in[1]}, {in[2], in[3]}, /*reverse=*/true);
    Tensors out = r.carry;
    out.insert(out.end(), r.ys.begin(), r.ys.end());
    return out;
  };
  expect_unrolled(
      fn, {telling({2, 3}), telling({2, 3}), telling({6, 2, 3}), telling({6, 2, 3}), randn({3, 3})},
      0);
}

TEST(JitUnroll, StaticForiLoopCounterFolds) {
  auto fn = [](const Tensors& in) {
    return fori_loop(2, 9,
                     [&](const Tensor& i, const Tensors& acc) {
                       return Tensors{add(mul(acc[0], in[1]), to(i, DType::Float32))};
                     },
                     {in[0]});
  };
  expect_unrolled(fn, {telling({5}), telling({5}, 0.5)}, 0);
  CompiledFunction compiled = trace(fn, {telling({5}), telling({5}, 0.5)});
  for (const Node* node : (*compiled.lowered_graph()).nodes())
    EXPECT_NE(node->op().name, "cast")
        << to_text((*compiled.lowered_graph()));  // i is a constant per copy
}

TEST(JitUnroll, NestedScansUnrollInsideOut) {
  auto fn = [](const Tensors& in) {
    ScanResult outer = scan(
        [](const Tensors& h, const Tensors& row) {
          ScanResult inner = scan(
              [](const Tensors& g, const Tensors& x) {
                Tensor n = add(g[0], x[0]);
                return std::pair<Tensors, Tensors>({n}, {n});
              },
              h, {row[0]});
          return std::pair<Tensors, Tensors>(inner.carry, inner.ys);
        },
        {in[0]}, {in[1]});
    return Tensors{outer.carry[0], outer.ys[0]};
  };
  expect_unrolled(fn, {telling({2}), telling({3, 4, 2})}, 0, 2);
}

TEST(JitUnroll, StepWithRandomDrawsStaysALoop) {
  auto fn = [](const Tensors& in) {
    ScanResult r = scan(
        [](const Tensors& h, const Tensors& x) {
          return std::pair<Tensors, Tensors>({add(h[0], mul(x[0], rand({3})))}, {});
        },
        {in[0]}, {in[1]});
    return r.carry;
  };
  CompiledFunction compiled = trace(fn, {telling({3}), telling({2, 3})});
  EXPECT_EQ(count_scans((*compiled.lowered_graph())), 1u) << to_text((*compiled.lowered_graph()));
}

// A step's nonzero binds a size symbol on every run; copies of it would
// share one symbol, each run overwriting the count the others' values were
// sized by. So such a step stays a loop, and every step counts its own.
TEST(JitUnroll, StepBindingASizeSymbolStaysALoop) {
  auto fn = [](const Tensors& in) {
    ScanResult r = scan(
        [](const Tensors& h, const Tensors& x) {
          Tensor count = sum(nonzero(x[0]));
          return std::pair<Tensors, Tensors>({add(h[0], count)}, {count});
        },
        {in[0]}, {in[1]});
    return Tensors{r.carry[0], r.ys[0]};
  };
  Tensor xs = telling({3, 5});
  Tensor init = zeros({}, TensorOptions(DType::Int64));
  CompiledFunction compiled = trace(fn, {init, xs});
  EXPECT_EQ(count_scans((*compiled.lowered_graph())), 1u) << to_text((*compiled.lowered_graph()));
  std::vector<Tensor> eager = fn({init, xs}), got = compiled({init, xs});
  ASSERT_EQ(got.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(bitwise_equal(got[i], eager[i])) << "output " << i;
}

// A scan whose plan runs unrolled still differentiates as a scan (gradient
// plans keep their loops: the backward recomputes the carries, so it may
// round differently from eager's tape, within float32's precision).
TEST(JitUnroll, GradientsThroughAnUnrolledScanAreEagers) {
  Tensor h = randn({2, 3}), xs = randn({4, 2, 3}), w = randn({3, 3});
  auto fn = [](const Tensors& in) {
    ScanResult r = scan(
        [&](const Tensors& c, const Tensors& x) {
          Tensor n = tanh(add(matmul(c[0], in[2]), x[0]));
          return std::pair<Tensors, Tensors>({n}, {mul(n, n)});
        },
        {in[0]}, {in[1]});
    return Tensors{add(sum(r.carry[0]), sum(r.ys[0]))};
  };
  auto grads = [&](const TracedFn& run) {
    Tensors leaves = {requires_grad_(clone(h)), requires_grad_(clone(xs)),
                      requires_grad_(clone(w))};
    backward(run(leaves)[0]);
    return Tensors{grad(leaves[0]), grad(leaves[1]), grad(leaves[2])};
  };
  CompiledFunction compiled = trace(fn, {h, xs, w});
  EXPECT_EQ(count_scans((*compiled.lowered_graph())), 0u) << to_text((*compiled.lowered_graph()));
  Tensors eager = grads(fn), got = grads([&](const Tensors&in) { return compiled(in); });
  for (size_t i = 0; i < eager.size(); ++i) {
    std::vector<float> a = got[i].to_vector<float>(), b = eager[i].to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], b[k], 1e-5 + 1e-5 * std::abs(b[k])) << "gradient " << i << " at " << k;
  }
}

}  // namespace
}  // namespace kiln::jit
