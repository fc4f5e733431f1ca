// The dependency engine: every kernel dispatch runs goes through push(),
// with the variables (storages, the random generator) it reads and writes.
//
//   sync   (the default) push runs the op at once on the calling thread,
//          as kiln always did;
//   async  push queues the op and returns; a pool of workers runs each op
//          once the ops pushed before it on its variables are done. Reads
//          of one variable run together; a write waits for everything
//          before it and everything after waits for it. One worker (the
//          default) runs ops in issue order while the caller goes on; more
//          workers run independent ops side by side.
//
// It knows nothing of ops or tensors beyond core's storage: dispatch (the
// ops layer, above) decides what an op reads and writes and pushes its
// kernel; shapes and dtypes are inferred and outputs allocated on the
// calling thread, so they never wait.
//
// Note [Sync points]
// Outside a running op, any host access to a storage's values waits for the
// ops pushed on it: Tensor::data_ptr() does it (so print, item(), tolist(),
// numpy(), DLPack, bool(), data-dependent sizes and every C++ reader are
// sync points), and so do the generator's calls. A running op never waits:
// its dependencies are done by construction, and an op it issues itself
// (a kernel that dispatches) runs inline.
//
// Note [Errors where they were made]
// An op that throws in the background leaves its failure (the op's name,
// the site that issued it, the message) on the variables it writes; ops
// that read or write those variables are skipped and pass it on. A sync
// point on a variable holding a failure raises it, with the original op
// and site in the message, each time (the values are not there), and
// unrelated variables stay usable. synchronize() raises a failure that no
// sync point has raised yet, once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "kiln/core/engine_var.h"
#include "kiln/core/random.h"
#include "kiln/core/storage.h"

