#include "kiln/util/profile_recorder.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "kiln/util/error.h"

namespace kiln::profiler {
namespace detail {
std::atomic<bool> g_recording{false};
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// A thread's closed ranges for one session, in fixed chunks that never
// move: its thread appends (the only writer), stop() reads what the chunk
// counts have published. No lock either side.
struct Chunk {
  static constexpr size_t kEvents = 256;
  Event events[kEvents];
  std::atomic<size_t> count{0};
  std::atomic<Chunk*> next{nullptr};
};

class ThreadBuffer {
 public:
  explicit ThreadBuffer(uint32_t thread) : thread_(thread), head_(new Chunk), tail_(head_) {}
  ~ThreadBuffer() {
    for (Chunk* c = head_; c != nullptr;) {
      Chunk* next = c->next.load(std::memory_order_relaxed);
      delete c;
      c = next;
    }
  }
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  uint32_t thread() const { return thread_; }

  void append(Event&& event) {
    size_t n = tail_->count.load(std::memory_order_relaxed);
    if (n == Chunk::kEvents) {
      Chunk* fresh = new Chunk;
      tail_->next.store(fresh, std::memory_order_release);
      tail_ = fresh;
      n = 0;
    }
    tail_->events[n] = std::move(event);
    tail_->count.store(n + 1, std::memory_order_release);
  }

  void collect(std::vector<Event>& out) const {
    for (const Chunk* c = head_; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
      const size_t n = c->count.load(std::memory_order_acquire);
      out.insert(out.end(), c->events, c->events + n);
    }
  }

 private:
  uint32_t thread_;
  Chunk* head_;
  Chunk* tail_;  // the writer's only
};

struct Session {
  uint64_t id = 0;
  RecorderOptions options;
  Clock::time_point start;
  std::mutex mutex;  // guards buffers: taken when a thread first records
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
};

std::mutex g_session_mutex;
std::shared_ptr<Session> g_session;  // the recording session, or null
std::atomic<uint64_t> g_session_id{0};

struct Frame {
  Event event;
  uint64_t session = 0;
  int64_t child_ns = 0;
  int64_t child_bytes = 0;
  bool pushed = false;  // by push_range
};

// What a thread keeps: the session it records into and its open ranges.
struct ThreadState {
  uint64_t session_id = 0;  // 0: none attached
  std::shared_ptr<Session> session;
  std::shared_ptr<ThreadBuffer> buffer;
  std::vector<Frame> frames;
};

// A thread's state is made on first use and destroyed at its exit; the
// pointer (trivially destructible) turns null then, so that tensors freed
// by later thread_local destructors find no state instead of a dead one.
thread_local ThreadState* t_state = nullptr;
thread_local bool t_state_closed = false;

struct ThreadStateOwner {
  ~ThreadStateOwner() {
    delete t_state;
    t_state = nullptr;
    t_state_closed = true;
  }
};

ThreadState* thread_state() {
  if (t_state != nullptr || t_state_closed) return t_state;
  thread_local ThreadStateOwner owner;
  t_state = new ThreadState;
  t_state->frames.reserve(64);
  return t_state;
}

// Joins the thread to the recording session, if one still records.
bool attach(ThreadState& state) {
  const uint64_t id = g_session_id.load(std::memory_order_acquire);
  if (state.session_id == id && state.session) return true;
  std::shared_ptr<Session> session;
  {
    std::lock_guard<std::mutex> lock(g_session_mutex);
    session = g_session;
  }
  state.buffer.reset();
  state.session.reset();
  state.session_id = 0;
  if (!session) return false;
  {
    std::lock_guard<std::mutex> lock(session->mutex);
    state.buffer = std::make_shared<ThreadBuffer>(uint32_t(session->buffers.size()));
    session->buffers.push_back(state.buffer);
  }
  state.session_id = session->id;
  state.session = std::move(session);
  return true;
}

int64_t since_start(const Session& session) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - session.start).count();
}

// Opens a frame on this thread; false when no session takes it.
bool open_frame(EventKind kind, std::string_view name, bool pushed) {
  ThreadState* state = thread_state();
  if (state == nullptr || !attach(*state)) return false;
  Frame& frame = state->frames.emplace_back();
  frame.session = state->session_id;
  frame.pushed = pushed;
  Event& event = frame.event;
  event.name.assign(name);
  event.kind = kind;
  event.thread = state->buffer->thread();
  event.depth = uint32_t(state->frames.size() - 1);
  event.start_ns = since_start(*state->session);  // last: the bookkeeping stays outside
  return true;
}

