// The profiler: what ran, for how long, how often, and what it allocated,
// as PyTorch's torch.profiler shows it.
//
//   kiln::profiler::Profile prof({.record_shapes = true, .profile_memory = true});
//   model(x);                                  // eager ops, compiled steps, ...
//   prof.stop();
//   std::cout << kiln::profiler::table(prof.key_averages(), {.row_limit = 10});
//   prof.export_chrome_trace("trace.json");    // open in Perfetto or chrome://tracing
//
// Ranges come from kiln/util/profile_recorder.h: every eager op (dispatch),
// every step of a compiled plan, each compiled call around its steps, each
// autograd backward node, ranges users open (Range, record_function), and
// in async mode each queued op's kernel on the engine worker that ran it.
// A range's self time is its time less the ranges nested in it on its
// thread; its total includes them.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/util/profile_recorder.h"

namespace kiln::profiler {

// The events of one name (and shapes), summed.
struct EventAverage {
  std::string name;
  std::string input_shapes;        // "[[1, 3], []]" when grouped by input shape, else ""
  EventKind kind = EventKind::Op;  // of the first event
  int64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  int64_t self_bytes = 0;
  int64_t total_bytes = 0;
  // The fewest and most threads its events ran on (0: not recorded, as for
  // eager ops; compiled steps record theirs).
  int threads_min = 0, threads_max = 0;
};

// A session that records from construction until stop() (or destruction).
class Profile {
 public:
  explicit Profile(const RecorderOptions& options = {});
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  void stop();  // idempotent
  bool stopped() const { return stopped_; }
  const RecorderOptions& options() const { return options_; }
  // What the session recorded (empty until stopped).
  const std::vector<Event>& events() const { return events_; }

  // One row per op name (and per input shapes when grouped by them).
  std::vector<EventAverage> key_averages(bool group_by_input_shape = false) const;
  std::string chrome_trace() const;
  void export_chrome_trace(const std::string& path) const;

 private:
  RecorderOptions options_;
  bool stopped_ = false;
  std::vector<Event> events_;
};

// In order of first appearance.
std::vector<EventAverage> key_averages(std::span<const Event> events,
                                       bool group_by_input_shape = false);

struct TableOptions {
  // A column, as PyTorch names it: self_cpu_time_total, cpu_time_total,
  // cpu_time (the average), count, self_cpu_memory_usage, cpu_memory_usage;
  // "": as given.
  std::string sort_by = "self_cpu_time_total";
  int row_limit = 100;  // negative: every row
  bool profile_memory = false;
  size_t max_name_column_width = 55;
  size_t max_shapes_column_width = 80;
};

// PyTorch's key_averages().table(): the same columns, widths and units.
// Throws kiln::Error (a ValueError) for an unknown sort_by.
std::string table(std::vector<EventAverage> rows, const TableOptions& options = {});

// The shapes as PyTorch prints a list of lists: [[2, 3], [], [3]].
std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes);

// The Chrome trace event format (JSON object form): one complete ("X")
// event per range, ts and dur in microseconds, pid 0, tid the thread, args
// with the kind, input shapes and bytes (and, for a queued op's kernel,
// when it was queued and how long it waited); thread names as metadata
// events, the engine's workers named so.
std::string chrome_trace_json(std::span<const Event> events);

}  // namespace kiln::profiler
