// Note [Threads per step]: which compiled steps run on one thread, what the
// profiler shows, and that a step's results do not change with the choice.
#include "kiln/ops/op_threads.h"

#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/profiler/profiler.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

// Restores the team size and the mode a test changed.
struct ThreadsScope {
  int threads = cpu::max_threads();
  StepThreads mode = step_threads();
  explicit ThreadsScope(int team) { cpu::set_num_threads(team); }
  ~ThreadsScope() {
    cpu::set_num_threads(threads);
    set_step_threads(mode);
  }
};

// relu of 4 numbers, and a 384 x 384 x 384 matmul (56M multiply-adds).
std::shared_ptr<Graph> tiny_and_big() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({4}), "x");
  Value* a = g->add_input(f32({384, 384}), "a");
  Value* b = g->add_input(f32({384, 384}), "b");
  Value* r = g->append(op("relu"), {x})->output();
  Value* m = g->append(op("matmul"), {a, b})->output();
  g->set_outputs({r, m});
  return g;
}

// Inputs for tiny_and_big().
std::vector<Tensor> tiny_and_big_inputs() {
  return {randn({4}), randn({384, 384}), randn({384, 384})};
}

const Step& step_of(const Executable& exe, const std::string& name) {
  for (const Step& step : exe.plan().steps) {
    if (step.op->name == name) return step;
  }
  throw std::runtime_error("no step " + name);
}

// The threads each step's profiler row says it ran on.
std::map<std::string, int> threads_by_step(const Executable& exe,
                                           const std::vector<Tensor>& inputs) {
  profiler::Profile prof;
  exe.run(inputs);
  prof.stop();
  std::map<std::string, int> threads;
  for (const profiler::EventAverage& row : prof.key_averages()) {
    if (row.kind != profiler::EventKind::Step) continue;
    EXPECT_EQ(row.threads_min, row.threads_max) << row.name;
    threads[row.name] = row.threads_max;
  }
  return threads;
}

TEST(StepThreads, TinyOpRunsOnOneThreadBigMatmulOnTheTeam) {
  ThreadsScope scope(2);
  set_step_threads(StepThreads::Choose);
  Executable exe(tiny_and_big());
  EXPECT_TRUE(step_of(exe, "relu").one_thread);
  EXPECT_FALSE(step_of(exe, "matmul").one_thread);
  std::vector<Tensor> inputs = tiny_and_big_inputs();
  std::map<std::string, int> threads = threads_by_step(exe, inputs);
  EXPECT_EQ(threads["relu"], 1);
  EXPECT_EQ(threads["matmul"], 2);
}

TEST(StepThreads, AllPutsEveryStepOnTheTeam) {
  ThreadsScope scope(2);
  set_step_threads(StepThreads::All);
  Executable exe(tiny_and_big());
  EXPECT_FALSE(step_of(exe, "relu").one_thread);
  std::map<std::string, int> threads = threads_by_step(exe, tiny_and_big_inputs());
  EXPECT_EQ(threads["relu"], 2);
}

TEST(StepThreads, OneThreadTeamRecordsOneForEveryStep) {
  ThreadsScope scope(1);
  set_step_threads(StepThreads::Choose);
  Executable exe(tiny_and_big());
  std::map<std::string, int> threads = threads_by_step(exe, tiny_and_big_inputs());
  EXPECT_EQ(threads["relu"], 1);
  EXPECT_EQ(threads["matmul"], 1);
}

TEST(StepThreads, TableShowsThreadsOnlyForCompiledSteps) {
  ThreadsScope scope(2);
  set_step_threads(StepThreads::Choose);
  Executable exe(tiny_and_big());
  std::vector<Tensor> inputs = tiny_and_big_inputs();
  profiler::Profile prof;
  exe.run(inputs);
  relu(inputs[0]);  // an eager op: no threads recorded
  prof.stop();
  const std::string table = profiler::table(prof.key_averages());
  EXPECT_NE(table.find("Threads"), std::string::npos) << table;
  profiler::Profile eager_only;
  relu(inputs[0]);
  eager_only.stop();
  EXPECT_EQ(profiler::table(eager_only.key_averages()).find("Threads"), std::string::npos);
}

// A small convolution (oneDNN) on one thread inside a two-thread plan gives
// what the same convolution gives eagerly, at one thread or at two (eager
// dispatch makes the same choice), bit for bit: its primitive is one made
// for one thread, not the team's.
TEST(StepThreads, OneThreadConvolutionMatchesEager) {
  Tensor x = randn({1, 8, 6, 6}), w = randn({8, 8, 3, 3});
  Tensor want;
  {
    ThreadsScope one(1);
    want = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  }
  ThreadsScope scope(2);
  set_step_threads(StepThreads::Choose);
  EXPECT_TRUE(bitwise_equal(conv2d(x, w, Tensor(), {1, 1}, {1, 1}), want));
  Executable exe(conv3x3_graph(w, {1, 8, 6, 6}));
  EXPECT_TRUE(step_of(exe, "conv2d").one_thread);
  EXPECT_TRUE(bitwise_equal(exe.run({x})[0], want));
}

TEST(StepThreads, AnOpTheModelDoesNotKnowKeepsTheTeam) {
  EXPECT_EQ(estimate_one_thread_ns(op("sort"), {}, {}), -1);
  EXPECT_FALSE(runs_on_one_thread(op("sort"), {}, {}));
}

}  // namespace
}  // namespace kiln::jit
