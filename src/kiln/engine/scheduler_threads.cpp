// How many threads a queued op runs on: its worker's share of the pool's,
// or all of them when it runs alone.
#include "kiln/engine/scheduler.h"

#include "kiln/util/thread_wait.h"

namespace kiln::engine::detail {
namespace {

// How long no op ready as it was pushed may have been pushed before one
// that runs alone takes every thread: longer than a Python thread takes
// between the ops of a model it is issuing (a few microseconds each), so
// that a second op of a burst finds the first still on its share.
constexpr int64_t kQuietNs = 50'000;

}  // namespace

// Note [A lone op takes every thread]
// With n workers, each runs its ops on 1/n of the OpenMP threads, so that
// ops side by side never ask for more threads than there are. But an op
// that runs alone then left the other cores idle: with two workers on two
// cores, a chain of 1024x1024 matmuls took twice as long in async mode as
// in sync mode (21-23 ms against 11 ms a matmul). So an op about to run
// with no other op held by any thread, none ready, and no op pushed ready
// for kQuietNs runs with every thread, as in sync mode. Only pushes of ops
// ready at once count: an op pushed behind pending ones (the rest of a
// chain, issued while the chain runs) cannot run beside this one, and
// counting it made every other op of such a chain run on its share (the
// caller, woken as an op ended, pushed while the next op started). Ops made
// ready meanwhile wait for it, as they would in sync mode: the workers and
// a helping caller take nothing while it runs, so threads never add up to
// more than the pool's. Both decisions are taken under the ready queue's
// mutex, and a thread counts in holding_ from the moment it pops an op
// under that mutex until its chain of ops ends, so a pop and a claim cannot
// both succeed unseen by each other. The first op of a burst of pushes
// waits, before it starts, for what its issuer does next (burst_ended): a
// thread waiting at a sync point (the caller issued its ops and waits for
// them) or the end of the quiet window gives it every thread, any other
// push keeps its share, as before. Without that wait the first op of every
// burst kept its share, so `print(model(x))` in a loop ran each compiled
// call on half the threads with two workers. The wait lasts at most what is
// left of kQuietNs, and only an op that would otherwise run alone waits.
// Counted in engine_stats()["ran_with_every_thread"].
bool Scheduler::take_every_thread() {
  const int all = all_threads_.load(std::memory_order_relaxed);
  if (all <= intra_threads_.load(std::memory_order_relaxed)) return false;  // one worker
  // Cheap checks first: an op beside others, or in a burst of pushes, asks
  // for no lock.
  if (ready_size_.load(std::memory_order_acquire) > 0 || holding_.load() != 1) return false;
  if (!burst_ended()) return false;
  std::lock_guard<std::mutex> lock(ready_mutex_);
  if (!ready_.empty() || holding_.load() != 1 || wide_) return false;
  wide_ = true;
  wide_running_.store(true, std::memory_order_relaxed);
  ran_with_every_thread_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Whether the pushes around this lone op are over: a thread waits at a sync
// point, or no op was pushed ready for kQuietNs. Spins (yielding) until one
// of them, or until anything else is pushed (the burst goes on: what comes
// may run beside; Python issues a model's ops microseconds apart, so this
// costs an eager burst no more than that) or another op is ready or held.
bool Scheduler::burst_ended() {
  const int64_t pushes = pushed_.load(std::memory_order_relaxed);
  bool ended = false;
  const bool decided = spin_for(
      [&] {
        int64_t since_push = steady_now_ns() - last_ready_push_ns_.load(std::memory_order_relaxed);
        if (waiting_callers_.load() > 0 || since_push >= kQuietNs) return ended = true;
        return pushed_.load(std::memory_order_relaxed) != pushes ||
               ready_size_.load(std::memory_order_acquire) > 0 || holding_.load() != 1;
      },
      std::chrono::nanoseconds(kQuietNs));
  return ended || !decided;  // spun the whole window: no push came
}

// Ops that became ready while the lone op ran wait in the queue, their
// workers asleep: one wake each, as enqueue() would have given.
void Scheduler::give_back_every_thread() {
  size_t wakes;
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    wide_ = false;
    wide_running_.store(false, std::memory_order_relaxed);
    wakes = std::min(ready_.size(), size_t(std::max(sleeping_, 0)));
  }
  for (size_t i = 0; i < wakes; ++i)
    ready_cv_.notify_one();
}

}  // namespace kiln::engine::detail
