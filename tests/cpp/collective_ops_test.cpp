// all_reduce_start / all_reduce_wait on one process: their IR text, shape
// inference, errors, what the passes keep, and a compiled plan running other
// steps between the two. The all-reduce itself is a stand-in hook here (the
// "ranks" are this process, twice: a sum doubles); the real one, over MPI,
// runs in tests/python/test_ddp.py.
#include "kiln/ops/collective_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/engine/engine.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/passes/pipeline.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

const char* const kBucket =
    "graph(%g1 : f32[2, 3], %g2 : f32[4], %x : f32[8]) {\n"
    "  %0 : i64[] = all_reduce_start(%g1, %g2) {op=\"sum\"}\n"
    "  %1 : f32[8] = exp(%x)\n"
    "  %2 : f32[10] = all_reduce_wait(%0) {numel=10, dtype=f32}\n"
    "  return (%2, %1)\n"
    "}\n";

// A two-rank sum of equal values, done late on another thread: the wait
// must block for it. Counts the calls in flight.
std::atomic<int> g_in_flight{0};

void install_doubling_all_reduce() {
  set_async_all_reduce([](const Tensor& buffer, const std::string& op) {
    EXPECT_EQ(op, "sum");
    ++g_in_flight;
    auto worker = std::make_shared<std::thread>([buffer] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      float* p = buffer.data<float>();
      for (int64_t i = 0; i < buffer.numel(); ++i)
        p[i] *= 2;
    });
    return std::function<void()>([worker] {
      if (worker->joinable()) worker->join();
      --g_in_flight;
    });
  });
}

struct UninstallHook {
  ~UninstallHook() { set_async_all_reduce(nullptr); }
};

TEST(CollectiveOps, TextRoundTripsAndVerifies) {
  std::unique_ptr<Graph> g = parse_graph(kBucket);
  verify(*g);
  EXPECT_EQ(to_text(*g), kBucket);
  EXPECT_EQ(to_text(*parse_graph(to_text(*g))), kBucket);
}

TEST(CollectiveOps, DeclareNoGradientNoOnnxAndSideEffects) {
  for (const char* name : {"all_reduce_start", "all_reduce_wait"}) {
    const OpDef& def = op(name);
    EXPECT_TRUE(is_collective(def));
    EXPECT_TRUE(def.has_side_effects) << name;
    EXPECT_FALSE(def.differentiable) << name;
    EXPECT_EQ(def.grad, nullptr) << name;
    EXPECT_FALSE(def.may_run_inplace) << name;
    EXPECT_NE(def.onnx.not_exportable.find("kiln.distributed"), std::string::npos) << name;
  }
}

TEST(CollectiveOps, RefuseWithoutAProcessGroupAndBadInputs) {
  set_async_all_reduce(nullptr);
  const OpDef& start = op("all_reduce_start");
  EXPECT_THROW_WITH(dispatch(start, {ones({3})}, {}), "no process group is initialized");
  EXPECT_THROW_WITH(dispatch(start, {ones({3}), ones({2}, DType::Float64)}, {}),
                    "every input must have one dtype");
  EXPECT_THROW_WITH(dispatch(start, {ones({3}, DType::Int32)}, {{"op", std::string("avg")}}),
                    "op avg needs a floating-point dtype");
  EXPECT_THROW_WITH(dispatch(op("all_reduce_wait"), {scalar_tensor(int64_t(12345))},
                             {{"numel", int64_t(1)}, {"dtype", DType::Float32}}),
                    "no all-reduce is in flight under token 12345");
}

TEST(CollectiveOps, EagerStartThenWaitGivesTheReducedBucket) {
  UninstallHook uninstall;
  install_doubling_all_reduce();
  Tensor a = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor(std::vector<float>{7, 8}, {2});
  Tensor token = dispatch(op("all_reduce_start"), {transpose(a, 0, 1), b}, {})[0];
  Tensor reduced = dispatch(op("all_reduce_wait"), {token},
                            {{"numel", int64_t(8)}, {"dtype", DType::Float32}})[0];
  // Packed in input order, the strided input by its logical order.
  EXPECT_EQ(reduced.to_vector<float>(), (std::vector<float>{2, 8, 4, 10, 6, 12, 14, 16}));
  EXPECT_EQ(g_in_flight.load(), 0);
  EXPECT_THROW_WITH(
      dispatch(op("all_reduce_wait"), {token}, {{"numel", int64_t(8)}, {"dtype", DType::Float32}}),
      "waited for exactly once");
}

TEST(CollectiveOps, PassesKeepThemAndThePlanRunsStepsBetween) {
  UninstallHook uninstall;
  install_doubling_all_reduce();
  std::shared_ptr<Graph> g = parse_graph(kBucket);
  // An all-reduce whose result nobody reads still runs: the other ranks wait
  // for it.
  std::unique_ptr<Graph> unread = parse_graph(
      "graph(%g : f32[3]) {\n"
      "  %0 : i64[] = all_reduce_start(%g) {op=\"sum\"}\n"
      "  %1 : f32[3] = all_reduce_wait(%0) {numel=3, dtype=float32}\n"
      "  %2 : i64[] = all_reduce_start(%g) {op=\"sum\"}\n"
      "  %3 : f32[3] = all_reduce_wait(%2) {numel=3, dtype=float32}\n"
      "  return (%g)\n"
      "}\n");
  optimize(*unread);
  EXPECT_EQ(count_op_runs(*unread, "all_reduce_start"), 2u) << to_text(*unread);
  EXPECT_EQ(count_op_runs(*unread, "all_reduce_wait"), 2u) << to_text(*unread);

  optimize(*g);
  Executable exe(g);
  const std::string plan = exe.plan().to_string();
  const size_t start = plan.find("all_reduce_start"), between = plan.find("exp"),
               wait = plan.find("all_reduce_wait");
  ASSERT_NE(start, std::string::npos) << plan;
  EXPECT_LT(start, between) << plan;
  EXPECT_LT(between, wait) << plan;
  Tensor g1 = full({2, 3}, 1.5f), g2 = arange(int64_t(0), int64_t(4), int64_t(1), DType::Float32),
         x = zeros({8});
  for (int call = 0; call < 3; ++call) {
    std::vector<Tensor> out = exe.run({g1, g2, x});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3, 3, 3, 3, 3, 3, 0, 2, 4, 6}));
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(8, 1.0f));
  }
  EXPECT_EQ(g_in_flight.load(), 0);
}

