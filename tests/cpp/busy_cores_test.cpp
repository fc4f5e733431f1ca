// Note [Busy cores] (engine/busy_cores.cpp): async mode runs ops on the
// caller for a while when its workers wait for cores that other programs
// keep busy, and only then; kiln/util/thread_wait.h measures both.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/engine/busy_cores.h"
#include "kiln/engine/engine.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/util/thread_wait.h"
#include "test_util.h"

namespace kiln {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(ThreadWait, OthersBusyCoresAreTheCoresBusyTimeLessThisProcesss) {
  const MachineTimes before{.wall_ns = 0, .cores_busy_ns = 0, .process_ns = 0};
  // 200 ms: the cores were busy 300 ms, 100 of them this process's.
  EXPECT_DOUBLE_EQ(*others_busy_cores(before, {200 * kMs, 300 * kMs, 100 * kMs}), 1.0);
  // Busy ticks count coarser than the process's time: never below 0.
  EXPECT_DOUBLE_EQ(*others_busy_cores(before, {200 * kMs, 90 * kMs, 100 * kMs}), 0.0);
  EXPECT_FALSE(others_busy_cores(before, {kLeastMachineSpanNs - 1, 300 * kMs, 0}).has_value());
}

// A worker starved at the end of one burst of work, asleep while other
// programs ran, and starved again as the next burst began (by its own
// process's threads): the programs that ran while it slept are not blamed.
// Before, they were, and bench/engine.py's row after its two-process
// reference ran its ops on the caller in 2 of 6 tries.
TEST(BusyCores, OnlyRecentTimesBlameOtherPrograms) {
  using engine::detail::BusyCores;
  constexpr int64_t kCores = 2, kStart = 1000 * kMs;
  BusyCores::Sample last;
  // The first starved window takes the base sample.
  last.starved_windows = 1;
  EXPECT_FALSE(BusyCores::others_busy_since(last, {kStart, 0, 0}));
  EXPECT_EQ(last.machine.wall_ns, kStart);
  // 600 ms later, starved again: others kept both cores busy meanwhile,
  // while the worker slept, and have stopped. A new base, now.
  last.starved_windows = 2;
  const MachineTimes after_gap{kStart + 600 * kMs, 600 * kMs * kCores, 0};
  EXPECT_FALSE(BusyCores::others_busy_since(last, after_gap));
  EXPECT_EQ(last.machine.wall_ns, after_gap.wall_ns);
  // The next 120 ms: this process's own threads kept the cores busy.
  last.starved_windows = 3;
  const int64_t busy = after_gap.cores_busy_ns;
  EXPECT_FALSE(BusyCores::others_busy_since(
      last, {after_gap.wall_ns + 120 * kMs, busy + 240 * kMs, 240 * kMs}));
  // Others busy 0.75 of a core within the last 240 ms are blamed, as before.
  EXPECT_TRUE(BusyCores::others_busy_since(
      last, {after_gap.wall_ns + 240 * kMs, busy + 480 * kMs, 300 * kMs}));
}

TEST(BusyCores, AWorkerThatSleptStartsANewStreak) {
  using engine::detail::BusyCores;
  BusyCores::Sample last;
  last.wall_ns = 1000 * kMs;
  last.times = {300 * kMs, 200 * kMs};
  last.starved_windows = 2;
  last.machine = {990 * kMs, 1, 1};
  // 100 ms later, runnable for 1.2 of them (one op after it woke): it
  // slept, and whatever other programs did meanwhile is not what starved
  // it. Too little runnable time to judge the window, so the streak used
  // to go on with its old base sample.
  EXPECT_FALSE(BusyCores::count_window(last, 1100 * kMs, {301 * kMs, 200 * kMs + 200'000}));
  EXPECT_EQ(last.starved_windows, 0);
  EXPECT_EQ(last.machine.wall_ns, 0);
  // Runnable all along but waiting for a core most of it: starved, the
  // streak goes on, however long the gap.
  last = BusyCores::Sample{1000 * kMs, {300 * kMs, 200 * kMs}, 2, {990 * kMs, 1, 1}};
  EXPECT_TRUE(BusyCores::count_window(last, 1100 * kMs, {340 * kMs, 258 * kMs}));
  EXPECT_EQ(last.starved_windows, 3);
  EXPECT_EQ(last.machine.wall_ns, 990 * kMs);
  // A short window of plain work ends the streak, as before (after_op
  // moves the sample on after each window).
  last.wall_ns = 1100 * kMs;
  last.times = {340 * kMs, 258 * kMs};
  EXPECT_TRUE(BusyCores::count_window(last, 1120 * kMs, {359 * kMs, 259 * kMs}));
  EXPECT_EQ(last.starved_windows, 0);
}

// Spins for `ns` of the calling thread's CPU time.
void spin_for_cpu(int64_t ns) {
  CoreTimes start, now;
  ASSERT_TRUE(core_times(start));
  volatile uint64_t sink = 0;
  do {
    for (int i = 0; i < 100000; ++i)
      sink = sink + 1;
    ASSERT_TRUE(core_times(now));
  } while (now.ran - start.ran < ns);
}

TEST(ThreadWait, MachineTimesCountThisProcesssWork) {
  MachineTimes before, after;
  if (!machine_times(before)) GTEST_SKIP() << "this kernel has no /proc/stat to read";
  spin_for_cpu(60 * kMs);
  ASSERT_TRUE(machine_times(after));
  EXPECT_GE(after.process_ns - before.process_ns, 60 * kMs);
  // The spin kept one allowed core busy; /proc/stat counts in 10 ms ticks.
  EXPECT_GE(after.cores_busy_ns - before.cores_busy_ns, 40 * kMs);
  EXPECT_GT(after.wall_ns, before.wall_ns);
}

// Other processes keeping every core busy: the worker waits for a core,
// others' busy time says why, and ops go to the caller by themselves.
TEST(BusyCores, OtherProgramsKeepingTheCoresBusySendOpsToTheCaller) {
  MachineTimes probe;
  if (!machine_times(probe)) GTEST_SKIP() << "this kernel has no /proc/stat to read";
  engine::set_busy_fallback(true);
  engine::set_num_interop_threads(1);
  engine::set_execution(engine::Execution::Async);
  std::vector<pid_t> hogs;
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {  // the child only spins until killed
      volatile uint64_t spin = 0;
      for (;;)
        spin = spin + 1;
    }
    ASSERT_GT(pid, 0);
    hogs.push_back(pid);
  }
  Tensor a = randn({256, 256});
  const int64_t before = engine::stats().busy_fallbacks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool noticed = false;
  while (!noticed && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 8; ++i)
      a = matmul(a, a) * 0.05;  // queued: 768 KiB touched
    engine::synchronize();
    noticed = engine::stats().busy_fallbacks > before;
  }
  for (pid_t pid : hogs) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  engine::prefer_caller_for(0);
  engine::set_execution(engine::Execution::Sync);
  engine::set_busy_fallback(true);
  EXPECT_TRUE(noticed);
}

}  // namespace
}  // namespace kiln