void close_frame() {
  ThreadState* state = t_state;
  if (state == nullptr || state->frames.empty()) return;
  Frame& frame = state->frames.back();
  Event& event = frame.event;
  const bool current = frame.session == state->session_id && state->session;
  if (current) {
    event.duration_ns = since_start(*state->session) - event.start_ns;
    event.self_ns = event.duration_ns - frame.child_ns;
    event.total_bytes = event.self_bytes + frame.child_bytes;
    if (state->frames.size() > 1) {
      Frame& parent = state->frames[state->frames.size() - 2];
      parent.child_ns += event.duration_ns;
      parent.child_bytes += event.total_bytes;
    }
    state->buffer->append(std::move(event));
  }
  state->frames.pop_back();
}

}  // namespace

const char* to_string(EventKind kind) {
  switch (kind) {
    case EventKind::Op:
      return "op";
    case EventKind::Step:
      return "step";
    case EventKind::Call:
      return "call";
    case EventKind::User:
      return "user";
    case EventKind::Kernel:
      return "kernel";
  }
  return "?";
}

void start(const RecorderOptions& options) {
  std::lock_guard<std::mutex> lock(g_session_mutex);
  KILN_CHECK(g_session == nullptr,
             "profiler: a profile is already recording; stop it before starting another");
  auto session = std::make_shared<Session>();
  session->id = g_session_id.load(std::memory_order_relaxed) + 1;
  session->options = options;
  session->start = Clock::now();
  g_session = session;
  g_session_id.store(session->id, std::memory_order_release);
  detail::g_recording.store(true, std::memory_order_release);
}

std::vector<Event> stop() {
  std::shared_ptr<Session> session;
  {
    std::lock_guard<std::mutex> lock(g_session_mutex);
    KILN_CHECK(g_session != nullptr, "profiler: no profile is recording");
    detail::g_recording.store(false, std::memory_order_release);
    session = std::move(g_session);
    g_session = nullptr;
  }
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(session->mutex);
    for (const auto& buffer : session->buffers)
      buffer->collect(events);
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.depth < b.depth;
  });
  return events;
}

RecorderOptions options() {
  std::lock_guard<std::mutex> lock(g_session_mutex);
  return g_session ? g_session->options : RecorderOptions{};
}

int64_t now_ns() {
  if (!recording()) return -1;
  ThreadState* state = thread_state();
  if (state == nullptr || !attach(*state)) return -1;
  return since_start(*state->session);
}

void record_memory(int64_t bytes) {
  ThreadState* state = t_state;
  if (state == nullptr || state->frames.empty() || !state->session) return;
  Frame& frame = state->frames.back();
  if (frame.session != state->session_id || !state->session->options.profile_memory) return;
  frame.event.self_bytes += bytes;
}

void Range::open(EventKind kind, std::string_view name) {
  if (active_) close();
  active_ = open_frame(kind, name, false);
  shapes_ = active_ && t_state->session->options.record_shapes;
}

void Range::close() {
  if (!active_) return;
  active_ = false;
  close_frame();
}

void Range::add_shape(const int64_t* dims, size_t ndim) {
  if (!wants_shapes()) return;
  t_state->frames.back().event.shapes.emplace_back(dims, dims + ndim);
}

void Range::set_attributes(std::string text) {
  if (!wants_shapes()) return;
  t_state->frames.back().event.attributes = std::move(text);
}

void Range::set_queued(int64_t ns) {
  if (!active_) return;
  t_state->frames.back().event.queued_ns = ns;
}

void Range::set_threads(int threads) {
  if (!active_) return;
  t_state->frames.back().event.threads = threads;
}

void Range::add_absent_input() {
  if (!wants_shapes()) return;
  t_state->frames.back().event.shapes.emplace_back();
}

bool push_range(std::string_view name) {
  return recording() && open_frame(EventKind::User, name, true);
}

void pop_range() {
  ThreadState* state = t_state;
  if (state == nullptr || state->frames.empty() || !state->frames.back().pushed) return;
  close_frame();
}

}  // namespace kiln::profiler
