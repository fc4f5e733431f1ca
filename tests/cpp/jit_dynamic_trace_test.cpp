// Tracing with dynamic shapes: input dims recorded as symbols, code that
// computes sizes from sym_shape staying general, decisions on symbols
// becoming guards, and the hybridize cache serving every size from one
// entry (automatic dynamic: a dim that changes becomes symbolic).
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/core/sym_shape.h"
#include "kiln/jit/compile/hybridize.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

// Attention over [batch, seq, 16] written as a user would, with sizes read
// through sym_shape: 2 heads of 8, scores, softmax, back to [batch, seq, 16].
Tensor attention(const Tensor& x, const Tensor& w) {
  DimList s = sym_shape(x);
  Tensor q = transpose(view(linear(x, w), DimList{s[0], s[1], 2, 8}), 1, 2);
  Tensor probs = softmax(matmul(q, transpose(q, 2, 3)), -1);
  return reshape(transpose(matmul(probs, q), 1, 2), DimList{s[0], s[1], -1});
}

RecordOptions batch_and_seq() {
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}, {0, 1, "seq"}};
  return options;
}

TEST(JitDynamicTrace, AttentionTracedOnceRunsEverySizeAsEager) {
  manual_seed(0);
  Tensor w = randn({16, 16});
  TracedFn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{attention(in[0], w)};
  };
  CompiledFunction f = trace(fn, {randn({2, 5, 16})}, batch_and_seq());
  ASSERT_TRUE(f.symbolic());
  EXPECT_EQ(to_string(f.graph().inputs()[0]->shape()), "[batch, seq, 16]");
  EXPECT_EQ(to_string(f.graph().outputs()[0]->shape()), "[batch, seq, 16]");
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {2, 128}, {2, 5}}) {
    Tensor x = randn({b, s, 16});
    EXPECT_TRUE(bitwise_equal(f({x})[0], attention(x, w))) << b << "x" << s;
  }
}

TEST(JitDynamicTrace, FlattenAndMinusOneMergeSymbols) {
  TracedFn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{reshape(flatten(in[0], 1), IntList{-1, 2})};
  };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "n"}};
  CompiledFunction f = trace(fn, {randn({3, 4, 5})}, options);
  EXPECT_EQ(to_string(f.graph().outputs()[0]->shape()), "[10*n, 2]");
  Tensor x = randn({7, 4, 5});
  EXPECT_TRUE(bitwise_equal(f({x})[0], reshape(x, {70, 2})));
}

TEST(JitDynamicTrace, ExampleSizeOfOneIsGeneral) {
  Tensor bias = randn({1, 8});
  TracedFn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + bias}; };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}};
  CompiledFunction f = trace(fn, {randn({1, 8})}, options);
  Tensor x = randn({6, 8});
  EXPECT_TRUE(bitwise_equal(f({x})[0], x + bias));
}

TEST(JitDynamicTrace, DecisionsBecomeGuardsThatCallsCheck) {
  // Broadcasting two symbols decides that they are equal.
  TracedFn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[1]}; };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "a"}, {1, 0, "b"}};
  CompiledFunction f = trace(fn, {randn({4, 3}), randn({4, 3})}, options);
  ASSERT_FALSE(f.graph().guards().empty());
  EXPECT_EQ(f.graph().guards()[0].to_string(), "a == b");
  EXPECT_EQ(f.size_mismatch(std::vector<Tensor>{randn({5, 3}), randn({5, 3})}), "");
  std::string why = f.size_mismatch(std::vector<Tensor>{randn({5, 3}), randn({6, 3})});
  EXPECT_NE(why.find("a == b"), std::string::npos) << why;
  EXPECT_THROW(f({randn({5, 3}), randn({6, 3})}), Error);
}

TEST(JitDynamicTrace, SizeReadAsIntIsGuardedAndReported) {
  TracedFn fn = [](const std::vector<Tensor>& in) {
    int64_t n = size_as_int(sym_size(in[0], 0), "int()");
    return std::vector<Tensor>{reshape(in[0], IntList{n, -1})};
  };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}};
  options.quiet = true;
  CompiledFunction f = trace(fn, {randn({4, 3, 2})}, options);
  ASSERT_EQ(f.graph().guards().size(), 1u);
  EXPECT_EQ(f.graph().guards()[0].to_string(), "batch == 4");
  ASSERT_EQ(f.warnings().size(), 1u);
  EXPECT_EQ(f.warnings()[0].kind, WarningKind::SizeSpecialized);
  EXPECT_NE(f.warnings()[0].message.find("batch == 4"), std::string::npos);
  EXPECT_NE(f.size_mismatch(std::vector<Tensor>{randn({5, 3, 2})}), "");
}

