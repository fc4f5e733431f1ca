// Memory of graphs with symbolic sizes: one arena placement whose offsets are
// expressions (valid at every size, equal to plan_memory for constants), the
// peak as a formula that equals what each size's plan allocates, and the
// largest batch that fits a budget.
#include <gtest/gtest.h>

#include <random>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/core/sym_shape.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/memory_plan.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

const SizeExpr kBatch = SizeExpr::symbol("batch");
const SizeExpr kSeq = SizeExpr::symbol("seq");

// At these sizes no two buffers live at the same step overlap.
void expect_valid_at(const std::vector<SymbolicBufferRequest>& requests,
                     const SymbolicMemoryPlan& symbolic, const SymbolBindings& sizes) {
  MemoryPlan plan = symbolic.evaluate(sizes);
  for (size_t a = 0; a < requests.size(); ++a) {
    const int64_t size_a = requests[a].nbytes.evaluate(sizes);
    EXPECT_EQ(plan.offsets[a] % 64, 0);
    EXPECT_LE(plan.offsets[a] + size_a, plan.arena_bytes) << "buffer " << a;
    for (size_t b = a + 1; b < requests.size(); ++b) {
      const int64_t size_b = requests[b].nbytes.evaluate(sizes);
      const bool live_together = requests[a].first_step <= requests[b].last_step &&
                                 requests[b].first_step <= requests[a].last_step;
      const bool overlap =
          plan.offsets[a] < plan.offsets[b] + size_b && plan.offsets[b] < plan.offsets[a] + size_a;
      EXPECT_FALSE(live_together && overlap) << "buffers " << a << " and " << b;
    }
  }
}

TEST(JitSymbolicMemory, ConstantSizesPlanExactlyAsPlanMemory) {
  std::mt19937 rng(11);
  for (int round = 0; round < 100; ++round) {
    std::vector<BufferRequest> requests;
    std::vector<SymbolicBufferRequest> symbolic;
    const int count = 1 + int(rng() % 25);
    for (int i = 0; i < count; ++i) {
      const size_t first = rng() % 20, last = first + rng() % 6;
      const int64_t nbytes = 1 + int64_t(rng() % 5000);
      requests.push_back({nbytes, first, last});
      symbolic.push_back({nbytes, first, last});
    }
    MemoryPlan expected = plan_memory(requests);
    MemoryPlan got = plan_memory_symbolic(symbolic, {}).evaluate({});
    EXPECT_EQ(got.offsets, expected.offsets) << "round " << round;
    EXPECT_EQ(got.arena_bytes, expected.arena_bytes) << "round " << round;
    EXPECT_EQ(got.unshared_bytes, expected.unshared_bytes) << "round " << round;
  }
}

TEST(JitSymbolicMemory, AChainScalingWithBatchIsOneFormula) {
  // As the static chain test: a buffer written by one step, read by the next.
  std::vector<SymbolicBufferRequest> chain = {
      {1024 * kBatch, 0, 1}, {512 * kBatch, 1, 2}, {1024 * kBatch, 2, 3}, {64 * kBatch, 3, 4}};
  SymbolicMemoryPlan plan = plan_memory_symbolic(chain, {{"batch", 1024}});
  EXPECT_EQ(plan.arena_bytes, 1536 * kBatch);
  EXPECT_EQ(plan.offsets[1], 1024 * kBatch);
  EXPECT_EQ(plan.offsets[2], SizeExpr(0));
  for (int64_t b : {1, 3, 64})
    expect_valid_at(chain, plan, {{"batch", b}});
}

TEST(JitSymbolicMemory, RandomSymbolicRequestsAreValidAtEverySize) {
  std::mt19937 rng(5);
  for (int round = 0; round < 60; ++round) {
    std::vector<SymbolicBufferRequest> requests;
    const int count = 1 + int(rng() % 16);
    for (int i = 0; i < count; ++i) {
      const size_t first = rng() % 12, last = first + rng() % 5;
      // A mix of static buffers and ones growing with batch, seq or both.
      SizeExpr nbytes = int64_t(rng() % 3000);
      switch (rng() % 4) {
        case 0:
          break;
        case 1:
          nbytes = nbytes + int64_t(1 + rng() % 300) * kBatch;
          break;
        case 2:
          nbytes = nbytes + int64_t(1 + rng() % 30) * kBatch * kSeq;
          break;
        default:
          nbytes = nbytes + int64_t(1 + rng() % 300) * kSeq;
          break;
      }
      requests.push_back({nbytes + 1, first, last});
    }
    SymbolicMemoryPlan plan = plan_memory_symbolic(requests, {{"batch", 1024}, {"seq", 1024}});
    for (auto [b, s] : {std::pair<int64_t, int64_t>{0, 0}, {1, 1}, {1, 500}, {700, 3}, {64, 64}})
      expect_valid_at(requests, plan, {{"batch", b}, {"seq", s}});
  }
}

// An MLP over [batch, 32] with a residual: intermediates and the output all
// scale with batch.
std::vector<Tensor> mlp(const std::vector<Tensor>& in, const Tensor& w1, const Tensor& w2) {
  Tensor h = relu(linear(in[0], w1));
  Tensor y = linear(h, w2);
  return {relu(y + in[0]) * 2.0};
}

