// The profiler's recorder: ranges (an eager op, a compiled plan's step, a
// compiled call, a user's record_function) timed per thread while a session
// records. The layers that run ops open ranges (ops/dispatch, jit/exec, the
// autograd engine); the allocator reports bytes; kiln/profiler/ turns what a
// session recorded into tables and Chrome traces.
//
//   kiln::profiler::start({.record_shapes = true});
//   ... run ops ...
//   std::vector<kiln::profiler::Event> events = kiln::profiler::stop();
//
// Cost when no session records: recording() is one relaxed atomic load, and
// every hook is `if (recording())` around the work. While recording, a
// range costs two clock reads and an append to its thread's own buffer: no
// lock on that path, so ops inside OpenMP regions and on worker threads
// record side by side. A thread takes a lock once per session, to register.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::profiler {

enum class EventKind : uint8_t {
  Op,    // an eager op through dispatch (the Interpreter replays through it too)
  Step,  // one step of a compiled plan
  Call,  // a call of a compiled function, around its steps
  User,  // record_function / a Range a caller opened
  // A queued op's kernel, on the engine worker that ran it (async mode):
  // Event::queued_ns says when it was queued, so the trace shows its wait.
  Kernel,
};
const char* to_string(EventKind kind);

struct RecorderOptions {
  bool record_shapes = false;   // the input shapes (and attributes) of ops and steps
  bool profile_memory = false;  // bytes allocated and freed inside each range
};

// One closed range. Times are nanoseconds since the session started.
struct Event {
  std::string name;
  EventKind kind = EventKind::Op;
  uint32_t thread = 0;  // threads are numbered in the order they first recorded
  uint32_t depth = 0;   // ranges open around it on its thread
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int64_t self_ns = 0;  // the duration less its children's (on its thread)
  // Allocated less freed inside the range (profile_memory): by the range
  // itself, and with its children.
  int64_t self_bytes = 0;
  int64_t total_bytes = 0;
  // Each input's shape (record_shapes); empty for an absent input or a scalar.
  std::vector<std::vector<int64_t>> shapes;
  // The op's attributes as text, "dim=1, keepdim=false" (record_shapes).
  std::string attributes;
  // A Kernel event: when its op was queued (session time), or -1.
  int64_t queued_ns = -1;
  // The OpenMP threads a compiled step ran its kernel on (Note [Threads
  // per step], ops/op_threads.h), or 0 when not recorded.
  int threads = 0;
};

namespace detail {
extern std::atomic<bool> g_recording;
}

// Whether a session records. The one check every hook makes.
inline bool recording() {
  return detail::g_recording.load(std::memory_order_relaxed);
}

// Starts a session; throws kiln::Error when one already records.
void start(const RecorderOptions& options = {});
// Ends the session and returns what it recorded, by thread, then start
// time, then depth (a parent before the children that start with it).
// Ranges still open are left out. Throws when none records.
std::vector<Event> stop();
// The options of the session recording now (defaults when none records).
RecorderOptions options();

// Nanoseconds since the recording session started, or -1 when none
// records: the engine stamps a queued op with it (Range::set_queued).
int64_t now_ns();

// The allocator's hook: `bytes` allocated (> 0) or freed (< 0) on this
// thread, counted in its innermost open range. Call only when recording().
void record_memory(int64_t bytes);

// A range: open while it lives. Default-made ranges are inactive, so a hook
// can build its name only when recording():
//
//   profiler::Range range;
//   if (profiler::recording()) range.open(profiler::EventKind::Op, node->name());
class Range {
 public:
  Range() = default;
  Range(EventKind kind, std::string_view name) {
    if (recording()) open(kind, name);
  }
  // `on`: recording(), read once by a caller that opens many ranges.
  Range(bool on, EventKind kind, std::string_view name) {
    if (on) open(kind, name);
  }
  ~Range() {
    if (active_) close();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

  void open(EventKind kind, std::string_view name);
  void close();
  bool active() const { return active_; }
  // Whether the session wants input shapes; add them right after open().
  bool wants_shapes() const { return active_ && shapes_; }
  void add_shape(const int64_t* dims, size_t ndim);
  void add_absent_input();
  void set_attributes(std::string text);
  // A Kernel range: when its op was queued (a now_ns() of the same session).
  void set_queued(int64_t ns);
  // The threads the range's kernel runs on (a compiled step's).
  void set_threads(int threads);

 private:
  bool active_ = false;
  bool shapes_ = false;
};

// For callers that cannot hold a Range (Python's record_function): opens a
// User range on this thread, returning whether it opened; pop_range()
// closes this thread's innermost range opened by push_range().
bool push_range(std::string_view name);
void pop_range();

}  // namespace kiln::profiler
