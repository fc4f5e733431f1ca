// The scheduler: MXNet's threaded engine in small. Each variable keeps the
// ops pushed on it in order; an op counts the variables that have not
// granted it yet and goes to the ready queue when none is left. One state
// mutex guards every variable's queue: pushes take it once for all their
// variables, so ops are appended to all of them as one step and two
// threads pushing at once can never queue each other's ops in opposite
// orders (which would deadlock).
#include "kiln/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "kiln/engine/busy_cores.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/profile_recorder.h"
#include "kiln/util/thread_wait.h"

namespace kiln::engine::detail {

thread_local bool t_in_running_op = false;

namespace {

// Spinning this long before sleeping keeps a worker awake between the ops
// of a Python loop (waking a sleeping thread costs a system call and a
// context switch, several microseconds per op, MXNet's overhead).
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Ready>
bool spin_until(Ready ready) {
  return spin_for(ready, kSpin);
}

void update_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

std::string failure_message(const Site& site, const char* what) {
  std::string where =
      site.where && *site.where ? str(" (issued at ", site.where, ")") : std::string();
  return str(site.op, where, " failed while running asynchronously: ", what);
}

// What an op that threw `error` leaves on the variables it writes.
std::shared_ptr<Failure> failure_of(std::exception_ptr error, const Site& site) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return std::make_shared<Failure>(Failure{e.kind(), failure_message(site, e.what())});
  } catch (const std::exception& e) {
    return std::make_shared<Failure>(Failure{ErrorKind::Runtime, failure_message(site, e.what())});
  } catch (...) {
    return std::make_shared<Failure>(
        Failure{ErrorKind::Runtime, failure_message(site, "an unknown exception")});
  }
}

}  // namespace

bool in_running_op() {
  return t_in_running_op;
}

Scheduler& scheduler() {
  // Never destroyed: workers may still hold it while the process exits.
  static Scheduler* s = [] {
    auto* made = new Scheduler();
    std::atexit([] { scheduler().wait_all(); });
    return made;
  }();
  return *s;
}

Scheduler::Scheduler() : max_ops_(Limits{}.max_ops), max_bytes_(Limits{}.max_bytes) {}

void Var::wait_for_host_access() {
  if (t_in_running_op) return;
  Scheduler& s = scheduler();
  if (pending.load(std::memory_order_acquire) != 0) s.wait_var_idle(*this);
  if (poisoned.load(std::memory_order_acquire)) [[unlikely]]
    s.raise_if_poisoned(*this);
}

// Note [Freeing on the issuing side]
// A finished op's closure holds its tensors, and the op, its closure and
// most tensors were allocated by the thread that issued it. Freeing them on
// the worker made every op cross threads in malloc (its arena lock, futex
// wakes: a third of the time of a dispatch-bound async loop). Workers
// instead push finished ops on a lock-free stack and the issuing side frees
// them at its next push or wait, on its own thread's caches. The memory
// outlives the op by that long; waits free it before they return.
void Scheduler::retire(Op* op) {
  op->next_retired = retired_.load(std::memory_order_relaxed);
  while (!retired_.compare_exchange_weak(op->next_retired, op, std::memory_order_release,
                                         std::memory_order_relaxed)) {
  }
}

void Scheduler::free_retired() {
  if (retired_.load(std::memory_order_relaxed) == nullptr) return;
  Op* op = retired_.exchange(nullptr, std::memory_order_acquire);
  while (op) {
    Op* next = op->next_retired;
    for (const VarList* vars : {&op->reads, &op->writes}) {
      for (Var* v : *vars)
        v->release();
    }
    delete op;
    op = next;
  }
}

