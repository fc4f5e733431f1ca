// The process group: MPI's init and finalize, and the communication thread
// that runs every queued call with a deadline (distributed.h, Notes [One
// communication thread] and [Failures]).
#include "kiln/distributed/comm.h"

#include "kiln/util/profile_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <thread>

namespace kiln::distributed {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

// Threads blocked in WorkState::wait (see the polling loop).
std::atomic<int> g_threads_waiting{0};

double default_timeout_s() {
  const char* env = std::getenv("KILN_DIST_TIMEOUT");
  if (env == nullptr || *env == 0) return 1800;
  char* end = nullptr;
  double seconds = std::strtod(env, &end);
  KILN_CHECK_VALUE(end != env && *end == 0 && seconds > 0,
                   "init_process_group: KILN_DIST_TIMEOUT must be a positive number of seconds, "
                   "got '",
                   env, "'");
  return seconds;
}

std::string mpi_error_text(int code) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  return std::string(text.data(), size_t(length));
}

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// What each rank tells the others when the call hashes differ.
constexpr size_t kCallTextSize = 480;

// A job on the thread, with the buffers of its check.
struct Running {
  Job job;
  enum class Phase { Check, Gather, Run } phase = Phase::Check;
  Clock::time_point deadline;
  std::string local_failure;  // the engine's error for this rank's tensors
  std::array<uint64_t, 2> hash{};
  std::array<uint64_t, 2> hash_max{};
  std::vector<char> own_text;
  std::vector<char> all_texts;
  std::vector<MPI_Request> requests;
  profiler::Range range;  // collectives only: they run one at a time, so ranges nest
};

// Note [Terminated by the launcher]
// When a rank dies or exits without finalizing, mpirun ends every other
// rank (SIGTERM, then SIGKILL). Those ranks may be inside a collective with
// nothing to raise yet: the handler says on stderr why they end, then ends
// them as SIGTERM would have. Installed only over the default disposition.
char g_terminated_text[160];
size_t g_terminated_length = 0;

