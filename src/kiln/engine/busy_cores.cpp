#include "kiln/engine/busy_cores.h"

#include "kiln/util/thread_wait.h"

#include <cstdlib>
#include <cstring>

namespace kiln::engine::detail {
namespace {

// Note [Busy cores]
// Async mode gains only when a worker gets a core while the caller keeps
// its own. On a machine whose cores other programs keep busy, a woken
// worker waits milliseconds for a core, a queued op waits with it, and the
// caller soon waits for the op: measured on a 2-core machine at load 5,
// every async workload ran 1.1-2x slower than sync. The kernel counts each
// thread's time spent runnable but not running (/proc/thread-self/schedstat,
// its second field). A worker samples it once per kWindowNs of wall time,
// and judges a window as the OpenMP team's watch does (Note [A busy team],
// kernels/cpu/parallel.h): starved when it waited for a core a quarter of
// its runnable time or more. After kStarvedWindowsInARow starved windows,
// when other programs also kept at least kOthersBusyCores busy meanwhile,
// ops issued in the next kFallbackNs run on the caller (the caller waits
// for what they read, then runs them as a small op runs: errors still
// raise at a sync point, results are those of queueing them), and then
// async mode tries the workers again.
//
// The second test is needed because a worker also waits for a core when
// this process's own threads outnumber the cores for a while (the caller
// and two workers, one spinning, on two cores), or when the hypervisor
// takes the core: on a quiet 2-core VM the fallback fired in most runs of
// bench/engine.py, each time sending a second of the two-branch model's
// ops to the caller (1.0x instead of 1.7x), while others used 0.06 of a
// core. Other programs' share is the allowed cores' busy time (/proc/stat)
// less this process's CPU time, over the starved windows (at least
// kLeastMachineSpanNs, until then the worker waits for more windows; at
// most the last kLongestMachineSpanNs, below), so a quiet machine never
// reads /proc/stat. kiln.set_engine_busy_fallback(False)
// or KILN_ENGINE_BUSY_FALLBACK=0 turns the fallback off.
constexpr int64_t kWindowNs = 20'000'000;
constexpr int64_t kFallbackNs = 1'000'000'000;

bool enabled_from_environment() {
  const char* env = std::getenv("KILN_ENGINE_BUSY_FALLBACK");
  return !(env && std::strcmp(env, "0") == 0);
}

}  // namespace

BusyCores::BusyCores() : enabled_(enabled_from_environment()) {}

void BusyCores::after_op(Sample& last) {
  if (!enabled()) return;
  int64_t now = steady_now_ns();
  if (now - last.wall_ns < kWindowNs) return;
  CoreTimes times;
  if (!core_times(times)) return;
  if (last.wall_ns != 0 && count_window(last, now, times)) {
    if (others_keep_the_cores_busy(last)) {
      last.starved_windows = 0;
      caller_until_ns_.store(now + kFallbackNs, std::memory_order_relaxed);
      fallbacks_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  last.wall_ns = now;
  last.times = times;
}

// A streak of starved windows is one stretch of work: a worker that slept
// through most of the time since its last sample (no ops to run) starts a
// new one, with a new base sample of the machine. Without that, other
// programs that ran only while the worker slept were blamed for the
// starved windows on either side: with bench/engine.py's two-process
// reference interleaved with async calls (50 ms of each), the fallback
// fired in the first round and sent every op to the caller. Returns
// whether the window counts (the worker was runnable for it).
bool BusyCores::count_window(Sample& last, int64_t now, const CoreTimes& times) {
  const int64_t wall = now - last.wall_ns;
  const int64_t runnable = (times.ran - last.times.ran) + (times.waited - last.times.waited);
  if (wall > kIdleGapNs && runnable < wall / 2) {
    last.starved_windows = 0;
    last.machine = {};
    return false;
  }
  const std::optional<bool> starved = starved_between(last.times, times);
  if (starved) last.starved_windows = *starved ? last.starved_windows + 1 : 0;
  return true;
}

// Starved windows say the worker waited for a core; the machine's busy
// time says whether other programs took it (Note [Busy cores]). The base
// sample is taken at the first starved window, so a quiet machine never
// reads /proc/stat, and again when it is older than kLongestMachineSpanNs:
// a worker that was starved, then slept while other programs ran, then
// starved by its own process's threads as work resumed (two workers and
// the caller on two cores) must not count those programs against now. It
// did: right after bench/engine.py's two-process reference ran, the next
// row fell back in 2 of 6 tries and its ops ran on the caller (1.0x).
bool BusyCores::others_keep_the_cores_busy(Sample& last) {
  if (last.starved_windows == 0) {
    last.machine = {};
    return false;
  }
  MachineTimes machine;
  if (!machine_times(machine)) return last.starved_windows >= kStarvedWindowsInARow;
  return others_busy_since(last, machine);
}

bool BusyCores::others_busy_since(Sample& last, const MachineTimes& now) {
  const bool stale =
      last.machine.wall_ns != 0 && now.wall_ns - last.machine.wall_ns > kLongestMachineSpanNs;
  if (last.machine.wall_ns == 0 || stale) {
    last.machine = now;
    return false;
  }
  if (last.starved_windows < kStarvedWindowsInARow) return false;
  const std::optional<double> others = others_busy_cores(last.machine, now);
  return others && *others >= kOthersBusyCores;
}

bool BusyCores::caller_preferred() {
  int64_t until = caller_until_ns_.load(std::memory_order_relaxed);
  if (until == 0) [[likely]]
    return false;
  if (steady_now_ns() < until) return enabled();
  caller_until_ns_.compare_exchange_strong(until, 0, std::memory_order_relaxed);
  return false;
}

void BusyCores::prefer_caller_for(int64_t ns) {
  caller_until_ns_.store(ns > 0 ? steady_now_ns() + ns : 0, std::memory_order_relaxed);
}

BusyCores& busy_cores() {
  static BusyCores* cores = new BusyCores();  // never destroyed: workers may outlive statics
  return *cores;
}

}  // namespace kiln::engine::detail