// Note [Waking a waiter once]
// A thread that sleeps at a sync point registers what it waits for: the
// variable (Var::waiters), the end of all work (all_waiters_) or room in
// flight (throttle_waiters_), and an op's end wakes it only when that came
// true. Waking every sleeper at every op's end (as kiln first did) woke a
// Python thread waiting on a tensor 500 times in a W1 loop at batch 64: a
// futex call on the worker and a context switch to the waiter per op, the
// waiter taking a core from the kernels. Registration and the condition are
// both sequentially consistent atomics, so either the op's end sees the
// registration and wakes (under wait_mutex_), or the waiter, registered,
// sees the condition true before it sleeps. Room in flight stays true for
// many ops' ends after a pusher was woken and before it runs: the first of
// them wakes it (throttle_woken_, cleared each time a pusher goes to
// sleep), the others leave the futex alone, but the last op's end always
// wakes (a pusher whose op is larger than half the bytes allowed waits for
// that). Each counted a wakeup before: 15-21 where 11 sleeps were, when
// the host was slow to run the woken pusher.
template <typename Done>
void Scheduler::wait_until(std::atomic<int>& registry, Done done, std::atomic<bool>* woken) {
  bool finished = done();
  if (finished) {
    free_retired();
    return;
  }
  // Note [A lone op takes every thread]: a thread that waits has ended its
  // burst of pushes.
  struct Waiting {
    std::atomic<int>& count;
    explicit Waiting(std::atomic<int>& c) : count(c) { count.fetch_add(1); }
    ~Waiting() { count.fetch_sub(1); }
  } waiting(waiting_callers_);
  const bool helps = may_help();
  if (helps) {
    // Note [A waiting caller helps]: run what is ready, spin while a worker
    // may yet leave some, and sleep only when neither helps.
    auto done_or_helpable = [&] { return done() || helpable(); };
    while (!(finished = help_until(done)) && spin_until(done_or_helpable)) {
    }
  }
  if (finished || (!helps && spin_until(done))) {
    free_retired();
    return;
  }
  void* token = blocking_.enter ? blocking_.enter() : nullptr;
  registry.fetch_add(1);
  {
    std::unique_lock<std::mutex> lock(wait_mutex_);
    while (!done()) {
      // Under the lock the notifier takes: a wake flagged after this store
      // notifies after this thread sleeps.
      if (woken) woken->store(false);
      wait_cv_.wait(lock);
    }
  }
  registry.fetch_sub(1);
  if (blocking_.leave) blocking_.leave(token);
  free_retired();
}

void Scheduler::wait_var_idle(Var& var) {
  sync_waits_.fetch_add(1, std::memory_order_relaxed);
  wait_var_quietly(var);
}

void Scheduler::wait_var_quietly(Var& var) {
  wait_until(var.waiters, [&] { return var.pending.load() == 0; });
}

void Scheduler::wait_all() {
  if (t_in_running_op) return;
  wait_until(all_waiters_, [&] { return in_flight_.load() == 0; });
}

// Limits::max_bytes is each worker's: the bytes in flight are what the
// workers write next, and each writes into its own core's caches. With the
// pool's 4 MiB for two workers, the two matmul chains of bench/engine.py
// ran at 1.72-1.88x of serial; with 8 MiB, 1.82-1.91x (1 GiB: 1.86-2.01x).
int64_t Scheduler::byte_limit() const {
  return max_bytes_.load(std::memory_order_relaxed) * num_workers_.load(std::memory_order_relaxed);
}

void Scheduler::throttle(int64_t bytes) {
  auto fits = [&] {
    int64_t ops = in_flight_.load();
    if (ops == 0) return true;
    return ops < max_ops_.load(std::memory_order_relaxed) &&
           in_flight_bytes_.load() + bytes <= byte_limit();
  };
  wait_until(throttle_waiters_, fits, &throttle_woken_);
}

void Scheduler::raise_if_poisoned(Var& var) {
  std::shared_ptr<Failure> failure;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    failure = var.failure;
    if (failure) failure->reported = true;
  }
  if (failure) throw_error(failure->kind, failure->message);
}

void Scheduler::raise_unreported() {
  std::vector<std::shared_ptr<Failure>> failures;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    failures.swap(unreported_);
  }
  auto first =
      std::find_if(failures.begin(), failures.end(), [](const auto& f) { return !f->reported; });
  if (first == failures.end()) return;
  int64_t others = std::count_if(first + 1, failures.end(), [](auto& f) { return !f->reported; });
  std::string more = others ? str(" (and ", others, " more failed ops)") : std::string();
  throw_error((*first)->kind, (*first)->message + more);
}