void on_terminate(int signal_number) {
  ssize_t written = write(STDERR_FILENO, g_terminated_text, g_terminated_length);
  (void)written;
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_terminate_handler(int rank, int size) {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  int length = std::snprintf(g_terminated_text, sizeof g_terminated_text,
                             "kiln.distributed: rank %d of %d terminated by the launcher: another "
                             "rank failed or died (see mpirun's report)\n",
                             rank, size);
  g_terminated_length = size_t(std::clamp(length, 0, int(sizeof g_terminated_text) - 1));
  struct sigaction action {};
  action.sa_handler = on_terminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

class Group {
 public:
  void init(const InitOptions& options);
  void destroy();
  void enqueue(Job job);
  void break_group(const std::string& reason);

  bool initialized = false;
  bool finalized = false;
  bool owns_mpi = false;
  int rank = 0;
  int size = 1;
  std::atomic<double> timeout_s{1800};
  std::atomic<int64_t> collectives{0};
  std::atomic<int64_t> completed{0};

  bool broken() const {
    std::lock_guard lock(mutex_);
    return !broken_reason_.empty();
  }
  std::string broken_reason() const {
    std::lock_guard lock(mutex_);
    return broken_reason_;
  }

 private:
  void run();
  bool step(Running& r);
  bool start_check(Running& r);
  bool start_run(Running& r);
  void fail(Running& r, const std::string& error, ErrorKind kind = ErrorKind::Runtime);
  bool test(Running& r, bool& done);
  std::string mismatch_error(const Running& r) const;

  MPI_Comm collective_comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  mutable std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::string broken_reason_;
  std::thread thread_;
};

Group& group() {
  static Group* g = new Group();  // never destroyed: the thread may outlive statics
  return *g;
}

void Group::init(const InitOptions& options) {
  KILN_CHECK_VALUE(options.backend == "mpi", "init_process_group: backend '", options.backend,
                   "' is not available; kiln has the 'mpi' backend");
  KILN_CHECK(!initialized, "init_process_group: the default process group is already initialized");
  KILN_CHECK(!finalized,
             "init_process_group: MPI was finalized by destroy_process_group() in this process "
             "and cannot start again");
  timeout_s = options.timeout_s > 0 ? options.timeout_s : default_timeout_s();
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    KILN_CHECK(rc == MPI_SUCCESS,
               "init_process_group: MPI_Init_thread failed: ", mpi_error_text(rc));
    KILN_CHECK(provided >= MPI_THREAD_SERIALIZED,
               "init_process_group: this MPI does not support MPI_THREAD_SERIALIZED");
    owns_mpi = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &collective_comm_);
  MPI_Comm_dup(MPI_COMM_WORLD, &p2p_comm_);
  // Errors come back as codes: a dead peer breaks the group, not the process.
  MPI_Comm_set_errhandler(collective_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(p2p_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(collective_comm_, &rank);
  MPI_Comm_size(collective_comm_, &size);
  install_terminate_handler(rank, size);
  stopping_ = false;
  broken_reason_.clear();
  initialized = true;
  thread_ = std::thread([this] { run(); });
}

void Group::destroy() {
  if (!initialized) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_cv_.notify_all();
  thread_.join();
  initialized = false;
  // A broken group may have a collective pending with a dead or stuck rank:
  // freeing or finalizing would wait for it forever (Note [Failures]).
  if (broken()) return;
  MPI_Comm_free(&collective_comm_);
  MPI_Comm_free(&p2p_comm_);
  if (owns_mpi) {
    MPI_Finalize();
    finalized = true;
  }
}

void Group::enqueue(Job job) {
  KILN_CHECK(initialized, job.call,
             ": the default process group is not initialized; call init_process_group() first");
  std::lock_guard lock(mutex_);
  KILN_CHECK(broken_reason_.empty(), job.call,
             ": the process group is broken by an earlier failure: ", broken_reason_);
  // Numbered under the lock: threads that issue calls side by side still
  // number them in queue order.
  if (job.collective) job.number = collectives.fetch_add(1);
  queue_.push_back(std::move(job));
  queued_cv_.notify_one();
}

void Group::break_group(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (broken_reason_.empty()) broken_reason_ = reason;
}

void Group::fail(Running& r, const std::string& error, ErrorKind kind) {
  if (r.range.active()) r.range.close();
  r.job.work->complete(error, kind);
  r.job.tensors.clear();
}

// Tests the job's requests; false (with the group broken) on an MPI error.
bool Group::test(Running& r, bool& done) {
  int flag = 0;
  int rc = r.requests.empty()
               ? MPI_SUCCESS
               : MPI_Testall(int(r.requests.size()), r.requests.data(), &flag, MPI_STATUSES_IGNORE);
  if (r.requests.empty()) flag = 1;
  if (rc != MPI_SUCCESS) {
    std::string reason = str(r.job.call, " failed on rank ", rank, " of ", size,
                             ": MPI error: ", mpi_error_text(rc), " (a rank probably died)");
    break_group(reason);
    fail(r, "kiln.distributed: " + reason);
    return false;
  }
  done = flag != 0;
  if (done) r.requests.clear();
  return true;
}

bool Group::start_check(Running& r) {
  r.job.work->mark_started();
  if (r.job.collective && profiler::recording())
    r.range.open(profiler::EventKind::User,
                 "kiln.distributed." + r.job.call.substr(0, r.job.call.find('(')));
  for (const Tensor& t : r.job.tensors) {
    try {
      t.wait_for_engine();
    } catch (const std::exception& e) {
      if (r.local_failure.empty()) r.local_failure = e.what();
    }
  }
  std::string said = r.job.call;
  if (!r.local_failure.empty())
    said += str(" [could not start on rank ", rank, ": ", r.local_failure, "]");
  uint64_t hash = fnv1a(said, fnv1a(std::to_string(r.job.number)));
  if (!r.job.collective || size == 1) {
    if (r.local_failure.empty()) return start_run(r);
    fail(r, str("kiln.distributed: ", r.job.call, " on rank ", rank, ": ", r.local_failure));
    return false;
  }
  r.hash = {hash, ~hash};
  r.own_text.assign(kCallTextSize, 0);
  std::string text = str("call #", r.job.number, " ", said);
  std::memcpy(r.own_text.data(), text.data(), std::min(text.size(), kCallTextSize - 1));
  r.requests.resize(1);
  int rc = MPI_Iallreduce(r.hash.data(), r.hash_max.data(), 2, MPI_UINT64_T, MPI_MAX,
                          collective_comm_, r.requests.data());
  if (rc != MPI_SUCCESS) {
    std::string reason =
        str(r.job.call, " failed on rank ", rank, ": MPI error: ", mpi_error_text(rc));
    break_group(reason);
    fail(r, "kiln.distributed: " + reason);
    return false;
  }
  r.phase = Running::Phase::Check;
  return true;
}

bool Group::start_run(Running& r) {
  r.phase = Running::Phase::Run;
  r.requests.clear();
  int rc = r.job.start(r.job.collective ? collective_comm_ : p2p_comm_, r.requests);
  if (rc == MPI_SUCCESS) return true;
  std::string reason =
      str(r.job.call, " failed on rank ", rank, ": MPI error: ", mpi_error_text(rc));
  break_group(reason);
  fail(r, "kiln.distributed: " + reason);
  return false;
}

std::string Group::mismatch_error(const Running& r) const {
  // A rank whose input failed in the engine: that, not a desync, is the news.
  const std::string marker = " [could not start on rank ";
  for (int i = 0; i < size; ++i) {
    std::string theirs(r.all_texts.data() + size_t(i) * kCallTextSize);
    size_t at = theirs.find(marker);
    if (at == std::string::npos) continue;
    std::string failure = theirs.substr(at + marker.size());
    if (!failure.empty() && failure.back() == ']') failure.pop_back();
    return str("kiln.distributed: ", r.job.call, " (collective call #", r.job.number,
               ") did not run on any rank: an input failed on rank ", failure);
  }
  std::string own(r.own_text.data());
  std::string other = "(unknown)";
  int other_rank = -1;
  for (int i = 0; i < size; ++i) {
    std::string theirs(r.all_texts.data() + size_t(i) * kCallTextSize);
    if (theirs != own) {
      other = theirs;
      other_rank = i;
      break;
    }
  }
  return str("kiln.distributed: ranks called different collectives: rank ", rank, " (this one) ",
             own, ", but rank ", other_rank, " ", other,
             "; every rank must issue the same collectives, with the same shapes and dtypes, in "
             "the same order");
}

// Advances the job; true while it is still running.
bool Group::step(Running& r) {
  if (Clock::now() > r.deadline) {
    double seconds = timeout_s.load();
    std::string reason =
        str(r.job.call, " (collective call #", r.job.number, ") timed out after ", seconds,
            " s on rank ", rank, " of ", size,
            ": another rank is stuck, died, or did not issue the same call (timeout from "
            "init_process_group(timeout=...) or KILN_DIST_TIMEOUT)");
    if (!r.job.collective)
      reason = str(r.job.call, " timed out after ", seconds, " s on rank ", rank);
    break_group(reason);
    fail(r, "kiln.distributed: " + reason);
    return false;
  }
  bool done = false;
  if (!test(r, done)) return false;
  if (!done) return true;
  switch (r.phase) {
    case Running::Phase::Check: {
      bool same = r.hash_max[0] == r.hash[0] && r.hash_max[1] == r.hash[1];
      if (same) return start_run(r);
      r.all_texts.assign(kCallTextSize * size_t(size), 0);
      r.requests.resize(1);
      int rc = MPI_Iallgather(r.own_text.data(), int(kCallTextSize), MPI_CHAR, r.all_texts.data(),
                              int(kCallTextSize), MPI_CHAR, collective_comm_, r.requests.data());
      if (rc != MPI_SUCCESS) {
        break_group(str(r.job.call, ": MPI error: ", mpi_error_text(rc)));
        fail(r, "kiln.distributed: " + broken_reason());
        return false;
      }
      r.phase = Running::Phase::Gather;
      return true;
    }
    case Running::Phase::Gather:
      fail(r, mismatch_error(r));
      return false;
    case Running::Phase::Run:
      try {
        if (r.job.finish) r.job.finish();
      } catch (const Error& e) {
        fail(r, e.what(), e.kind());
        return false;
      }
      r.job.tensors.clear();
      if (r.range.active()) r.range.close();
      if (r.job.collective) completed.fetch_add(1);
      r.job.work->complete("");
      return false;
  }
  return false;
}

void Group::run() {
  std::list<Running> active;  // at most one collective, at its front when present
  int idle_polls = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      bool collective_running = !active.empty() && active.front().job.collective;
      if (active.empty()) {
        queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
      }
      // A broken group fails what is queued, at once.
      while (!broken_reason_.empty() && !queue_.empty()) {
        queue_.front().work->complete(
            "kiln.distributed: " + queue_.front().call +
            ": the process group is broken by an earlier failure: " + broken_reason_);
        queue_.pop_front();
      }
      while (!queue_.empty() && !collective_running) {
        // MPI writes into the job's buffers: it gets its place in the list
        // before it starts, and never moves.
        bool collective = queue_.front().collective;
        auto it = collective ? active.emplace(active.begin()) : active.emplace(active.end());
        it->job = std::move(queue_.front());
        queue_.pop_front();
        it->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(timeout_s.load()));
        lock.unlock();
        bool keep = start_check(*it);
        lock.lock();
        if (!keep) {
          active.erase(it);
          continue;
        }
        collective_running = collective;
      }
    }
    if (broken()) {
      // The group is gone: what still runs would only wait for its deadline.
      for (Running& r : active)
        fail(r, "kiln.distributed: " + r.job.call +
                    ": the process group is broken by an earlier failure: " + broken_reason());
      active.clear();
      continue;
    }
    bool progressed = false;
    for (auto it = active.begin(); it != active.end();) {
      Running::Phase before = it->phase;
      if (step(*it)) {
        progressed |= it->phase != before;
        ++it;
      } else {
        it = active.erase(it);
        progressed = true;
      }
    }
    // OpenMPI progresses only inside MPI calls: poll, yielding at first,
    // then sleeping a little longer each time (other ranks may share cores).
    // While a thread waits for a Work it computes nothing, so polling does
    // not take a core from it: no sleeps then (they cost up to 1 ms each).
    idle_polls = progressed ? 0 : idle_polls + 1;
    if (active.empty() || idle_polls < 64 || g_threads_waiting.load() > 0) {
      std::this_thread::yield();
    } else {
      int micros = std::min(1000, 10 << std::min(7, (idle_polls - 64) / 64));
      std::this_thread::sleep_for(std::chrono::microseconds(micros));
    }
  }
}

}  // namespace

