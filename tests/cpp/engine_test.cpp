// The dependency engine: ordering on variables, reads side by side, errors
// where they were made, backpressure, and dispatch through it (async
// results equal sync results bit for bit).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kiln/core/factory.h"
#include "kiln/engine/engine.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"
#include "kiln/profiler/profiler.h"
#include "test_util.h"

namespace kiln {
namespace {

// Runs the test body in async mode with `workers` workers (and `threads`
// OpenMP threads in all, when given), and restores sync mode and the
// defaults after.
class EngineTest : public ::testing::Test {
 protected:
  void use(engine::Execution mode, int workers = 1, int threads = 0) {
    engine::set_busy_fallback(false);  // these tests queue whatever the machine's load
    if (threads > 0) cpu::set_num_threads(threads);  // the pool starts with them
    engine::set_num_interop_threads(workers);
    engine::set_execution(mode);
  }
  void TearDown() override {
    cpu::set_num_threads(saved_threads_);
    try {
      engine::synchronize();
    } catch (const Error&) {
    }
    engine::set_execution(engine::Execution::Sync);
    engine::set_limits({});
    engine::set_num_interop_threads(1);
    engine::prefer_caller_for(0);
    engine::set_busy_fallback(true);
  }

 private:
  int saved_threads_ = cpu::max_threads();
};

// Ops here wait for each other (held until another op runs), which only
// two workers side by side can do. With one thread in all, no op runs with
// every thread and holds the other back (Note [A lone op takes every
// thread]): one that started 50 µs after its push, the test thread having
// been descheduled between two pushes, would wait forever.
constexpr int kOneThread = 1;

TEST_F(EngineTest, BusyCoresSendLargeOpsToTheCallerWithAsyncErrors) {
  use(engine::Execution::Async);
  Tensor big = randn({256, 256});
  Tensor queued = matmul(big, big);  // queued before the fallback: waited for, not raced
  engine::set_busy_fallback(true);
  engine::prefer_caller_for(60'000);
  EXPECT_EQ(engine::effective_execution(), engine::Execution::Sync);
  int64_t pushed = engine::stats().pushed;
  Tensor sum = add(queued, big);  // 768 KiB touched: queued but for the fallback
  EXPECT_EQ(engine::stats().pushed, pushed);
  Tensor index = full({4}, 300.0, DType::Int64);
  Tensor bad = index_select(big, 0, index);  // fails on the caller, raises at the sync point
  EXPECT_EQ(engine::stats().pushed, pushed);
  Error e = error_of([&] { bad.data_ptr(); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_NO_THROW(engine::synchronize());
  engine::set_execution(engine::Execution::Sync);
  EXPECT_EQ(sum.to_vector<float>(), add(matmul(big, big), big).to_vector<float>());
  engine::set_busy_fallback(false);  // a forced fallback needs it on
  engine::set_execution(engine::Execution::Async);
  EXPECT_EQ(engine::effective_execution(), engine::Execution::Async);
}

// A storage to hang a variable on.
EngineVar* fresh_var(Storage& keep) {
  keep = std::make_shared<StorageImpl>(8);
  return engine::var_of(*keep);
}

// Spins until `ready` or a generous deadline; tests only use it to see two
// ops inside at once, never to time anything.
template <typename Ready>
bool eventually(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Note [A waiting caller helps]: with two workers, an op ready while the
// caller waits may run on the caller. Here the caller waits for `blocked`,
// which holds a worker until `unblock` runs, and `unblock` is ready at
// once: the caller or the other worker runs it, and when the other worker
// sleeps the caller, already waiting, usually comes first.
TEST_F(EngineTest, AWaitingCallerRunsReadyOps) {
  use(engine::Execution::Async, 2, kOneThread);
  Storage s1, s2;
  EngineVar* blocked_var = fresh_var(s1);
  EngineVar* unblock_var = fresh_var(s2);
  int64_t before = engine::stats().ran_by_waiting_caller;
  int on_caller = 0;
  for (int i = 0; i < 100; ++i) {
    std::atomic<bool> released{false};
    std::thread::id blocked_on, unblock_on;
    engine::push(
        [&] {
          blocked_on = std::this_thread::get_id();
          eventually([&] { return released.load(); });
        },
        {}, {&blocked_var, 1}, {"blocked"});
    engine::push(
        [&] {
          unblock_on = std::this_thread::get_id();
          released = true;
        },
        {}, {&unblock_var, 1}, {"unblock"});
    blocked_var->wait_for_host_access();
    unblock_var->wait_for_host_access();
    ASSERT_TRUE(released.load());
    EXPECT_NE(blocked_on, unblock_on);
    on_caller += int(blocked_on == std::this_thread::get_id()) +
                 int(unblock_on == std::this_thread::get_id());
  }
  EXPECT_GT(on_caller, 0);
  EXPECT_EQ(engine::stats().ran_by_waiting_caller - before, on_caller);
}

// The caller helps only while fewer ops run than there are workers: with
// both workers held, a ready op waits for one of them to finish.
TEST_F(EngineTest, AWaitingCallerRunsNoMoreOpsThanTheWorkers) {
  use(engine::Execution::Async, 2, kOneThread);
  Storage s1, s2, s3;
  EngineVar* held[] = {fresh_var(s1), fresh_var(s2)};
  EngineVar* third = fresh_var(s3);
  std::atomic<bool> released{false};
  std::atomic<int> holding{0};
  for (EngineVar*& v : held) {
    engine::push(
        [&] {
          ++holding;
          eventually([&] { return released.load(); });
        },
        {}, {&v, 1}, {"hold"});
  }
  ASSERT_TRUE(eventually([&] { return holding.load() == 2; }));
  bool ran_while_held = true;
  engine::push([&] { ran_while_held = !released.load(); }, {}, {&third, 1}, {"third"});
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    released = true;
  });
  third->wait_for_host_access();  // the caller waits here, and may not run `third` yet
  releaser.join();
  EXPECT_FALSE(ran_while_held);
}

// Four OpenMP threads (two per worker), on any machine: OpenMP makes as
// many as asked.
constexpr int kFourThreads = 4;

// Note [A lone op takes every thread]: an op that runs alone, pushed long
// before it could start, gets the pool's four threads; ops side by side
// keep their worker's two.
TEST_F(EngineTest, ALoneOpRunsWithEveryThreadAndOpsSideBySideWithTheirShare) {
  use(engine::Execution::Async, 2, kFourThreads);
  Storage s1, s2, s3;
  EngineVar* chain = fresh_var(s1);
  int first = 0, second = 0;
  int64_t before = engine::stats().ran_with_every_thread;
  engine::push(
      [&] {
        first = cpu::max_threads();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      {}, {&chain, 1}, {"first"});
  engine::push([&] { second = cpu::max_threads(); }, {}, {&chain, 1}, {"second"});
  chain->wait_for_host_access();
  EXPECT_EQ(second, 4);  // started 2 ms after the last push, alone
  EXPECT_GE(engine::stats().ran_with_every_thread - before, 1);
  (void)first;  // 2 or 4: whether it began within 50 µs of its push is the host's to say

  // Two ops made ready together by the end of a gate op, so neither is
  // ever alone (were they pushed ready, a test thread descheduled between
  // the two pushes could leave the first alone 50 µs after its push).
  Storage gate_storage;
  EngineVar* gate = fresh_var(gate_storage);
  std::atomic<bool> open{false};
  engine::push([&] { eventually([&] { return open.load(); }); }, {}, {&gate, 1}, {"gate"});
  EngineVar* side[] = {fresh_var(s2), fresh_var(s3)};
  std::atomic<int> threads[2] = {0, 0};
  std::atomic<int> started{0};
  for (int i = 0; i < 2; ++i) {
    engine::push(
        [&, i] {
          threads[i] = cpu::max_threads();
          ++started;
          eventually([&] { return started.load() == 2; });  // both run at once
        },
        {&gate, 1}, {&side[i], 1}, {"side by side"});
  }
  open = true;
  engine::synchronize();
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(threads[0].load(), 2);
  EXPECT_EQ(threads[1].load(), 2);
}

// The first op of a burst runs alone once the caller waits for it: it
// gets every thread whether it started before the wait or after, on a
// worker or on the waiting caller (Note [A lone op takes every thread]).
TEST_F(EngineTest, AnOpIssuedAndWaitedForAtOnceRunsWithEveryThread) {
  use(engine::Execution::Async, 2, kFourThreads);
  for (int round = 0; round < 20; ++round) {
    Storage s;
    EngineVar* v = fresh_var(s);
    int threads = 0;
    engine::push([&] { threads = cpu::max_threads(); }, {}, {&v, 1}, {"issued, then waited for"});
    v->wait_for_host_access();
    EXPECT_EQ(threads, 4) << "round " << round;
  }
}

// While an op runs with every thread, an op made ready meanwhile waits for
// it (as in sync mode), rather than add its worker's threads to the pool's.
TEST_F(EngineTest, OpsReadyWhileALoneOpHoldsEveryThreadWaitForIt) {
  use(engine::Execution::Async, 2, kFourThreads);
  Storage s1, s2;
  EngineVar* lone = fresh_var(s1);
  EngineVar* later = fresh_var(s2);
  std::atomic<bool> wide_started{false}, wide_done{false};
  int lone_threads = 0;
  bool lone_was_done = false;
  engine::push([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }, {}, {&lone, 1},
               {"before"});
  engine::push(
      [&] {
        lone_threads = cpu::max_threads();
        wide_started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        wide_done = true;
      },
      {}, {&lone, 1}, {"lone"});
  ASSERT_TRUE(eventually([&] { return wide_started.load(); }));
  engine::push([&] { lone_was_done = wide_done.load(); }, {}, {&later, 1}, {"later"});
  later->wait_for_host_access();  // the caller may not run it either
  EXPECT_EQ(lone_threads, 4);
  EXPECT_TRUE(lone_was_done);
}

TEST_F(EngineTest, SyncModeRunsAtOnce) {
  use(engine::Execution::Sync);
  Storage s;
  EngineVar* v = fresh_var(s);
  int ran = 0;
  engine::push([&] { ++ran; }, {}, {&v, 1}, {"count"});
  EXPECT_EQ(ran, 1);
}

TEST_F(EngineTest, WritesRunInPushOrder) {
  use(engine::Execution::Async, 2);
  Storage s;
  EngineVar* v = fresh_var(s);
  std::vector<int> order;
  for (int i = 0; i < 500; ++i)
    engine::push([&order, i] { order.push_back(i); }, {}, {&v, 1}, {"append"});
  v->wait_for_host_access();
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i)
    EXPECT_EQ(order[size_t(i)], i);
}

TEST_F(EngineTest, ReadsRunTogetherAndAWriteAlone) {
  use(engine::Execution::Async, 2);
  Storage s;
  EngineVar* v = fresh_var(s);
  std::atomic<int> inside{0};
  std::atomic<bool> both_seen{false}, write_alone{false};
  auto read = [&] {  // stays inside until some read saw both inside at once
    ++inside;
    eventually([&] {
      if (inside.load() == 2) both_seen = true;
      return both_seen.load();
    });
    --inside;
  };
  engine::push(read, {&v, 1}, {}, {"read"});
  engine::push(read, {&v, 1}, {}, {"read"});
  engine::push([&] { write_alone = inside.load() == 0; }, {}, {&v, 1}, {"write"});
  engine::synchronize();
  EXPECT_TRUE(both_seen.load());
  EXPECT_TRUE(write_alone.load());
}

TEST_F(EngineTest, FailureRaisesAtADependentsSyncWithItsSite) {
  use(engine::Execution::Async);
  Storage a, b, c;
  EngineVar* va = fresh_var(a);
  EngineVar* vb = fresh_var(b);
  EngineVar* vc = fresh_var(c);
  bool dependent_ran = false;
  engine::push([] { KILN_CHECK_INDEX(false, "boom: index 7 out of range"); }, {}, {&va, 1},
               {"boom", "model.cpp:12"});
  engine::push([&] { dependent_ran = true; }, {&va, 1}, {&vb, 1}, {"after"});
  engine::push([] {}, {}, {&vc, 1}, {"unrelated"});
  vc->wait_for_host_access();  // no failure here
  Error e = error_of([&] { vb->wait_for_host_access(); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(e, "boom (issued at model.cpp:12)")) << e.what();
  EXPECT_TRUE(mentions(e, "index 7 out of range")) << e.what();
  EXPECT_FALSE(dependent_ran);
  EXPECT_NO_THROW(engine::synchronize());  // raised once already
  // The values are not there: reading them again raises again.
  EXPECT_THROW(va->wait_for_host_access(), Error);
}

TEST_F(EngineTest, SynchronizeRaisesAnUnseenFailureOnce) {
  use(engine::Execution::Async);
  Storage a;
  EngineVar* va = fresh_var(a);
  engine::push([] { KILN_CHECK(false, "kaput"); }, {}, {&va, 1}, {"fails"});
  EXPECT_TRUE(mentions(error_of([] { engine::synchronize(); }), "fails failed"));
  EXPECT_NO_THROW(engine::synchronize());
}

TEST_F(EngineTest, AFailedDrawLeavesTheGeneratorUsable) {
  use(engine::Execution::Async);
  EngineVar* gen = engine::var_of(default_generator());
  engine::push([] { KILN_CHECK(false, "bad draw"); }, {}, {&gen, 1}, {"draw"});
  EXPECT_TRUE(mentions(error_of([] { engine::synchronize(); }), "bad draw"));
  manual_seed(1);
  std::vector<float> async_draw = randn({4}).to_vector<float>();
  use(engine::Execution::Sync);
  manual_seed(1);
  EXPECT_EQ(randn({4}).to_vector<float>(), async_draw);
}

TEST_F(EngineTest, InFlightOpsAreBounded) {
  use(engine::Execution::Async);
  engine::set_limits({.max_ops = 4, .max_bytes = int64_t(1) << 30});
  engine::reset_peak_stats();
  Storage s;
  EngineVar* v = fresh_var(s);
  std::atomic<int> ran{0};
  for (int i = 0; i < 200; ++i)
    engine::push([&] { ++ran; }, {}, {&v, 1}, {"tick"});
  engine::synchronize();
  EXPECT_EQ(ran.load(), 200);
  EXPECT_LE(engine::stats().peak_in_flight, 4);
}

TEST_F(EngineTest, InFlightBytesAreBounded) {
  use(engine::Execution::Async);
  engine::set_limits({.max_ops = 1 << 20, .max_bytes = 4096, .inline_bytes = 0});
  engine::reset_peak_stats();
  Tensor y = zeros({256});  // 1 KiB per result
  for (int i = 0; i < 300; ++i)
    y = add(y, 1.0);
  EXPECT_EQ(y.to_vector<float>()[0], 300.0f);
  EXPECT_LE(engine::stats().peak_in_flight_bytes, 4096);
}

// The same program in both modes: chains, in-place writes through views,
// aliasing reads, random draws and matmuls.
std::vector<float> mixed_program() {
  manual_seed(7);
  Tensor x = randn({8, 8});
  Tensor w = randn({8, 8});
  Tensor acc = zeros({8, 8});
  for (int i = 0; i < 20; ++i) {
    Tensor h = matmul(x, w);
    add_(acc, h);
    Tensor row = select(acc, 0, i % 8);  // a view: writes through it order with acc's
    mul_(row, 0.5);
    x = add(tanh(h), randn({8, 8}));
  }
  return add(acc, x).to_vector<float>();
}

TEST_F(EngineTest, AsyncEqualsSyncBitForBit) {
  use(engine::Execution::Sync);
  std::vector<float> expected = mixed_program();
  for (int64_t inline_bytes : {int64_t(0), engine::Limits{}.inline_bytes}) {
    engine::set_limits({.inline_bytes = inline_bytes});
    for (int workers : {1, 2}) {
      use(engine::Execution::Async, workers);
      EXPECT_EQ(mixed_program(), expected) << workers << " workers, inline " << inline_bytes;
    }
  }
}

TEST_F(EngineTest, RunIfIdleRunsAtOnceOnlyWhenNothingIsPending) {
  use(engine::Execution::Async);
  Storage s;
  EngineVar* v = fresh_var(s);
  std::atomic<bool> release{false};
  engine::push([&] { eventually([&] { return release.load(); }); }, {}, {&v, 1}, {"hold"});
  int ran = 0;
  auto count = [&] { ++ran; };
  int64_t before = engine::stats().ran_inline;
  EXPECT_FALSE(engine::run_if_idle(count, {&v, 1}, {}, {"count"}));  // the write is pending
  EXPECT_EQ(ran, 0);
  release = true;
  v->wait_for_host_access();
  EXPECT_TRUE(engine::run_if_idle(count, {&v, 1}, {}, {"count"}));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(engine::stats().ran_inline, before + 1);
  use(engine::Execution::Sync);
  EXPECT_FALSE(engine::run_if_idle(count, {&v, 1}, {}, {"count"}));  // sync mode: not its job
}

TEST_F(EngineTest, AFailureRunAtOnceRaisesAtTheSyncPoint) {
  use(engine::Execution::Async);
  Storage s;
  EngineVar* v = fresh_var(s);
  auto fail = [] { KILN_CHECK_INDEX(false, "inner: index 5 is out of range"); };
  EXPECT_TRUE(engine::run_if_idle(fail, {}, {&v, 1}, {"pick", "here.cc:7"}));  // no throw
  Error e = error_of([&] { v->wait_for_host_access(); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(e,
                       "pick (issued at here.cc:7) failed while running asynchronously: "
                       "inner: index 5"))
      << e.what();
  EXPECT_NO_THROW(engine::synchronize());  // raised at the sync point already
  int ran = 0;
  auto count = [&] { ++ran; };
  EXPECT_FALSE(engine::run_if_idle(count, {&v, 1}, {}, {"count"}));  // inherits: queued
}

TEST_F(EngineTest, DispatchRunsSmallOpsAtOnceAndQueuesLargeOnes) {
  use(engine::Execution::Async);
  Tensor small = zeros({4});
  Tensor large = zeros({64, 1024});
  engine::Stats before = engine::stats();
  Tensor a = add(small, 1.0);
  engine::Stats after_small = engine::stats();
  Tensor b = add(large, 1.0);
  engine::Stats after_large = engine::stats();
  EXPECT_GT(after_small.ran_inline, before.ran_inline);
  EXPECT_EQ(after_small.pushed, before.pushed);
  EXPECT_GT(after_large.pushed, after_small.pushed);
  EXPECT_EQ(a.to_vector<float>()[3], 1.0f);
  EXPECT_EQ(b.to_vector<float>()[5000], 1.0f);
}

TEST_F(EngineTest, DispatchedFailureNamesOpAndShapes) {
  use(engine::Execution::Async);
  Tensor x = ones({3, 2});
  Tensor bad = index_select(x, 0, full({1}, 5, DType::Int64));
  Tensor dependent = add(bad, 1.0);
  Tensor unrelated = add(x, 1.0);
  EXPECT_EQ(unrelated.to_vector<float>()[0], 2.0f);
  Error e = error_of([&] { dependent.to_vector<float>(); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(e, "index_select failed while running asynchronously")) << e.what();
  EXPECT_TRUE(mentions(e, "input shapes: [3, 2], [1]")) << e.what();
}

TEST_F(EngineTest, ACppCallerNamesItsSite) {
  use(engine::Execution::Async);
  engine::set_limits({.inline_bytes = 0});
  Tensor x = ones({3, 2});
  Tensor bad;
  int line = 0;
  {
    line = __LINE__ + 1;
    KILN_ENGINE_SITE();
    bad = index_select(x, 0, full({1}, 5, DType::Int64));
  }
  Error e = error_of([&] { bad.to_vector<float>(); });
  EXPECT_TRUE(mentions(e, str("index_select (issued at engine_test.cpp:", line, ") failed")))
      << e.what();
  engine::set_limits({});  // the default: the op runs at once, the site is asked when it fails
  {
    KILN_ENGINE_SITE();
    bad = index_select(x, 0, full({1}, 7, DType::Int64));
  }
  e = error_of([&] { bad.to_vector<float>(); });
  EXPECT_TRUE(mentions(e, "(issued at engine_test.cpp:")) << e.what();
  Tensor outside = index_select(x, 0, full({1}, 9, DType::Int64));
  e = error_of([&] { outside.to_vector<float>(); });
  EXPECT_TRUE(mentions(e, "index_select failed while running asynchronously")) << e.what();
}

TEST_F(EngineTest, SeveralThreadsPushing) {
  use(engine::Execution::Sync);
  Tensor shared = full({64}, 0.5);
  auto chain = [&](int seed) {
    Tensor y = full({64}, double(seed));
    for (int i = 0; i < 200; ++i)
      y = add(mul(y, shared), 1.0);
    return y.to_vector<float>();
  };
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < 4; ++t)
    expected.push_back(chain(t));
  use(engine::Execution::Async, 2);
  for (int64_t inline_bytes : {int64_t(0), engine::Limits{}.inline_bytes}) {
    engine::set_limits({.inline_bytes = inline_bytes});
    std::vector<std::vector<float>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] { got[size_t(t)] = chain(t); });
    for (std::thread& th : threads)
      th.join();
    EXPECT_EQ(got, expected) << "inline " << inline_bytes;
  }
}

TEST_F(EngineTest, TheProfilerRecordsQueuedKernelsOnTheWorkers) {
  use(engine::Execution::Async);  // one worker: a waiting caller does not help it
  Tensor a = ones({128, 128});
  Tensor b = ones({128, 128});
  engine::synchronize();
  profiler::Profile prof;
  Tensor c = matmul(a, a);  // 192 KiB touched: queued
  Tensor d = matmul(b, b);
  engine::synchronize();
  prof.stop();
  std::vector<const profiler::Event*> kernels, ops;
  for (const profiler::Event& e : prof.events()) {
    if (e.kind == profiler::EventKind::Kernel) kernels.push_back(&e);
    if (e.kind == profiler::EventKind::Op) ops.push_back(&e);
  }
  ASSERT_EQ(kernels.size(), 2u);
  ASSERT_EQ(ops.size(), 2u);
  for (const profiler::Event* k : kernels) {
    EXPECT_EQ(k->name, "matmul");
    EXPECT_NE(k->thread, ops[0]->thread);
    EXPECT_GE(k->queued_ns, ops[0]->start_ns);
    EXPECT_LE(k->queued_ns, k->start_ns);
  }
  std::string trace = prof.chrome_trace();
  EXPECT_NE(trace.find("\"name\": \"engine worker (thread "), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"Queue wait\": "), std::string::npos) << trace;
  EXPECT_EQ(c.to_vector<float>()[0], 128.0f);
  EXPECT_EQ(d.to_vector<float>()[0], 128.0f);
}

}  // namespace
}  // namespace kiln