void Scheduler::push(Op* op) {
  free_retired();
  // Workers start on the first push: sync-only programs never make them.
  if (!started_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    start_workers_locked();
  }
  int64_t ops = in_flight_.fetch_add(1) + 1;
  int64_t bytes = in_flight_bytes_.fetch_add(op->bytes) + op->bytes;
  pushed_.fetch_add(1, std::memory_order_relaxed);
  update_peak(peak_in_flight_, ops);
  update_peak(peak_in_flight_bytes_, bytes);
  bool ready;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    op->waiting = int(op->reads.size() + op->writes.size());
    for (Var* v : op->reads) {
      v->pending.fetch_add(1);
      if (v->idle() && !v->running_write) {
        ++v->running_reads;
        --op->waiting;
      } else {
        v->queue.push_back({op, false});
      }
    }
    for (Var* v : op->writes) {
      v->pending.fetch_add(1);
      if (v->idle() && !v->running_write && v->running_reads == 0) {
        v->running_write = true;
        --op->waiting;
      } else {
        v->queue.push_back({op, true});
      }
    }
    ready = op->waiting == 0;
  }
  if (!ready) return;
  // Note [A lone op takes every thread]: an op ready as it is pushed may
  // run beside the one running now.
  last_ready_push_ns_.store(steady_now_ns(), std::memory_order_relaxed);
  enqueue(op);
}

// After a variable's running ops finished: grants the next write, or the
// run of reads at the front of its queue.
void Scheduler::grant_waiting(Var& var, std::vector<Op*>& ready) {
  while (!var.idle()) {
    Var::Entry next = var.queue[var.head];
    if (next.write) {
      if (var.running_write || var.running_reads > 0) break;
      var.running_write = true;
    } else {
      if (var.running_write) break;
      ++var.running_reads;
    }
    ++var.head;
    if (--next.op->waiting == 0) ready.push_back(next.op);
    if (next.write) break;
  }
  if (var.idle()) {
    var.queue.clear();
    var.head = 0;
  }
}

void Scheduler::enqueue(Op* op) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(ready_mutex_);
    ready_.push_back(op);
    ready_size_.fetch_add(1, std::memory_order_release);
    wake = sleeping_ > 0;
  }
  if (wake) ready_cv_.notify_one();
}

// Note [A waiting caller helps]
// With two workers or more, a caller that waits (a sync point,
// synchronize(), backpressure) runs ready ops itself rather than spin or
// sleep. A pool's worker that slept took 0.1-3 ms to get a core back on a
// 2-core VM, long enough for the other worker to run both branches of a
// model alone, and the waiting caller was a third thread spinning on a
// core the workers needed. Running ops instead, it is one of the two
// threads the cores run: bench/engine.py's two-branch model went from
// 1.0-1.4x of serial to 1.5-1.8x (medians of its runs). It takes an op
// only while fewer threads hold ops than there are workers, so ops side by side
// stay within what set_num_interop_threads allows, and it runs them with a
// worker's OpenMP threads. One worker (the default) runs ops in issue
// order and gets every thread, so the caller does not help it. Only ops
// are run here, never a wait: a running op does not wait (Note [Sync
// points]). Queued ops are kernels and compiled runs, which take no lock a
// thread may hold while it waits, so running one on the waiting thread
// cannot deadlock where a worker would not.
bool Scheduler::may_help() const {
  return num_workers_.load(std::memory_order_relaxed) >= 2 && !t_in_running_op &&
         started_.load(std::memory_order_acquire);
}

bool Scheduler::helpable() const {
  return ready_size_.load(std::memory_order_acquire) > 0 &&
         holding_.load(std::memory_order_relaxed) < num_workers_.load(std::memory_order_relaxed) &&
         !wide_running_.load(std::memory_order_relaxed);
}

