#include "kiln/engine/engine.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "kiln/engine/busy_cores.h"
#include "kiln/engine/scheduler.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::engine {
namespace {

using detail::Op;
using detail::Var;

// -1 until the first call reads KILN_EXECUTION.
std::atomic<int> g_mode{-1};
std::atomic<SiteHook> g_site_hook{nullptr};
// Limits::inline_bytes, here rather than in the scheduler: dispatch's every
// op reads it (pushing_inline_bytes).
std::atomic<int64_t> g_inline_bytes{Limits{}.inline_bytes};

int mode_from_environment() {
  const char* env = std::getenv("KILN_EXECUTION");
  int mode = int(env && *env ? parse_execution(env) : Execution::Sync);
  int unset = -1;
  g_mode.compare_exchange_strong(unset, mode);
  return g_mode.load();
}

Var* install(EngineVarSlot& slot, bool carries_failures = true) {
  if (EngineVar* v = slot.get()) return static_cast<Var*>(v);
  return static_cast<Var*>(slot.install(new Var(carries_failures)));
}

// Each variable once; one both read and written is a write. A queued op
// holds a reference to each, so a storage freed while its ops are queued
// keeps its variable until they finish.
void collect(Op& op, std::span<EngineVar* const> reads, std::span<EngineVar* const> writes) {
  for (EngineVar* v : writes) {
    auto* var = static_cast<Var*>(v);
    if (!op.writes.contains(var)) op.writes.push_back(var);
  }
  for (EngineVar* v : reads) {
    auto* var = static_cast<Var*>(v);
    if (!op.writes.contains(var) && !op.reads.contains(var)) op.reads.push_back(var);
  }
  for (const detail::VarList* vars : {&op.reads, &op.writes}) {
    for (Var* var : *vars)
      var->retain();
  }
}

// The CPUs the cgroup's quota allows (cgroup v2, then v1), or 0 when
// there is no quota.
int cgroup_quota_cores() {
  std::ifstream v2("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (v2 >> quota >> period) {
    double limit = quota == "max" ? 0 : std::strtod(quota.c_str(), nullptr);  // never throws
    return limit > 0 && period > 0 ? std::max(1, int(limit / period)) : 0;
  }
  std::ifstream v1_quota("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::ifstream v1_period("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double q = 0;
  if (v1_quota >> q && v1_period >> period && q > 0 && period > 0)
    return std::max(1, int(q / period));
  return 0;
}

int detect_usable_cores() {
  if (const char* env = std::getenv("KILN_ENGINE_CORES"); env && *env) {
    int n = std::atoi(env);
    KILN_CHECK_VALUE(n >= 1, "KILN_ENGINE_CORES: expected a number of cores >= 1, got '", env, "'");
    return n;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  int quota = cgroup_quota_cores();
  return quota > 0 ? std::min(cores, quota) : cores;
}

// Internal, so that pushing(), which every op asks, calls none of them:
// execution() and usable_cores() are the exported forms.
Execution execution_now() {
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode < 0) [[unlikely]]
    mode = mode_from_environment();
  return Execution(mode);
}

int cores_once() {
  static const int cores = detect_usable_cores();
  return cores;
}

bool async_with_workers() {
  return execution_now() == Execution::Async && cores_once() >= 2;
}

}  // namespace

// Note [Async needs a second core]
// Async mode pays by running kernels on a worker while the caller goes on;
// with one core the two take turns, and every queued op only adds the
// hand-over (a push, a wake, a context switch, cache lines changing hands).
// So when the process may use one core only (its CPU affinity, its
// cgroup's quota, or KILN_ENGINE_CORES=1), async mode runs every op as sync
// mode does, on the caller: kiln picks sync by itself, and says so in
// effective_execution() (kiln.execution_in_effect()).
int usable_cores() {
  return cores_once();
}

Execution effective_execution() {
  if (execution() == Execution::Sync) return Execution::Sync;
  return async_with_workers() && !detail::busy_cores().caller_preferred() ? Execution::Async
                                                                          : Execution::Sync;
}

bool caller_preferred() {
  return detail::busy_cores().caller_preferred();
}

void set_busy_fallback(bool on) {
  detail::busy_cores().set_enabled(on);
}

bool busy_fallback() {
  return detail::busy_cores().enabled();
}

void prefer_caller_for(int64_t ms) {
  detail::busy_cores().prefer_caller_for(ms * 1'000'000);
}

void set_execution(Execution mode) {
  g_mode.store(int(mode), std::memory_order_relaxed);
}

Execution execution() {
  return execution_now();
}

Execution parse_execution(const std::string& name) {
  if (name == "sync") return Execution::Sync;
  if (name == "async") return Execution::Async;
  KILN_CHECK_VALUE(false, "execution mode: expected 'sync' or 'async', got '", name, "'");
  return Execution::Sync;  // not reached
}

const char* to_string(Execution mode) {
  return mode == Execution::Async ? "async" : "sync";
}

bool pushing() {
  return async_with_workers() && !detail::t_in_running_op;
}

int64_t pushing_inline_bytes() {
  return pushing() ? g_inline_bytes.load(std::memory_order_relaxed) : -1;
}

EngineVar* var_of(const StorageImpl& storage) {
  return install(storage.engine_var());
}

EngineVar* var_of(Generator& generator) {
  return install(generator.engine_var(), /*carries_failures=*/false);
}

EngineVar* new_order_var() {
  return new Var(/*carries_failures=*/false);
}

void set_site_hook(SiteHook hook) {
  g_site_hook.store(hook, std::memory_order_relaxed);
}

thread_local const char* t_cpp_site = nullptr;

const char* caller_location() {
  SiteHook hook = g_site_hook.load(std::memory_order_relaxed);
  const char* where = hook ? hook() : "";
  if (*where || !t_cpp_site) return where;
  const char* slash = std::strrchr(t_cpp_site, '/');  // the file's name, not its path
  return slash ? slash + 1 : t_cpp_site;
}

SiteScope::SiteScope(const char* where) : saved_(t_cpp_site) {
  t_cpp_site = where;
}

SiteScope::~SiteScope() {
  t_cpp_site = saved_;
}

void set_blocking_hooks(BlockingHooks hooks) {
  detail::scheduler().set_blocking_hooks(hooks);
}

void push(std::function<void()> fn, std::span<EngineVar* const> reads,
          std::span<EngineVar* const> writes, Site site, int64_t bytes) {
  if (!pushing()) {
    // Sync mode (or an op issued by a running op): wait for what came
    // before on these variables, then run here; errors raise at once.
    for (auto vars : {reads, writes}) {
      for (EngineVar* v : vars)
        v->wait_for_host_access();
    }
    fn();
    return;
  }
  detail::Scheduler& s = detail::scheduler();
  s.throttle(bytes);
  auto* op = new Op();
  op->fn = std::move(fn);
  op->site = site;
  if (!op->site.where) op->site.where = caller_location();  // the worker cannot ask
  op->bytes = bytes;
  if (profiler::recording()) op->queued_ns = profiler::now_ns();
  collect(*op, reads, writes);
  s.push(op);
}

bool run_if_idle(FunctionRef fn, std::span<EngineVar* const> reads,
                 std::span<EngineVar* const> writes, Site site) {
  if (!pushing()) return false;
  for (auto vars : {reads, writes}) {
    for (EngineVar* v : vars) {
      if (!detail::idle(static_cast<const Var*>(v))) return false;
    }
  }
  return detail::scheduler().run_at_once(fn, site, [&] {
    std::vector<Var*> written;
    for (EngineVar* v : writes)
      written.push_back(static_cast<Var*>(v));
    return written;
  });
}

bool run_if_idle(FunctionRef fn, std::span<EngineVarSlot* const> reads,
                 std::span<EngineVarSlot* const> writes, Site site, bool wait_for_pending) {
  // The caller asked pushing() already: dispatch's every small op comes
  // here, and a second ask was a measurable part of the engine's cost.
  if (wait_for_pending) {
    for (auto slots : {reads, writes}) {
      for (EngineVarSlot* slot : slots) {
        if (auto* var = static_cast<Var*>(slot->get())) detail::scheduler().wait_var_quietly(*var);
      }
    }
  }
  for (auto slots : {reads, writes}) {
    for (EngineVarSlot* slot : slots) {
      if (!detail::idle(static_cast<const Var*>(slot->get()))) return false;
    }
  }
  return detail::scheduler().run_at_once(fn, site, [&] {
    std::vector<Var*> written;
    for (EngineVarSlot* slot : writes)
      written.push_back(install(*slot));  // a generator's exists: it keeps carrying none
    return written;
  });
}

void synchronize() {
  detail::Scheduler& s = detail::scheduler();
  s.wait_all();
  s.raise_unreported();
}

void set_limits(Limits limits) {
  detail::scheduler().set_limits(limits);  // checks all three
  g_inline_bytes.store(limits.inline_bytes);
}

Limits limits() {
  Limits limits = detail::scheduler().limits();
  limits.inline_bytes = g_inline_bytes.load();
  return limits;
}

void set_num_interop_threads(int n) {
  detail::scheduler().set_workers(n);
}

int num_interop_threads() {
  return detail::scheduler().workers();
}

Stats stats() {
  return detail::scheduler().stats();
}

void reset_peak_stats() {
  detail::scheduler().reset_peaks();
}

}  // namespace kiln::engine