// mlp traced at batch 3 with the batch symbolic (the weights are constants
// of the graph).
struct TracedMlp {
  Tensor w1 = randn({64, 32}), w2 = randn({32, 64});
  CompiledFunction f;
  TracedMlp() {
    TracedFn fn = [this](const std::vector<Tensor>& in) { return mlp(in, w1, w2); };
    RecordOptions options;
    options.dynamic_dims = {{0, 0, "batch"}};
    f = trace(fn, {randn({3, 32})}, options);
  }
};

TEST(JitSymbolicMemory, FormulaEqualsThePlannedBytesAtEverySize) {
  manual_seed(0);
  TracedMlp traced;
  const CompiledFunction& f = traced.f;
  ASSERT_TRUE(f.symbolic());
  // Planned at the example's size when traced, as a static graph is.
  std::optional<MemoryFormula> formula = f.memory_formula();
  ASSERT_TRUE(formula.has_value());
  EXPECT_EQ(formula->outputs, 4 * 32 * kBatch);
  EXPECT_EQ(formula->weights, 4 * (64 * 32 + 32 * 64) + 4);  // and the constant 2.0
  EXPECT_EQ(formula->peak().symbols(), std::vector<std::string>{"batch"});
  EXPECT_EQ(f.compile_report().planned_at, (SymbolBindings{{"batch", 3}}));
  EXPECT_NE(f.compile_report().to_string().find("memory at any size: peak "), std::string::npos)
      << f.compile_report().to_string();

  // Each size's plan allocates what the formula says there.
  for (int64_t b : {1, 2, 7, 64, 3}) {
    Tensor x = randn({b, 32});
    std::vector<Tensor> got = f({x});
    EXPECT_TRUE(bitwise_equal(got[0], mlp({x}, traced.w1, traced.w2)[0])) << "batch " << b;
    CompiledFunction at_b = f;
    at_b.prepare({{"batch", b}});
    EXPECT_EQ(at_b.compile_report().planned_bytes, formula->intermediates.evaluate({{"batch", b}}))
        << "batch " << b << ": " << formula->to_string();
  }
}

TEST(JitSymbolicMemory, MaxBatchForABudget) {
  manual_seed(0);
  TracedMlp traced;
  const CompiledFunction& f = traced.f;
  std::optional<MemoryFormula> formula = f.memory_formula();
  ASSERT_TRUE(formula.has_value());
  auto total = [&](int64_t b) {
    return formula->weights + formula->peak().evaluate({{"batch", b}});
  };
  for (int64_t budget : {total(1), total(100) + 5, int64_t(1) << 30}) {
    std::optional<int64_t> b = f.max_size_for(budget);
    ASSERT_TRUE(b.has_value()) << budget;
    EXPECT_LE(total(*b), budget);
    EXPECT_GT(total(*b + 1), budget);
  }
  EXPECT_FALSE(f.max_size_for(formula->weights).has_value());  // not even batch 1
  EXPECT_THROW(f.max_size_for(1 << 20, "seq"), Error);         // no such symbol in the peak
}

TEST(JitSymbolicMemory, GuardsBoundTheBatch) {
  Tensor w = randn({8, 8});
  TracedFn fn = [&](const std::vector<Tensor>& in) {
    // A decision on the size: the graph holds for batch <= 16 only.
    Tensor y = linear(in[0], w);
    return std::vector<Tensor>{sym_size(in[0], 0) <= Dim(16) ? relu(y) : y};
  };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}};
  CompiledFunction f = trace(fn, {randn({4, 8})}, options);
  std::optional<int64_t> b = f.max_size_for(int64_t(1) << 30);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, 16);
}

}  // namespace
}  // namespace kiln::jit

namespace kiln::jit {
namespace {

// Buffers live together whose sizes no proof orders (h // 2, h // 3, ...)
// each go above all the others, their offsets max() of max() of ...: past a
// bound the symbolic plan gives up (such expressions can double in cost per
// level), and callers plan each size on its own. A few levels still plan.
TEST(JitSymbolicMemory, DeeplyNestedOffsetsGiveUpTheSymbolicPlan) {
  const SizeExpr h = SizeExpr::symbol("h"), w = SizeExpr::symbol("w");
  std::vector<SymbolicBufferRequest> requests;
  for (int64_t i = 0; i < 24; ++i)  // sizes no proof orders, all live at once
    requests.push_back({(floordiv(h - 1, i + 2) + 1) * (floordiv(w - 1, 25 - i) + 1) * 64, 0, 10});
  const std::vector<SymbolicBufferRequest> few(requests.begin(), requests.begin() + 3);
  SymbolicMemoryPlan planned = plan_memory_symbolic(few, {{"h", 1024}, {"w", 1024}});
  EXPECT_FALSE(planned.too_nested);
  for (int64_t value : {1, 30, 97, 1024})
    expect_valid_at(few, planned, {{"h", value}, {"w", 1031 - value}});
  SymbolicMemoryPlan given_up = plan_memory_symbolic(requests, {{"h", 1024}, {"w", 1024}});
  EXPECT_TRUE(given_up.too_nested);
  EXPECT_TRUE(given_up.offsets.empty());
  EXPECT_THROW(given_up.evaluate({{"h", 8}, {"w", 8}}), Error);
}

}  // namespace
}  // namespace kiln::jit