template <typename Done>
bool Scheduler::help_until(Done done) {
  Op* op = nullptr;
  void* token = nullptr;
  int saved_threads = 0;
  bool helping = false;
  while (!done()) {
    if (!op) {
      if (!helpable() || !(op = try_pop_ready())) break;
      if (!helping) {
        helping = true;
        token = blocking_.enter ? blocking_.enter() : nullptr;
        saved_threads = cpu::max_threads();
        cpu::set_num_threads(intra_threads_.load(std::memory_order_relaxed));
      }
    }
    op = run(op);
    if (!op) holding_.fetch_sub(1);  // this chain ended
    ran_by_waiting_caller_.fetch_add(1, std::memory_order_relaxed);
  }
  if (op) {  // made ready by the last op run here: a worker's now
    enqueue(op);
    holding_.fetch_sub(1);
  }
  if (helping) {
    cpu::set_num_threads(saved_threads);
    if (blocking_.leave) blocking_.leave(token);
  }
  return done();
}

Op* Scheduler::try_pop_ready() {
  std::lock_guard<std::mutex> lock(ready_mutex_);
  if (ready_.empty() || wide_) return nullptr;
  Op* op = ready_.front();
  ready_.pop_front();
  ready_size_.fetch_sub(1, std::memory_order_relaxed);
  holding_.fetch_add(1);  // under the mutex: take_every_thread() sees it
  return op;
}

// One idle worker at a time spins for the next op; the others sleep at
// once. A second spinner only took a core from the threads running ops (on
// two cores, a third runnable thread), and made the busy-cores watch see
// the pool starved by its own threads.
Op* Scheduler::pop_ready() {
  if (spinning_.fetch_add(1, std::memory_order_relaxed) == 0) {
    spin_until([&] {
      return ready_size_.load(std::memory_order_acquire) > 0 &&
             !wide_running_.load(std::memory_order_relaxed);
    });
  }
  spinning_.fetch_sub(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(ready_mutex_);
  // An op running with every thread holds the others back (Note [A lone
  // op takes every thread]).
  while ((ready_.empty() || wide_) && !stopping_) {
    ++sleeping_;
    ready_cv_.wait(lock);
    --sleeping_;
  }
  if (ready_.empty() || wide_) return nullptr;  // stopping
  Op* op = ready_.front();
  ready_.pop_front();
  ready_size_.fetch_sub(1, std::memory_order_relaxed);
  holding_.fetch_add(1);  // under the mutex: take_every_thread() sees it
  return op;
}

// A worker runs next the op that the one it finished made ready (the next
// op of a chain) itself, without a trip through the ready queue: one lock
// and one hand-over less per op, and the data is in this core's cache.
void Scheduler::worker_loop(int intra_threads) {
  cpu::set_num_threads(intra_threads);
  BusyCores::Sample sample;  // Note [Busy cores] in busy_cores.cpp
  Op* op = nullptr;
  while (op || (op = pop_ready())) {
    op = run(op);
    if (!op) holding_.fetch_sub(1);  // this chain ended
    busy_cores().after_op(sample);
  }
}

Op* Scheduler::run(Op* op) {
  std::shared_ptr<Failure> inherited;
  auto poisoned = [](const Var* v) { return v->poisoned.load(std::memory_order_acquire); };
  bool any_poisoned = std::any_of(op->reads.begin(), op->reads.end(), poisoned) ||
                      std::any_of(op->writes.begin(), op->writes.end(), poisoned);
  if (any_poisoned) [[unlikely]] {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (const VarList* vars : {&op->reads, &op->writes}) {
      for (Var* v : *vars) {
        if (v->failure && !inherited) inherited = v->failure;
      }
    }
  }
  std::shared_ptr<Failure> failure = inherited;
  if (!failure) {
    RunningOp running;
    profiler::Range range;  // the kernel on this worker, with its queueing time
    if (op->queued_ns >= 0 && profiler::recording()) {
      range.open(profiler::EventKind::Kernel, op->site.op);
      range.set_queued(op->queued_ns);
    }
    const bool every_thread = take_every_thread();
    const int threads = every_thread ? cpu::max_threads() : 0;
    if (every_thread) cpu::set_num_threads(all_threads_.load(std::memory_order_relaxed));
    try {
      op->fn();
    } catch (...) {
      failure = failure_of(std::current_exception(), op->site);
    }
    if (every_thread) {
      cpu::set_num_threads(threads);
      give_back_every_thread();  // before the ops this one makes ready are queued
    }
  }
  return complete(op, failure, failure && !inherited);
}

// Note [Running small ops at once]
// Queueing an op costs more than running a small kernel (the op's record,
// a worker taking it, the cache lines both threads touch: microseconds), so
// a loop of small ops was slower async than sync. An op whose variables
// have nothing pending depends on nothing outstanding, and nothing queued
// can depend on it yet: running it at once on the caller gives the order
// and values of queueing it. It takes no lock and marks nothing pending: an
// op another thread pushes on the same memory meanwhile may run beside it,
// which is the race the two threads' ops would have in sync mode (and a
// storage no op was ever queued on gets no variable at all). It runs as a
// running op (nested ops inline, no sync point waits), and its failure is
// stored on what it writes, not thrown: a sync point raises it, as for any
// async op. Only small ops come here (the caller's cost model,
// Limits::inline_bytes): a large kernel is still queued, so the caller runs
// ahead of it.
void Scheduler::store_failure(std::exception_ptr error, Site site,
                              const std::vector<Var*>& written) {
  if (!site.where) site.where = caller_location();  // asked only now: it costs
  std::shared_ptr<Failure> failure = failure_of(error, site);
  std::lock_guard<std::mutex> lock(state_mutex_);
  unreported_.push_back(failure);
  for (Var* v : written) {
    if (!v->carries_failures) continue;
    v->failure = failure;
    v->poisoned.store(true, std::memory_order_release);
  }
}

// The op is done: its variables grant the ops waiting on them and take its
// failure. The first op made ready goes to `keep` (when given), the others
// to the ready queue. Returns whether a variable with a sleeping waiter
// went idle.
bool Scheduler::release_vars(const Op& op, const std::shared_ptr<Failure>& failure,
                             bool new_failure, Op** keep) {
  bool var_waited = false;
  thread_local std::vector<Op*> ready;  // kept: no allocation per op
  ready.clear();
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (new_failure) unreported_.push_back(failure);
    for (Var* v : op.reads) {
      if (--v->running_reads == 0) grant_waiting(*v, ready);
    }
    for (Var* v : op.writes) {
      if (failure && v->carries_failures) {
        v->failure = failure;
        v->poisoned.store(true, std::memory_order_release);
      }
      v->running_write = false;
      grant_waiting(*v, ready);
    }
    for (const VarList* vars : {&op.reads, &op.writes}) {
      for (Var* v : *vars) {
        if (v->pending.fetch_sub(1) == 1 && v->waiters.load() > 0) var_waited = true;
      }
    }
  }
  size_t first = 0;
  if (keep && !ready.empty()) *keep = ready[first++];
  for (size_t i = first; i < ready.size(); ++i)
    enqueue(ready[i]);
  return var_waited;
}