namespace kiln::engine {

enum class Execution { Sync, Async };

// The mode of every thread of the process; the first call reads
// KILN_EXECUTION=sync|async from the environment.
void set_execution(Execution mode);
Execution execution();
Execution parse_execution(const std::string& name);  // ValueError for other names
const char* to_string(Execution mode);

// The mode ops run in: execution(), except that async mode runs them as
// sync mode does when the process may use one core only (Note [Async needs
// a second core] in engine.cpp), and says "sync" while it runs them on the
// caller because the cores are busy (caller_preferred()).
Execution effective_execution();
// The cores this process may use: its CPU affinity and cgroup quota, or
// KILN_ENGINE_CORES; read once.
int usable_cores();

// True while async mode runs ops on the caller because its workers waited
// too long for a core (Note [Busy cores] in busy_cores.cpp): dispatch then
// runs each op with run_if_idle(..., wait_for_pending = true).
bool caller_preferred();
// Turns that fallback on (the default; KILN_ENGINE_BUSY_FALLBACK=0 starts
// it off) or off.
void set_busy_fallback(bool on);
bool busy_fallback();
// Prefers the caller for the next `ms` milliseconds as if the workers had
// been starved (0 ends it): for tests, and for a caller that knows.
void prefer_caller_for(int64_t ms);

// True when an op issued now on this thread is queued: async mode in
// effect, outside a running op.
bool pushing();

// The engine's variable of a storage or generator (made on first use). A
// generator's variable only orders its draws: a failed op leaves no failure
// there (Note [Errors where they were made]).
EngineVar* var_of(const StorageImpl& storage);
EngineVar* var_of(Generator& generator);
// A variable that only orders the ops pushed on it, as a generator's does
// (one reference, the caller's): a compiled plan's runs.
EngineVar* new_order_var();

// Where an op was issued, for its error: the op's name and the caller's
// location ("train.py:42"); both must outlive the op (string literals, op
// names, interned locations). A null `where` is filled by the engine from
// caller_location() when it needs it (on queueing, or when an op run at
// once fails), so an op that runs at once never pays for the lookup.
struct Site {
  const char* op = "";
  const char* where = "";
};

// The location of the caller, asked on every async push: the Python
// bindings install one that names the user's file and line. It returns a
// string that lives as long as the process (or "").
using SiteHook = const char* (*)();
void set_site_hook(SiteHook hook);
// The hook's answer, else the innermost SiteScope of this thread, else "".
const char* caller_location();

// A C++ caller's site for the ops it issues while the scope lives (their
// errors name it): KILN_ENGINE_SITE() names the file and line it stands
// on. `where` must outlive the ops (a string literal).
class SiteScope {
 public:
  explicit SiteScope(const char* where);
  ~SiteScope();
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  const char* saved_;
};

#define KILN_ENGINE_SITE_TEXT2(line) #line
#define KILN_ENGINE_SITE_TEXT(line) KILN_ENGINE_SITE_TEXT2(line)
#define KILN_ENGINE_SITE() \
  ::kiln::engine::SiteScope kiln_engine_site_(__FILE__ ":" KILN_ENGINE_SITE_TEXT(__LINE__))

// Around a wait that blocks (the Python bindings release the GIL there, so
// workers running Python callbacks and other Python threads go on).
struct BlockingHooks {
  void* (*enter)() = nullptr;
  void (*leave)(void* token) = nullptr;
};
void set_blocking_hooks(BlockingHooks hooks);

// Runs `fn` now (sync mode, or inside a running op) or queues it. `reads`
// and `writes` may repeat and overlap (a variable both read and written is
// a write). `bytes`: the memory the op holds while in flight (what its
// outputs take), counted against the in-flight limit.
void push(std::function<void()> fn, std::span<EngineVar* const> reads,
          std::span<EngineVar* const> writes, Site site, int64_t bytes = 0);

// A callable borrowed for the length of one call (no allocation, no copy).
class FunctionRef {
 public:
  template <typename F>
  FunctionRef(F& fn)  // NOLINT: implicit, like std::function_ref
      : object_(&fn), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void* object_;
  void (*call_)(void*);
};

// The fast path of async mode (Note [Running small ops at once]): runs `fn`
// now, on the calling thread, when no op is pending on any of the
// variables, as if it had been queued and run at once: its failure is
// stored and raised at a sync point, as a queued op's would be. Returns
// false, running nothing, when an op is pending there (push it instead).
// The caller decides the op is small enough (Limits::inline_bytes).
// `site.where` may be null: it is asked of the site hook only on failure.
bool run_if_idle(FunctionRef fn, std::span<EngineVar* const> reads,
                 std::span<EngineVar* const> writes, Site site);
// The same over the slots of storages (and the generator): a storage that
// never had an op queued has no variable, and none is made for it unless
// the op fails (its failure needs one). A generator's slot must hold its
// variable already (var_of(Generator&)), so it carries no failure. With
// `wait_for_pending`, it first waits for the ops pending there (not a sync
// point: a failure they leave is not raised) and refuses only a failure.
// Only while pushing() is true: unlike the overload above, it does not ask.
bool run_if_idle(FunctionRef fn, std::span<EngineVarSlot* const> reads,
                 std::span<EngineVarSlot* const> writes, Site site, bool wait_for_pending = false);

// Waits for every pushed op; raises a failure no sync point raised yet.
void synchronize();

// Backpressure: push blocks while this many ops, or ops holding this many
// bytes per worker, are in flight (one op larger than the byte limit still
// runs alone).
// A few dozen ops ahead is all the caller needs to overlap the kernels;
// further ahead only costs: every op in flight holds its own output blocks,
// so the memory a loop cycles through grows with the queue. With 4096 ops
// allowed, the W1 training loop ran some 80 steps ahead, held 220 MB, took
// 200 page faults a step and ran 0.8x sync's speed; with 64, 1.2-1.4x
// (bench/engine.py). The byte bound keeps what the worker writes in cache
// as well: with 4 MiB rather than 1 GiB in flight, LeNet's batch-64
// inference (W2) went from 1.14x sync's time to 0.90x, and from 0.79x to
// 0.69x in a second run; no workload measured got slower (an op over the
// bound runs alone, and one that large takes long enough that the caller
// issuing the next one meanwhile costs little). inline_bytes: an op
// touching at most this many bytes (inputs and outputs) runs at once on the
// caller when its variables are idle (run_if_idle); 0 queues every op.
struct Limits {
  int64_t max_ops = 64;
  int64_t max_bytes = int64_t(4) << 20;
  int64_t inline_bytes = 16 << 10;
};
void set_limits(Limits limits);
Limits limits();
// What dispatch's every op asks, in one call: -1 when ops are not pushed
// (pushing() is false), else limits().inline_bytes.
int64_t pushing_inline_bytes();

// Workers of the pool (1 by default). Each worker's kernels get
// max(1, threads / workers) OpenMP threads, `threads` being what the
// caller's thread had when the pool started, so inter-op times intra-op
// parallelism stays within the cores. Waits for pushed ops first.
void set_num_interop_threads(int n);
int num_interop_threads();

struct Stats {
  int64_t pushed = 0;     // ops queued since the process started
  int64_t in_flight = 0;  // queued and not done
  int64_t peak_in_flight = 0;
  int64_t in_flight_bytes = 0;
  int64_t peak_in_flight_bytes = 0;
  int64_t ran_inline = 0;  // ops async mode ran at once (run_if_idle)
  // Queued ops a waiting caller ran itself (Note [A waiting caller helps]).
  int64_t ran_by_waiting_caller = 0;
  // Queued ops that ran alone with every thread of the pool (Note [A lone
  // op takes every thread]).
  int64_t ran_with_every_thread = 0;
  int64_t sync_waits = 0;  // sync points that found ops pending and waited
  // Times an op's end woke threads sleeping at a sync point, synchronize()
  // or backpressure: once per wait that sleeps, not once per op.
  int64_t waiter_wakeups = 0;
  // Times a worker found it waited too long for a core and async mode ran
  // ops on the caller for a while (Note [Busy cores]).
  int64_t busy_fallbacks = 0;
};
Stats stats();
void reset_peak_stats();

}  // namespace kiln::engine

namespace kiln {
// kiln::set_execution(kiln::engine::Execution::Async); kiln::synchronize();
using engine::Execution;
using engine::set_execution;
using engine::synchronize;
}  // namespace kiln