// Every rank must issue its all-reduces in one order. Two buckets of 64 KiB
// ready at once and a third after a chain: the plan's waves must neither
// run two starts side by side (which one reaches the communication thread
// first would differ between ranks, mixing buckets of one size silently)
// nor hoist a wait above a later start (it would block before backward
// goes on, losing the overlap).
TEST(CollectiveOps, PlanWavesKeepThemInGraphOrder) {
  UninstallHook uninstall;
  install_doubling_all_reduce();
  std::shared_ptr<Graph> g = parse_graph(
      "graph(%a : f32[16384], %b : f32[16384], %c : f32[16384]) {\n"
      "  %0 : i64[] = all_reduce_start(%a) {op=\"sum\"}\n"
      "  %1 : i64[] = all_reduce_start(%b) {op=\"sum\"}\n"
      "  %2 : f32[16384] = exp(%c)\n"
      "  %3 : f32[16384] = exp(%2)\n"
      "  %4 : i64[] = all_reduce_start(%3) {op=\"sum\"}\n"
      "  %5 : f32[16384] = all_reduce_wait(%0) {numel=16384, dtype=f32}\n"
      "  %6 : f32[16384] = all_reduce_wait(%1) {numel=16384, dtype=f32}\n"
      "  %7 : f32[16384] = all_reduce_wait(%4) {numel=16384, dtype=f32}\n"
      "  return (%5, %6, %7)\n"
      "}\n");
  Executable exe(g);
  const Plan& plan = exe.plan();
  std::vector<std::string> order;
  for (const Step& step : plan.steps) {
    if (is_collective(*step.op)) order.push_back(step.op->name);
  }
  const std::string start = "all_reduce_start", wait = "all_reduce_wait";
  EXPECT_EQ(order, (std::vector<std::string>{start, start, start, wait, wait, wait}))
      << plan.to_string();
  for (const Wave& w : plan.waves) {
    int collectives = 0;
    for (uint32_t k = 0; k < w.count; ++k)
      collectives += is_collective(*plan.steps[w.first + k].op);
    EXPECT_LE(collectives, 1) << plan.to_string();
  }
  struct ThreadsGuard {
    int saved = cpu::max_threads();
    ~ThreadsGuard() { cpu::set_num_threads(saved); }
  } threads_guard;
  cpu::set_num_threads(2);  // waves side by side where the plan has them
  std::vector<Tensor> out = exe.run({full({16384}, 1.0f), full({16384}, 2.0f), zeros({16384})});
  EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(16384, 2.0f));
  EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(16384, 4.0f));
  EXPECT_NEAR(out[2].to_vector<float>()[0], 2 * std::exp(1.0f), 1e-5);
  EXPECT_EQ(g_in_flight.load(), 0);
}

// In async mode an all-reduce issued from an engine worker reaches the
// communication thread whenever the worker gets to it: after an eager
// collective the caller issued later (another rank may order them the
// other way), or never, when that collective waits for the queued plan's
// output while the plan waits for its own all-reduce behind it. Eager ops
// and compiled plans alike must issue them on the caller's thread.
TEST(CollectiveOps, AsyncModeIssuesThemOnTheCallersThread) {
  UninstallHook uninstall;
  static std::mutex issued_mutex;
  static std::vector<std::thread::id> issued_on;
  issued_on.clear();
  set_async_all_reduce([](const Tensor&, const std::string&) {
    std::lock_guard<std::mutex> lock(issued_mutex);
    issued_on.push_back(std::this_thread::get_id());
    return std::function<void()>([] {});
  });
  struct SyncAfter {
    ~SyncAfter() {
      try {
        engine::synchronize();
      } catch (const Error&) {  // the test's own checks report what failed
      }
      engine::set_execution(engine::Execution::Sync);
    }
  } sync_after;
  engine::set_execution(engine::Execution::Async);
  // 32 KiB: queued, not run at once as a small op would be.
  Tensor token = dispatch(op("all_reduce_start"), {ones({8192})}, {})[0];
  Tensor reduced = dispatch(op("all_reduce_wait"), {token},
                            {{"numel", int64_t(8192)}, {"dtype", DType::Float32}})[0];
  Executable exe(parse_graph(kBucket));
  std::vector<Tensor> out = exe.run({full({2, 3}, 1.5f), zeros({4}), zeros({8})});
  EXPECT_EQ(reduced.to_vector<float>(), std::vector<float>(8192, 1.0f));
  EXPECT_EQ(out[0].to_vector<float>()[0], 1.5f);
  std::lock_guard<std::mutex> lock(issued_mutex);
  ASSERT_EQ(issued_on.size(), 2u);
  for (const std::thread::id& id : issued_on)
    EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace kiln::jit
