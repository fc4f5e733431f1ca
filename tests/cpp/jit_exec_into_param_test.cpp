// Outputs written into a parameter's own memory (OutputIntoParam): what a
// compiled training step does with its new weights. Every case is checked
// against the same graph run with fresh outputs, and the plan text shows
// whether the producing kernel wrote in place or a copy at the end did.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/allocator.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

// w_new = w - 0.5 * g, and what else a case adds to the graph.
struct Step {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Tensor weight = randn({4, 4});
  Value* g = graph->add_input(f32({4, 4}), "g");
  Value* w = graph->add_param("w", f32({4, 4}), weight);
  Value* updated() {
    Value* half = graph->add_constant(scalar_tensor(0.5));
    Value* scaled = graph->append(op("mul"), {g, half})->output();
    return graph->append(op("sub"), {w, scaled})->output();
  }
};

bool step_writes_in_place(const Executable& exe, const std::string& producer) {
  const std::string plan = exe.plan().to_string();
  return plan.find(producer + "(") != std::string::npos && plan.find("clone(") == std::string::npos;
}

TEST(JitExecIntoParam, LastReaderWritesStraightIntoTheParameter) {
  Step s;
  s.graph->set_outputs({s.updated()});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  Tensor g = randn({4, 4});
  Tensor expected = sub(s.weight, mul(g, 0.5));
  const int64_t version = s.weight.version();
  const int64_t allocations = allocator_stats().total_allocations;
  std::vector<Tensor> y = exe.run({g});
  EXPECT_EQ(allocator_stats().total_allocations, allocations) << "no fresh result";
  EXPECT_TRUE(y[0].is_alias_of(s.weight));
  EXPECT_TRUE(bitwise_equal(s.weight, expected));
  EXPECT_GT(s.weight.version(), version);
  EXPECT_TRUE(step_writes_in_place(exe, "sub")) << exe.plan().to_string();
  exe.run({g});
  EXPECT_TRUE(bitwise_equal(s.weight, sub(expected, mul(g, 0.5)))) << "the next call reads it";
}

TEST(JitExecIntoParam, LaterReadsOfTheOldValueMakeItACopyAtTheEnd) {
  Step s;
  Value* x = s.graph->add_input(f32({2, 4}), "x");
  Value* w_new = s.updated();
  Value* y = s.graph->append(op("matmul"), {x, s.w})->output();  // after the update, old w
  s.graph->set_outputs({w_new, y});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  EXPECT_NE(exe.plan().to_string().find("clone("), std::string::npos) << exe.plan().to_string();
  Tensor g = randn({4, 4}), input = randn({2, 4});
  Tensor old = clone(s.weight);
  std::vector<Tensor> out = exe.run({g, input});
  EXPECT_TRUE(bitwise_equal(out[1], matmul(input, old)));
  EXPECT_TRUE(bitwise_equal(s.weight, sub(old, mul(g, 0.5))));
}

TEST(JitExecIntoParam, TheParameterReturnedBesideItsUpdateIsTheOldValue) {
  Step s;
  s.graph->set_outputs({s.updated(), s.w});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  Tensor g = randn({4, 4});
  Tensor old = clone(s.weight);
  std::vector<Tensor> out = exe.run({g});
  EXPECT_TRUE(bitwise_equal(out[1], old));
  EXPECT_FALSE(out[1].is_alias_of(s.weight));
  EXPECT_TRUE(bitwise_equal(s.weight, sub(old, mul(g, 0.5))));
}

TEST(JitExecIntoParam, AProducerReadingAViewOfTheParameterDoesNotWriteOverIt) {
  Step s;
  Value* wt = s.graph->append(op("transpose"), {s.w}, {{"dim0", 0}, {"dim1", 1}})->output();
  Value* sum = s.graph->append(op("add"), {s.w, wt})->output();  // w + w^T
  s.graph->set_outputs({sum});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  Tensor old = clone(s.weight);
  exe.run({randn({4, 4})});
  EXPECT_TRUE(bitwise_equal(s.weight, add(old, transpose(old, 0, 1))));
}

TEST(JitExecIntoParam, AKernelThatIsNotElementwiseWritesInPlaceOnlyAfterTheLastRead) {
  Step s;
  Value* x = s.graph->add_input(f32({4, 4}), "x");
  Value* product = s.graph->append(op("matmul"), {x, s.w})->output();  // reads w
  s.graph->set_outputs({product});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  Tensor input = randn({4, 4}), old = clone(s.weight);
  exe.run({randn({4, 4}), input});
  EXPECT_TRUE(bitwise_equal(s.weight, matmul(input, old)));
  EXPECT_NE(exe.plan().to_string().find("clone("), std::string::npos);
}

TEST(JitExecIntoParam, RunIntoWantsTheParameterItself) {
  Step s;
  s.graph->set_outputs({s.updated()});
  Executable exe(s.graph, std::vector<OutputIntoParam>{{0, s.w}});
  Tensor g = randn({4, 4});
  Error wrong = error_of([&] {
    exe.run_into(std::vector<Tensor>{g}, std::vector<Tensor>{zeros({4, 4})});
  });
  EXPECT_TRUE(mentions(wrong, "written into parameter 'w'")) << wrong.what();
  Tensor expected = sub(s.weight, mul(g, 0.5));
  exe.run_into(std::vector<Tensor>{g}, std::vector<Tensor>{s.weight});
  EXPECT_TRUE(bitwise_equal(s.weight, expected));
}

TEST(JitExecIntoParam, NonDenseParametersAndBadEntries) {
  Step s;
  auto g = std::make_shared<Graph>();
  Tensor strided = transpose(randn({4, 4}), 0, 1);
  Value* w = g->add_param("w", f32({4, 4}), strided);
  Value* doubled = g->append(op("add"), {w, w})->output();
  g->set_outputs({doubled});
  Executable exe(g, std::vector<OutputIntoParam>{{0, w}});
  Tensor old = clone(strided);
  std::vector<Tensor> y = exe.run({});
  EXPECT_FALSE(y[0].is_alias_of(strided)) << "a strided parameter keeps a fresh result";
  EXPECT_TRUE(bitwise_equal(strided, old));
  Error bad = error_of([&] { Executable(g, std::vector<OutputIntoParam>{{3, w}}); });
  EXPECT_TRUE(mentions(bad, "names no output")) << bad.what();
}

}  // namespace
}  // namespace kiln::jit
