// The Chrome trace event format, JSON object form (the Trace Event Format
// document of the Chromium catapult project): {"traceEvents": [...]}, one
// complete event ("ph": "X") per range with "ts" and "dur" in microseconds,
// and metadata events ("ph": "M") naming the process and its threads.
// Perfetto's UI and chrome://tracing open it. Ranges of one thread nest
// (the recorder closes them in order), as complete events must.
#include <cstdio>
#include <set>

#include "kiln/profiler/profiler.h"

namespace kiln::profiler {
namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

// Nanoseconds as microseconds with every digit: a child never seems to end
// after its parent through rounding.
std::string microseconds_text(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  return text;
}

std::string metadata(const char* what, uint32_t tid, const std::string& name) {
  return std::string("{\"name\": \"") + what +
         "\", \"ph\": \"M\", \"pid\": 0, \"tid\": " + std::to_string(tid) +
         ", \"args\": {\"name\": " + json_string(name) + "}}";
}

std::string complete_event(const Event& e) {
  std::string args = "\"kind\": \"" + std::string(to_string(e.kind)) + "\"";
  if (!e.shapes.empty()) args += ", \"Input Dims\": " + shapes_text(e.shapes);
  if (!e.attributes.empty()) args += ", \"Attributes\": " + json_string(e.attributes);
  if (e.threads > 0) args += ", \"Threads\": " + std::to_string(e.threads);
  if (e.queued_ns >= 0) {
    args += ", \"Queued\": " + microseconds_text(e.queued_ns) +
            ", \"Queue wait\": " + microseconds_text(e.start_ns - e.queued_ns);
  }
  if (e.self_bytes != 0 || e.total_bytes != 0) {
    args += ", \"Self CPU Mem\": " + std::to_string(e.self_bytes) +
            ", \"CPU Mem\": " + std::to_string(e.total_bytes);
  }
  return "{\"name\": " + json_string(e.name) + ", \"cat\": \"" + to_string(e.kind) +
         "\", \"ph\": \"X\", \"ts\": " + microseconds_text(e.start_ns) +
         ", \"dur\": " + microseconds_text(e.duration_ns) +
         ", \"pid\": 0, \"tid\": " + std::to_string(e.thread) + ", \"args\": {" + args + "}}";
}

}  // namespace

// A thread that ran queued ops' kernels is named as the engine's worker,
// so the rows of an async run show which ops ran side by side.
std::string chrome_trace_json(std::span<const Event> events) {
  std::set<uint32_t> threads, workers;
  for (const Event& e : events) {
    threads.insert(e.thread);
    if (e.kind == EventKind::Kernel) workers.insert(e.thread);
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out += metadata("process_name", 0, "kiln");
  for (uint32_t t : threads) {
    const char* what = workers.count(t) ? "engine worker (thread " : "thread ";
    out += ",\n" +
           metadata("thread_name", t, what + std::to_string(t) + (workers.count(t) ? ")" : ""));
  }
  for (const Event& e : events)
    out += ",\n" + complete_event(e);
  return out + "\n]}\n";
}

}  // namespace kiln::profiler
