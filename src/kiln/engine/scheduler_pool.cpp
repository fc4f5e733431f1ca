// The scheduler's pool and settings: starting and stopping the workers,
// the in-flight limits, and the counts engine_stats() reports.
#include <algorithm>

#include "kiln/engine/busy_cores.h"
#include "kiln/engine/scheduler.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::engine::detail {

void Scheduler::start_workers_locked() {
  if (started_.load()) return;
  int intra = std::max(1, cpu::max_threads() / num_workers_.load());
  intra_threads_ = intra;
  all_threads_ = std::max(intra, cpu::max_threads());
  stopping_ = false;
  for (int i = 0; i < num_workers_.load(); ++i)
    threads_.emplace_back([this, intra] { worker_loop(intra); });
  started_.store(true, std::memory_order_release);
}

void Scheduler::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    stopping_ = true;
  }
  ready_cv_.notify_all();
  for (std::thread& t : threads_)
    t.join();
  threads_.clear();
  started_.store(false, std::memory_order_release);
}

void Scheduler::set_workers(int n) {
  KILN_CHECK_VALUE(n >= 1, "set_num_interop_threads: expected at least 1 thread, got ", n);
  KILN_CHECK(!in_running_op(), "set_num_interop_threads: called from inside a running op");
  wait_all();
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (started_.load()) stop_workers();
  num_workers_ = n;
}

Limits Scheduler::limits() const {
  return Limits{max_ops_.load(), max_bytes_.load(), Limits{}.inline_bytes};  // engine.cpp's
}

void Scheduler::set_limits(Limits limits) {
  KILN_CHECK_VALUE(limits.max_ops >= 1 && limits.max_bytes >= 0 && limits.inline_bytes >= 0,
                   "set_engine_limits: expected max_ops >= 1, max_bytes >= 0 and inline_bytes "
                   ">= 0, got ",
                   limits.max_ops, ", ", limits.max_bytes, " and ", limits.inline_bytes);
  max_ops_.store(limits.max_ops);
  max_bytes_.store(limits.max_bytes);  // inline_bytes: engine.cpp keeps it
}

Stats Scheduler::stats() {
  return Stats{pushed_.load(),
               in_flight_.load(),
               peak_in_flight_.load(),
               in_flight_bytes_.load(),
               peak_in_flight_bytes_.load(),
               ran_inline_.load(),
               ran_by_waiting_caller_.load(),
               ran_with_every_thread_.load(),
               sync_waits_.load(),
               waiter_wakeups_.load(),
               busy_cores().fallbacks()};
}

void Scheduler::reset_peaks() {
  peak_in_flight_.store(in_flight_.load());
  peak_in_flight_bytes_.store(in_flight_bytes_.load());
}

}  // namespace kiln::engine::detail
