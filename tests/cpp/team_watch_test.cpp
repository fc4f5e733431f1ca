// Note [A busy team] (kernels/cpu/parallel.h): while the team's cores are
// busy, plans and eager ops run on one thread, with the same results; the
// watch notices busy cores by itself.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/op_threads.h"
#include "kiln/ops/random.h"
#include "kiln/profiler/profiler.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

// Two threads, and the watch off (test_main.cpp's default) until a test
// turns it on: what a test expects on the team must not depend on the load
// of the machine running it.
struct BusyWatchScope {
  int threads = cpu::max_threads();
  BusyWatchScope() {
    cpu::set_num_threads(2);
    cpu::set_team_busy_fallback(false);
    cpu::prefer_one_thread_for(0);
  }
  ~BusyWatchScope() {
    cpu::prefer_one_thread_for(0);
    cpu::set_team_busy_fallback(false);
    cpu::set_num_threads(threads);
  }
};

// A 3x3 convolution of 32 channels over 56x56 (29M multiply-adds): a team
// step, its oneDNN primitive prepared for two threads.
std::shared_ptr<Graph> conv_graph(const Tensor& w) {
  return conv3x3_graph(w, {1, 32, 56, 56});
}

int conv_step_threads(const Executable& exe, const Tensor& x) {
  profiler::Profile prof;
  exe.run({x});
  prof.stop();
  for (const profiler::EventAverage& row : prof.key_averages()) {
    if (row.kind == profiler::EventKind::Step && row.name == "conv2d") return row.threads_max;
  }
  return -1;
}

TEST(TeamWatch, BusyTeamRunsAPlanOnOneThreadWithTheSameResults) {
  BusyWatchScope scope;
  Tensor x = randn({1, 32, 56, 56}), w = randn({32, 32, 3, 3});
  Executable exe(conv_graph(w));
  ASSERT_FALSE(exe.plan().steps[0].one_thread);
  const Tensor on_team = exe.run({x})[0];
  EXPECT_EQ(conv_step_threads(exe, x), 2);

  cpu::set_team_busy_fallback(true);
  cpu::prefer_one_thread_for(10'000'000'000);
  EXPECT_TRUE(cpu::team_busy());
  // The primitive made for two threads runs on the one it gets.
  const Tensor on_one = exe.run({x})[0];
  EXPECT_EQ(conv_step_threads(exe, x), 1);
  EXPECT_LE(max_rel_error(on_one, on_team), 1e-5);
  Tensor eager_one;
  {
    cpu::OneThread one;
    eager_one = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  }
  EXPECT_LE(max_rel_error(on_one, eager_one), 1e-5);

  cpu::set_team_busy_fallback(false);
  EXPECT_FALSE(cpu::team_busy());
  EXPECT_EQ(conv_step_threads(exe, x), 2);
}

TEST(TeamWatch, OffSwitchKeepsTheTeam) {
  BusyWatchScope scope;
  cpu::set_team_busy_fallback(true);
  cpu::prefer_one_thread_for(10'000'000'000);
  cpu::set_team_busy_fallback(false);
  EXPECT_FALSE(cpu::team_busy());
  cpu::set_team_busy_fallback(true);
  EXPECT_TRUE(cpu::team_busy());
}

// OneThread keeps a primitive made for the whole team from taking more
// threads: inside it, a region that asks for two gets one.
TEST(TeamWatch, OneThreadAllowsNoActiveRegion) {
  BusyWatchScope scope;
  auto most_threads = [] {
    std::atomic<int> most{0};
    cpu::run_concurrently(2, 2, [&](int64_t) {
      const int n = cpu::omp_threads_in_region();
      int seen = most.load();
      while (n > seen && !most.compare_exchange_weak(seen, n)) {
      }
    });
    return most.load();
  };
  EXPECT_EQ(most_threads(), 2);
  {
    cpu::OneThread one;
    EXPECT_EQ(most_threads(), 1);
  }
  EXPECT_EQ(most_threads(), 2);  // restored
}

// Other threads keeping every core busy: the team's threads wait for a
// core, and within a few windows plans run on one thread by themselves.
TEST(TeamWatch, NoticesBusyCoresByItself) {
  BusyWatchScope scope;
  cpu::set_team_busy_fallback(true);
  Tensor x = randn({1, 32, 56, 56}), w = randn({32, 32, 3, 3});
  Executable exe(conv_graph(w));
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    hogs.emplace_back([&stop] {
      volatile uint64_t spin = 0;
      while (!stop.load(std::memory_order_relaxed))
        spin = spin + 1;
    });
  }
  const int64_t before = cpu::team_busy_fallbacks();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool noticed = false;
  while (!noticed && std::chrono::steady_clock::now() < deadline) {
    exe.run({x});
    noticed = cpu::team_busy_fallbacks() > before;
  }
  stop = true;
  for (std::thread& t : hogs)
    t.join();
  EXPECT_TRUE(noticed);
}

}  // namespace
}  // namespace kiln::jit
