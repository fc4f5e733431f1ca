// A plan's independent branches as concurrent steps (Note [Concurrent
// steps], jit/exec/concurrency.h): which steps share a wave, and runs with
// waves side by side equal serial runs and eager ops bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/engine/engine.h"
#include "kiln/jit/exec/concurrency.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/random.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

// Restores the caller's intra-op thread count.
struct ThreadsGuard {
  int saved = cpu::max_threads();
  ~ThreadsGuard() { cpu::set_num_threads(saved); }
};

struct TwoChains {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Tensor w1 = randn({128, 128}), w2 = randn({128, 128});
  // Step indices of each chain's linears and tanhs, in order.
  std::vector<size_t> chain_a, chain_b;
};

// out = tanh(tanh(x W1) W1) + tanh(tanh(x W2) W2) (as linear ops): two
// chains that only meet at the final add.
TwoChains two_chains(int64_t batch, bool dropout_in_each = false) {
  TwoChains t;
  Graph& g = *t.graph;
  Value* x = g.add_input(f32({batch, 128}), "x");
  Value* p1 = g.add_param("w1", meta_of(t.w1), t.w1);
  Value* p2 = g.add_param("w2", meta_of(t.w2), t.w2);
  auto chain = [&](Value* w) {
    Value* h = x;
    for (int i = 0; i < 2; ++i) {
      h = g.append(op("linear"), {h, w, nullptr})->output();
      h = g.append(op("tanh"), {h})->output();
    }
    if (dropout_in_each) h = g.append(op("dropout"), {h}, {{"p", 0.5}, {"train", true}})->output();
    return h;
  };
  Value* a = chain(p1);
  Value* b = chain(p2);
  g.set_outputs({g.append(op("add"), {a, b})->output()});
  return t;
}

Tensor eager_two_chains(const TwoChains& t, const Tensor& x) {
  auto chain = [&](const Tensor& w) {
    Tensor h = x;
    for (int i = 0; i < 2; ++i) {
      h = dispatch1(op("linear"), {h, w, Tensor()}, {});
      h = dispatch1(op("tanh"), {h}, {});
    }
    return h;
  };
  return dispatch1(op("add"), {chain(t.w1), chain(t.w2)}, {});
}

// Each wave's op names, in step order.
std::vector<std::vector<std::string>> wave_ops(const Plan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const Wave& w : plan.waves) {
    out.emplace_back();
    for (uint32_t k = 0; k < w.count; ++k)
      out.back().push_back(plan.steps[w.first + k].op->name);
  }
  return out;
}

TEST(JitExecConcurrent, TheTwoChainsShareWaves) {
  TwoChains t = two_chains(64);
  Executable exe(t.graph);
  const Plan& plan = exe.plan();
  using Names = std::vector<std::string>;
  std::vector<Names> expected{
      {"linear", "linear"}, {"tanh", "tanh"}, {"linear", "linear"}, {"tanh", "tanh"}, {"add"}};
  EXPECT_EQ(wave_ops(plan), expected) << plan.to_string();
  // 64x128 floats: 32 KiB in, 32 KiB out, 64 KiB of weights per linear.
  EXPECT_TRUE(plan.has_concurrent_waves);
  EXPECT_TRUE(plan.waves[0].concurrent && plan.waves[2].concurrent);
  EXPECT_NE(plan.to_string().find("(side by side)"), std::string::npos) << plan.to_string();
  // The two chains' buffers of one wave never share bytes.
  EXPECT_GE(plan.memory.arena_bytes, 4 * 64 * 128 * 4) << plan.to_string();
}

TEST(JitExecConcurrent, SmallStepsStayInOrder) {
  TwoChains t = two_chains(1);  // one row: 512 bytes per tanh
  Executable exe(t.graph);
  const Plan& plan = exe.plan();
  ASSERT_EQ(plan.waves.size(), 5u) << plan.to_string();
  EXPECT_EQ(wave_ops(plan)[1], (std::vector<std::string>{"tanh", "tanh"}));
  EXPECT_FALSE(plan.waves[1].concurrent);  // independent, but not worth a thread
  EXPECT_TRUE(plan.waves[0].concurrent);   // the linears read 64 KiB of weights each
}

TEST(JitExecConcurrent, AChainHasNoWaves) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({64, 128}), "x");
  Value* h = g->append(op("tanh"), {x})->output();
  h = g->append(op("sigmoid"), {h})->output();
  g->set_outputs({g->append(op("relu"), {h})->output()});
  Executable exe(g);
  EXPECT_TRUE(exe.plan().waves.empty()) << exe.plan().to_string();
  EXPECT_FALSE(exe.plan().has_concurrent_waves);
}

TEST(JitExecConcurrent, RandomStepsKeepTheirOrder) {
  TwoChains t = two_chains(64, /*dropout_in_each=*/true);
  Executable exe(t.graph);
  const Plan& plan = exe.plan();
  for (const std::vector<std::string>& names : wave_ops(plan))
    EXPECT_LE(std::count(names.begin(), names.end(), "dropout"), 1) << plan.to_string();
  ThreadsGuard guard;
  Tensor x = randn({64, 128});
  cpu::set_num_threads(1);
  manual_seed(3);
  Tensor serial = exe.run({x})[0];
  cpu::set_num_threads(2);
  manual_seed(3);
  EXPECT_TRUE(bitwise_equal(exe.run({x})[0], serial));
}

