// When the cores async mode would use are busy with other programs: the
// workers watch how long they wait for a core, and while they wait too long
// async mode runs ops on the caller (Note [Busy cores] in busy_cores.cpp).
#pragma once

#include <atomic>
#include <cstdint>

#include "kiln/util/thread_wait.h"

namespace kiln::engine::detail {

class BusyCores {
 public:
  BusyCores();

  // A worker's last sample: when it was taken and the thread's total wait
  // for a core then.
  struct Sample {
    int64_t wall_ns = 0;  // 0: none taken yet
    CoreTimes times;
    int starved_windows = 0;  // in a row
    MachineTimes machine;     // at the first of them (wall_ns 0: none)
  };
  // On a worker after each op: samples the thread's wait for a core once
  // per window and, when it was starved, prefers the caller for a while.
  void after_op(Sample& last);

  // Whether ops should run on the caller now (cheap: one atomic load, and
  // a clock read only while a fallback is on).
  bool caller_preferred();
  void prefer_caller_for(int64_t ns);

  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  int64_t fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }

  // Other programs' share of the cores (kLeastMachineSpanNs or more, and no
  // more than kLongestMachineSpanNs before `now`) is enough to blame them
  // for the starved windows in `last`. Updates its base sample. Public for
  // tests, which give it times of their own.
  static constexpr double kOthersBusyCores = 0.5;
  static constexpr int64_t kLongestMachineSpanNs = 250'000'000;
  static bool others_busy_since(Sample& last, const MachineTimes& now);
  // Counts the window from `last` to `now` (the worker's core times then)
  // in the starved streak; a worker idle for most of a gap over kIdleGapNs
  // starts a new streak instead, and the window does not count (false).
  static constexpr int64_t kIdleGapNs = 40'000'000;
  static bool count_window(Sample& last, int64_t now, const CoreTimes& times);

 private:
  static bool others_keep_the_cores_busy(Sample& last);

  std::atomic<bool> enabled_;
  std::atomic<int64_t> caller_until_ns_{0};  // 0: none
  std::atomic<int64_t> fallbacks_{0};
};

BusyCores& busy_cores();

}  // namespace kiln::engine::detail
