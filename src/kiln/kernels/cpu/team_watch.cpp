// Note [A busy team] (parallel.h): each calling thread watches its own
// OpenMP team, so no lock is taken and no state is shared but the switch
// and the count.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/thread_wait.h"

namespace kiln::cpu {
namespace {

// One starved window can be a daemon taking a core for a few ms (a thread
// of the team spins while it waits for work, so any other program that
// wakes takes a core from the team): two in a row are needed. A fallback
// lasts kFirstFallbackNs, doubling up to kLongestFallbackNs while the
// cores stay busy, so a loaded machine pays for two windows on the team
// every few seconds, a quiet one little for a false alarm.
constexpr int64_t kWindowNs = 20'000'000;
constexpr int64_t kFirstFallbackNs = 250'000'000;
constexpr int64_t kLongestFallbackNs = 4'000'000'000;

bool enabled_from_environment() {
  const char* env = std::getenv("KILN_TEAM_BUSY_FALLBACK");
  return !(env && std::strcmp(env, "0") == 0);
}

std::atomic<bool> g_enabled{enabled_from_environment()};
std::atomic<int64_t> g_fallbacks{0};

struct Watch {
  int team = 0;                     // the team size `threads` were found for
  std::vector<int64_t> threads;     // the team's kernel thread ids, the caller first
  std::vector<CoreTimes> at_start;  // each one's times when the window began
  int64_t next_sample_ns = 0;
  int64_t one_thread_until_ns = 0;
  int starved_windows = 0;  // in a row
  int64_t fallback_ns = kFirstFallbackNs;

  // The team's threads: libgomp keeps a calling thread's pool between
  // regions, so one region finds them for as long as the size stays.
  void find_threads(int size) {
    team = size;
    threads.assign(size_t(size), 0);
#pragma omp parallel num_threads(size)
    threads[size_t(omp_get_thread_num())] = current_thread_id();
    threads.erase(std::remove(threads.begin(), threads.end(), 0), threads.end());
    at_start.clear();
  }

  // The times now; false when a thread is gone (found again next time).
  bool read_times(std::vector<CoreTimes>& now) const {
    now.resize(threads.size());
    for (size_t i = 0; i < threads.size(); ++i) {
      if (!thread_core_times(threads[i], now[i])) return false;
    }
    return true;
  }

  // Whether a thread of the team was starved this window (thread_wait.h);
  // nullopt when none was runnable long enough to say.
  std::optional<bool> judge(const std::vector<CoreTimes>& now) const {
    std::optional<bool> said;
    for (size_t i = 0; i < now.size() && i < at_start.size(); ++i) {
      const std::optional<bool> starved = starved_between(at_start[i], now[i]);
      if (starved == true) return true;
      if (starved) said = false;
    }
    return said;
  }

  void note_window(bool was_starved, int64_t now_ns) {
    if (!was_starved) {
      starved_windows = 0;
      fallback_ns = kFirstFallbackNs;
      return;
    }
    if (++starved_windows < kStarvedWindowsInARow) return;
    starved_windows = 0;
    one_thread_until_ns = now_ns + fallback_ns;
    fallback_ns = std::min(2 * fallback_ns, kLongestFallbackNs);
    g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  }

  void sample(int64_t now_ns) {
    const int size = max_threads();
    if (size != team) find_threads(size);
    std::vector<CoreTimes> now;
    if (!read_times(now)) {
      team = 0;  // find them again
      return;
    }
    const std::optional<bool> starved_now = judge(now);
    if (starved_now) note_window(*starved_now, now_ns);
    at_start = std::move(now);
    next_sample_ns = now_ns + kWindowNs;
  }

  // Times while the team runs as one say nothing of the team.
  void restart_after_fallback() {
    at_start.clear();
    next_sample_ns = one_thread_until_ns;
  }
};

thread_local Watch t_watch;

}  // namespace

bool team_busy() {
  Watch& watch = t_watch;
  const int64_t now = steady_now_ns();
  if (now < watch.one_thread_until_ns) return g_enabled.load(std::memory_order_relaxed);
  if (now < watch.next_sample_ns || !g_enabled.load(std::memory_order_relaxed)) return false;
  watch.sample(now);
  if (now >= watch.one_thread_until_ns) return false;
  watch.restart_after_fallback();
  return true;
}

void set_team_busy_fallback(bool on) {
  g_enabled.store(on, std::memory_order_relaxed);
}

bool team_busy_fallback() {
  return g_enabled.load(std::memory_order_relaxed);
}

int64_t team_busy_fallbacks() {
  return g_fallbacks.load(std::memory_order_relaxed);
}

void prefer_one_thread_for(int64_t ns) {
  const int64_t now = steady_now_ns();
  t_watch.one_thread_until_ns = ns > 0 ? now + ns : 0;
  t_watch.next_sample_ns = ns > 0 ? now + ns : now;
  t_watch.at_start.clear();
  t_watch.starved_windows = 0;
}

}  // namespace kiln::cpu