void WorkState::wait() {
  std::unique_lock lock(mutex_);
  if (!done_) {
    g_threads_waiting.fetch_add(1);
    done_cv_.wait(lock, [&] { return done_; });
    g_threads_waiting.fetch_sub(1);
  }
  if (!error_.empty()) throw_error(kind_, error_);
  if (after && !after_ran_) {
    after_ran_ = true;
    std::function<void()> run_after = std::move(after);
    lock.unlock();
    run_after();
  }
}

bool WorkState::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void WorkState::mark_started() {
  started_ns_ = now_ns();
}

void WorkState::complete(std::string error, ErrorKind kind) {
  finished_ns_ = now_ns();
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    kind_ = kind;
    done_ = true;
  }
  done_cv_.notify_all();
}

void enqueue(Job job) {
  group().enqueue(std::move(job));
}

MPI_Datatype mpi_type_of(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Int8:
      return MPI_INT8_T;
    case DType::UInt8:
      return MPI_UINT8_T;
    case DType::Int16:
      return MPI_INT16_T;
    case DType::Bool:
      return MPI_C_BOOL;
  }
  KILN_CHECK_TYPE(false, "kiln.distributed: unsupported dtype ", dtype);
  return MPI_DATATYPE_NULL;
}

}  // namespace detail

