// The engine's inside: variables, queued ops, the ready queue and its
// workers. engine.cpp holds the public calls; this header is not installed
// for users (nothing outside src/kiln/engine includes it).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/engine/engine.h"
#include "kiln/util/error.h"

namespace kiln::engine::detail {

// What a failed op left on the variables it wrote.
struct Failure {
  ErrorKind kind;
  std::string message;
  bool reported = false;  // raised at a sync point (guarded by the state mutex)
};

struct Op;

// A variable's queue: the ops pushed on it and not yet granted, in push
// order. Granted ops run (reads together; a write alone).
class Var final : public EngineVar {
 public:
  explicit Var(bool carries_failures = true) : carries_failures(carries_failures) {}
  void wait_for_host_access() override;

  // False for variables that only order ops (the generator, a compiled
  // plan's runs): a failed op leaves nothing there, or one failed draw
  // would poison every later one.
  const bool carries_failures;

  // Guarded by the scheduler's state mutex.
  struct Entry {
    Op* op;
    bool write;
  };
  std::vector<Entry> queue;  // [head, end) waits
  size_t head = 0;
  int running_reads = 0;
  bool running_write = false;
  std::shared_ptr<Failure> failure;

  // Ops pushed on this variable and not finished; read without the lock by
  // sync points. poisoned mirrors `failure != null` for the same reason.
  std::atomic<int64_t> pending{0};
  std::atomic<bool> poisoned{false};
  // Threads sleeping until `pending` is 0 (Note [Waking a waiter once]).
  std::atomic<int> waiters{0};

  bool idle() const { return head == queue.size(); }
};

// An op's variables: a handful (its inputs and outputs), kept in the op so
// a push allocates no lists.
class VarList {
 public:
  void push_back(Var* v) {
    if (size_ < kInline) {
      inline_[size_++] = v;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
    heap_.push_back(v);
    ++size_;
  }
  Var* const* begin() const { return size_ > kInline ? heap_.data() : inline_; }
  Var* const* end() const { return begin() + size_; }
  size_t size() const { return size_; }
  bool contains(const Var* v) const { return std::find(begin(), end(), v) != end(); }

 private:
  static constexpr size_t kInline = 6;
  Var* inline_[kInline];
  std::vector<Var*> heap_;
  size_t size_ = 0;
};

struct Op {
  std::function<void()> fn;
  VarList reads, writes;  // distinct; each holds a reference (not an inline op's)
  int waiting = 0;        // variables that have not granted it yet
  Site site;
  int64_t bytes = 0;
  int64_t queued_ns = -1;  // profiler session time when queued, or -1
  Op* next_retired = nullptr;
};

// Spins until ready() or for `limit`; returns ready(). Between checks a
// spinning thread yields its core when another thread wants it: on a
// machine with more runnable threads than cores (the caller, a worker,
// OpenMP's, other programs) a pure spin would take the core the thread it
// waits for needs.
template <typename Ready>
bool spin_for(Ready ready, std::chrono::nanoseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 7) == 7) {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > until) return false;
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

// Set while this thread runs a pushed op (a worker, or the caller in sync
// mode): sync points do not wait there and nested pushes run inline.
// Read directly by pushing(), which every op asks.
extern thread_local bool t_in_running_op;
bool in_running_op();
struct RunningOp {
  bool saved = t_in_running_op;
  RunningOp() { t_in_running_op = true; }
  ~RunningOp() { t_in_running_op = saved; }
};

class Scheduler {
 public:
  Scheduler();