// Note [Waking a waiter once]: only a sleeper whose condition came true. A
// pusher held back by the in-flight limits waits until half of them is
// free (or nothing is in flight), not for the first op to end: it then
// pushes a batch before it sleeps again, rather than trading places with
// the worker at every op.
void Scheduler::notify_waiters(bool var_waited, int64_t ops_left, int64_t bytes_left) {
  bool drained =
      ops_left <= max_ops_.load(std::memory_order_relaxed) / 2 && bytes_left <= byte_limit() / 2;
  bool wake = var_waited || (ops_left == 0 && all_waiters_.load() > 0) ||
              (throttle_waiters_.load() > 0 &&
               (ops_left == 0 || (drained && !throttle_woken_.exchange(true))));
  if (!wake) return;
  waiter_wakeups_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(wait_mutex_);
  wait_cv_.notify_all();
}

Op* Scheduler::complete(Op* op, const std::shared_ptr<Failure>& failure, bool new_failure) {
  Op* next = nullptr;
  bool var_waited = release_vars(*op, failure, new_failure, &next);
  const int64_t bytes = op->bytes;
  retire(op);  // the last touch: the issuing side may free it from here on
  int64_t bytes_left = in_flight_bytes_.fetch_sub(bytes) - bytes;
  // After retire: synchronize() frees every finished op.
  int64_t ops_left = in_flight_.fetch_sub(1) - 1;
  notify_waiters(var_waited, ops_left, bytes_left);
  return next;
}

}  // namespace kiln::engine::detail