bool is_available() {
  return true;
}

void init(const InitOptions& options) {
  detail::group().init(options);
  static bool registered = [] {
    // A program that never calls destroy() still stops the thread and
    // finalizes (or skips finalizing a broken group) on exit.
    std::atexit([] { detail::group().destroy(); });
    detail::install_graph_collectives();
    return true;
  }();
  (void)registered;
}

bool is_initialized() {
  return detail::group().initialized;
}

int rank() {
  KILN_CHECK(is_initialized(), "get_rank: the default process group is not initialized");
  return detail::group().rank;
}

int world_size() {
  KILN_CHECK(is_initialized(), "get_world_size: the default process group is not initialized");
  return detail::group().size;
}

double timeout_seconds() {
  return detail::group().timeout_s.load();
}

void set_timeout(double seconds) {
  KILN_CHECK_VALUE(seconds > 0, "set_timeout: the timeout must be positive, got ", seconds);
  detail::group().timeout_s = seconds;
}

void destroy() {
  detail::group().destroy();
}

void abandon(const std::string& reason) {
  if (is_initialized()) detail::group().break_group(reason);
}

bool is_broken() {
  return detail::group().broken();
}

std::string broken_reason() {
  return detail::group().broken_reason();
}

Stats stats() {
  return {detail::group().collectives.load(), detail::group().completed.load()};
}

}  // namespace kiln::distributed