  void push(Op* op);
  // run_if_idle (engine.h), once its variables were found idle: runs `fn`
  // here; on failure, stores it on the variables written_vars() returns.
  template <typename WrittenVars>
  bool run_at_once(FunctionRef fn, Site site, WrittenVars written_vars) {
    // A load and a store, not a locked add: every small op of async mode
    // counts here, and two threads running small ops at the same instant
    // may count one (a statistic, engine_stats()["ran_inline"]).
    ran_inline_.store(ran_inline_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    try {
      RunningOp running;
      fn();
    } catch (...) {
      store_failure(std::current_exception(), site, written_vars());
    }
    return true;
  }
  void wait_var_idle(Var& var);  // a sync point (counted in sync_waits)
  void wait_var_quietly(Var& var);
  // Frees the ops workers finished: on the issuing side (a push or a wait),
  // see Note [Freeing on the issuing side] in scheduler.cpp.
  void free_retired();
  void wait_all();
  void throttle(int64_t bytes);
  int64_t byte_limit() const;  // max_bytes times the workers
  void raise_if_poisoned(Var& var);
  void raise_unreported();

  void set_workers(int n);
  int workers() const { return num_workers_.load(); }
  Limits limits() const;
  void set_limits(Limits limits);
  Stats stats();
  void reset_peaks();
  void set_blocking_hooks(BlockingHooks hooks) { blocking_ = hooks; }

 private:
  void store_failure(std::exception_ptr error, Site site, const std::vector<Var*>& written);
  template <typename Done>
  void wait_until(std::atomic<int>& registry, Done done, std::atomic<bool>* woken = nullptr);
  void grant_waiting(Var& var, std::vector<Op*>& ready);
  void enqueue(Op* op);
  Op* pop_ready();
  Op* try_pop_ready();  // null when the ready queue is empty or a wide op runs
  // Note [A lone op takes every thread] (scheduler_threads.cpp).
  bool take_every_thread();
  bool burst_ended();
  void give_back_every_thread();
  bool may_help() const;
  bool helpable() const;
  template <typename Done>
  bool help_until(Done done);  // returns done()
  void worker_loop(int intra_threads);
  Op* run(Op* op);  // returns the op to run next on this worker, or null
  Op* complete(Op* op, const std::shared_ptr<Failure>& failure, bool new_failure);
  bool release_vars(const Op& op, const std::shared_ptr<Failure>& failure, bool new_failure,
                    Op** keep);
  void notify_waiters(bool var_waited, int64_t ops_left, int64_t bytes_left);
  void start_workers_locked();
  void stop_workers();

  void retire(Op* op);

  std::atomic<Op*> retired_{nullptr};  // a stack of finished ops, pushed by workers
  std::mutex state_mutex_;             // every Var's queue and failure, unreported_
  std::vector<std::shared_ptr<Failure>> unreported_;

  std::mutex ready_mutex_;
  std::condition_variable ready_cv_;
  std::deque<Op*> ready_;
  std::atomic<int64_t> ready_size_{0};
  int sleeping_ = 0;
  std::atomic<int> spinning_{0};  // idle workers spinning for the next op
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::mutex pool_mutex_;  // starting and stopping the pool
  std::atomic<bool> started_{false};
  std::atomic<int> num_workers_{1};    // read by waiting callers (may_help)
  std::atomic<int> intra_threads_{1};  // each worker's OpenMP threads
  // The threads holding an op: taken from the ready queue under its mutex,
  // until their chain of ops ends (Note [A waiting caller helps], Note [A
  // lone op takes every thread]). Then whether one of them runs with every
  // thread (guarded by ready_mutex_, mirrored for lock-free reads), and
  // when the last op ready as it was pushed was pushed.
  std::atomic<int> holding_{0};
  std::atomic<int> waiting_callers_{0};  // threads inside a sync point's wait
  bool wide_ = false;
  std::atomic<bool> wide_running_{false};
  std::atomic<int> all_threads_{1};  // the OpenMP threads of the pool in all
  std::atomic<int64_t> last_ready_push_ns_{0};
  std::atomic<int64_t> ran_with_every_thread_{0};
  std::atomic<int64_t> ran_by_waiting_caller_{0};

  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
  std::atomic<int> all_waiters_{0}, throttle_waiters_{0};  // sleeping in wait_all, throttle
  std::atomic<bool> throttle_woken_{false};                // since a pusher last went to sleep

  std::atomic<int64_t> in_flight_{0}, in_flight_bytes_{0};
  std::atomic<int64_t> pushed_{0}, peak_in_flight_{0}, peak_in_flight_bytes_{0};
  std::atomic<int64_t> ran_inline_{0}, sync_waits_{0}, waiter_wakeups_{0};
  std::atomic<int64_t> max_ops_, max_bytes_;
  BlockingHooks blocking_;
};

Scheduler& scheduler();
// Nothing pending there and no failure: an op on it may run at once. A null
// variable (a storage no op was ever queued on) is idle.
inline bool idle(const Var* v) {
  return v == nullptr || (v->pending.load(std::memory_order_acquire) == 0 &&
                          !v->poisoned.load(std::memory_order_relaxed));
}

}  // namespace kiln::engine::detail
