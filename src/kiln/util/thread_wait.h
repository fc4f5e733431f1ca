// How long a thread waited for a core: the kernel's count of the time a
// thread spent runnable but not running (/proc/.../schedstat, its second
// field). The async engine (Note [Busy cores], engine/busy_cores.cpp) and
// the OpenMP team (Note [A busy team], kernels/cpu/parallel.h) use it to
// tell when other programs keep the cores busy.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln {

// A thread's total time on a core and waiting for one, in ns.
struct CoreTimes {
  int64_t ran = 0;
  int64_t waited = 0;
};

// The calling thread's; false where the kernel does not say.
bool core_times(CoreTimes& times);

// Thread `tid`'s of this process.
bool thread_core_times(int64_t tid, CoreTimes& times);

// The calling thread's kernel thread id.
int64_t current_thread_id();

// Whether a thread whose times went from `before` to `now` was starved:
// it waited for a core a quarter or more of the time it was runnable (on a
// core or waiting for one; judged on that, not on wall time, since a model
// called every 100 ms is runnable for a few of them). nullopt when it was
// runnable less than kLeastRunnableNs, too little to say.
inline constexpr int64_t kLeastRunnableNs = 2'000'000;
std::optional<bool> starved_between(const CoreTimes& before, const CoreTimes& now);

// Starved windows in a row before a watch acts: one can be a daemon taking
// a core for a few ms.
inline constexpr int kStarvedWindowsInARow = 2;

// What the cores this process may use did: their time busy with anything
// (/proc/stat, in clock ticks, for the CPUs of its affinity) and this
// process's own CPU time. Between two samples, the difference is what other
// programs took: a thread can wait for a core because of them, or because
// this process runs more threads than cores (or the hypervisor took the
// core), and only the first is a reason to run on fewer threads.
struct MachineTimes {
  int64_t wall_ns = 0;
  int64_t cores_busy_ns = 0;
  int64_t process_ns = 0;
};
bool machine_times(MachineTimes& times);  // false where the kernel does not say

// The cores other programs kept busy on average from `before` to `now`;
// nullopt for a span under kLeastMachineSpanNs (the kernel counts busy
// time in ticks of 10 ms, so a shorter span says too little).
inline constexpr int64_t kLeastMachineSpanNs = 100'000'000;
std::optional<double> others_busy_cores(const MachineTimes& before, const MachineTimes& now);

// std::chrono::steady_clock's now, in ns.
int64_t steady_now_ns();

}  // namespace kiln