TEST(JitExecConcurrent, SideBySideEqualsSerialAndEager) {
  ThreadsGuard guard;
  for (int64_t batch : {64, 256}) {
    TwoChains t = two_chains(batch);
    Executable exe(t.graph);
    Tensor x = randn({batch, 128});
    cpu::set_num_threads(1);
    Tensor expected = eager_two_chains(t, x);
    Tensor serial = exe.run({x})[0];
    EXPECT_TRUE(bitwise_equal(serial, expected)) << "batch " << batch;
    cpu::set_num_threads(2);
    for (int call = 0; call < 20; ++call)
      EXPECT_TRUE(bitwise_equal(exe.run({x})[0], serial)) << "batch " << batch << ", call " << call;
  }
}

TEST(JitExecConcurrent, AFailingStepRaisesOnce) {
  ThreadsGuard guard;
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({128, 128}), "x");
  Value* index = g->add_input(meta(DType::Int64, {1}), "index");
  Value* picked = g->append(op("index_select"), {x, index}, {{"dim", 0}})->output();
  Value* other = g->append(op("tanh"), {x})->output();
  Value* sum = g->append(op("sum"), {other})->output();
  g->set_outputs({picked, sum});
  Executable exe(g);
  cpu::set_num_threads(2);
  Tensor bad_index = full({1}, 500, DType::Int64);
  Error e = error_of([&] { exe.run({ones({128, 128}), bad_index}); });
  EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
  std::vector<Tensor> fine = exe.run({ones({128, 128}), full({1}, 5, DType::Int64)});
  EXPECT_EQ(fine[0].shape(), (IntList{1, 128}));
}

// Note [A compiled run as one engine op]: in async mode with two workers,
// a queued run waits for the runs before it on what it reads and writes,
// and for nothing else. The first run here reads a tensor an op holds
// (until released); a second plan's run on another tensor finishes
// meanwhile unless it draws random numbers, when it keeps draws in issue
// order behind the first.
class CompiledAsync : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::set_busy_fallback(false);
    // One thread in all: the held op below waits for another run, which
    // only a second worker can give it; no op may take every thread and
    // hold the other back (Note [A lone op takes every thread]).
    cpu::set_num_threads(1);
    engine::set_num_interop_threads(2);
    engine::set_execution(engine::Execution::Async);
  }
  void TearDown() override {
    engine::synchronize();
    engine::set_execution(engine::Execution::Sync);
    engine::set_num_interop_threads(1);
    cpu::set_num_threads(saved_threads_);
    engine::set_busy_fallback(true);
  }
  int saved_threads_ = cpu::max_threads();

  // Whether `second` finishes within `patience` while `first` waits for
  // an op that holds its input.
  static bool finishes_while_another_waits(const Executable& first, const Executable& second,
                                           std::chrono::milliseconds patience) {
    Tensor held = randn({8, 128}), free_input = randn({8, 128});
    std::atomic<bool> released{false}, holding{false};
    EngineVar* held_var = engine::var_of(*held.storage());
    engine::push(
        [&] {
          holding = true;
          while (!released.load())
            std::this_thread::yield();
        },
        {}, {&held_var, 1}, {"hold"});
    // On a worker before anyone waits: a waiting thread helps (Note [A
    // waiting caller helps]), and the reader below, taking `hold` from the
    // ready queue on a loaded machine, would hold it until `released`,
    // which comes only after the reader is done (20 s lost, a failure).
    while (!holding.load())
      std::this_thread::yield();
    std::vector<Tensor> waiting = first.run({held});
    std::vector<Tensor> out = second.run({free_input});
    std::atomic<bool> done{false};
    std::thread reader([&] {
      out[0].wait_for_engine();
      done = true;
    });
    auto deadline = std::chrono::steady_clock::now() + patience;
    while (!done.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    bool finished = done.load();
    released = true;
    reader.join();
    waiting[0].wait_for_engine();
    return finished;
  }
};

TEST_F(CompiledAsync, RunsOfPlansWithoutRandomStepsDoNotWaitForEachOther) {
  TwoChains a = two_chains(8), b = two_chains(8);
  Executable first(a.graph), second(b.graph);
  EXPECT_TRUE(finishes_while_another_waits(first, second, std::chrono::seconds(20)));
}

TEST_F(CompiledAsync, RunsThatDrawKeepIssueOrderOnTheGenerator) {
  TwoChains a = two_chains(8, /*dropout_in_each=*/true), b = two_chains(8, true);
  Executable first(a.graph), second(b.graph);
  EXPECT_FALSE(finishes_while_another_waits(first, second, std::chrono::milliseconds(200)));
}

}  // namespace
}  // namespace kiln::jit
