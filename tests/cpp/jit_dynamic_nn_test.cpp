// The C++ nn functions traced with a dynamic batch: sizes they compute go
// through sym_shape or ops, never a number read off the example, so one
// graph gives eager's result at every batch size.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"

namespace kiln::jit {
namespace {

namespace F = nn::functional;

struct LossCase {
  const char* name;
  F::CrossEntropyLossOptions options;
  bool probability_target = false;
};

Tensor target_for(int64_t batch, bool probabilities) {
  if (probabilities) return softmax(randn({batch, 5}), 1);
  Tensor t = randint(0, 5, {batch});
  t.data<int64_t>()[0] = -100;  // one ignored target
  return t;
}

TEST(JitDynamicNn, CrossEntropyTracedOnceMatchesEagerAtEveryBatch) {
  manual_seed(3);
  const Tensor weight = rand({5}) + 0.5;
  const std::vector<LossCase> cases = {
      {"mean", {}},
      {"weighted mean", {.weight = weight}},
      {"label smoothing", {.weight = weight, .label_smoothing = 0.1}},
      {"probabilities", {}, true},
      {"sum", {.reduction = "sum"}},
      {"none", {.reduction = "none"}},
  };
  for (const LossCase& c : cases) {
    TracedFn fn = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{F::cross_entropy(in[0], in[1], c.options)};
    };
    RecordOptions options;
    options.dynamic_dims = {{0, 0, "batch"}, {1, 0, "batch"}};
    CompiledFunction f = trace(fn, {randn({4, 5}), target_for(4, c.probability_target)}, options);
    EXPECT_TRUE(f.symbolic()) << c.name;
    for (int64_t batch : {1, 3, 9}) {
      Tensor x = randn({batch, 5}), t = target_for(batch, c.probability_target);
      Tensor want = F::cross_entropy(x, t, c.options);
      Tensor got = f({x, t})[0];
      EXPECT_TRUE(bitwise_equal(got, want)) << c.name << " at batch " << batch;
    }
  }
}

// A trace decides `features == 8` where linear contracts; the passes that
// rewrite linear + relu into one node infer again and must decide the same
// (regression: they ran without the graph's guards and refused the shapes).
TEST(JitDynamicNn, PassesDecideAsTheTraceDid) {
  manual_seed(4);
  Tensor w = randn({4, 8}), b = randn({4});
  TracedFn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(linear(in[0], w, b))};
  };
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}, {0, 1, "features"}};
  CompiledFunction f = trace(fn, {randn({2, 8})}, options);
  EXPECT_EQ(f.report().count("fuse linear + relu"), 1) << f.report().to_string();
  Tensor x = randn({5, 8});
  EXPECT_TRUE(bitwise_equal(f({x})[0], relu(linear(x, w, b))));
  EXPECT_THROW(f({randn({5, 9})}), Error);  // features == 8 is a guard
}

}  // namespace
}  // namespace kiln::jit