TEST(JitDynamicTrace, SharedSymbolAndBoundsAreChecked) {
  TracedFn add = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}};
  EXPECT_THROW(trace(add, {randn({2, 3}), randn({3, 3})}, options), Error);
  options.dynamic_dims = {{0, 0, "batch", 1, 8}, {1, 0, "batch"}};
  CompiledFunction f = trace(add, {randn({2, 3}), randn({2, 3})}, options);
  EXPECT_EQ(f.graph().guards().size(), 2u);
  EXPECT_EQ(f.size_mismatch(std::vector<Tensor>{randn({8, 3}), randn({8, 3})}), "");
  EXPECT_NE(f.size_mismatch(std::vector<Tensor>{randn({9, 3}), randn({9, 3})}), "");
  options.dynamic_dims = {{0, 0, "batch", 4, std::nullopt}};
  EXPECT_THROW(trace(add, {randn({2, 3}), randn({2, 3})}, options), Error);  // below min
  options.dynamic_dims = {{0, 5, "batch"}};
  EXPECT_THROW(trace(add, {randn({2, 3}), randn({2, 3})}, options), Error);  // no dim 5
}

// ---------------------------------------------------------------- the cache

TEST(JitDynamicTrace, AutomaticDynamicHoldsOneEntryForEveryBatch) {
  manual_seed(1);
  Tensor w = randn({16, 16});
  HybridCache cache("test", [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{attention(in[0], w)};
  });
  NoGradGuard no_grad;
  for (int64_t b : {2, 3, 5, 9, 1, 3}) {
    Tensor x = randn({b, 4, 16});
    EXPECT_TRUE(bitwise_equal(cache(std::vector<Tensor>{x}, false)[0], attention(x, w))) << b;
  }
  CacheInfo info = cache.info();
  ASSERT_EQ(info.entries.size(), 1u) << info.to_string();
  EXPECT_NE(info.entries[0].find("float32[s0, 4, 16]"), std::string::npos) << info.to_string();
  EXPECT_EQ(info.misses.size(), 2u) << info.to_string();  // the first call, then batch 2 -> 3
  EXPECT_EQ(info.hits, 4u);
}

TEST(JitDynamicTrace, FailedGuardRecordsANewEntryAndSaysWhich) {
  // A branch on a size: the traced path holds while seq <= 4.
  HybridCache cache(
      "test",
      [](const std::vector<Tensor>& in) {
        bool long_input = sym_size(in[0], 1) > Dim(4);
        return std::vector<Tensor>{long_input ? in[0] * 2.0 : in[0] + 1.0};
      },
      {}, {}, {}, DynamicShapes::Always);
  NoGradGuard no_grad;
  Tensor short_x = randn({2, 3}), long_x = randn({2, 9});
  EXPECT_TRUE(bitwise_equal(cache(std::vector<Tensor>{short_x}, false)[0], short_x + 1.0));
  Tensor other_short = randn({5, 4});  // another size the first entry admits
  EXPECT_TRUE(bitwise_equal(cache(std::vector<Tensor>{other_short}, false)[0], other_short + 1.0));
  EXPECT_EQ(cache.info().hits, 1u);
  EXPECT_TRUE(bitwise_equal(cache(std::vector<Tensor>{long_x}, false)[0], long_x * 2.0));
  CacheInfo info = cache.info();
  ASSERT_EQ(info.entries.size(), 2u) << info.to_string();
  EXPECT_NE(info.misses.back().find("s1 <= 4"), std::string::npos) << info.to_string();
  EXPECT_NE(info.entries[0].find("guards: s1 <= 4"), std::string::npos) << info.to_string();
}

TEST(JitDynamicTrace, NeverKeepsOneEntryPerShape) {
  HybridCache cache(
      "test", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; }, {},
      {}, {}, DynamicShapes::Never);
  NoGradGuard no_grad;
  for (int64_t b : {1, 2, 3})
    cache(std::vector<Tensor>{randn({b, 2})}, false);
  EXPECT_EQ(cache.size(), 3u);
}

}  // namespace
}  // namespace kiln::jit
