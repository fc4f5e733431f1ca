#include "kiln/profiler/profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <utility>

#include "kiln/util/error.h"

namespace kiln::profiler {

Profile::Profile(const RecorderOptions& options) : options_(options) {
  start(options);
}

Profile::~Profile() {
  if (stopped_) return;
  try {
    stop();
  } catch (...) {  // nothing records any more: nothing to keep
  }
}

void Profile::stop() {
  if (stopped_) return;
  stopped_ = true;
  events_ = profiler::stop();
}

std::vector<EventAverage> Profile::key_averages(bool group_by_input_shape) const {
  return profiler::key_averages(events_, group_by_input_shape);
}

std::string Profile::chrome_trace() const {
  return chrome_trace_json(events_);
}

void Profile::export_chrome_trace(const std::string& path) const {
  std::ofstream out(path);
  KILN_CHECK_VALUE(out.good(), "export_chrome_trace: cannot write '", path, "'");
  out << chrome_trace();
  out.close();
  KILN_CHECK(!out.fail(), "export_chrome_trace: writing '", path, "' failed");
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string text = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    text += i ? ", [" : "[";
    for (size_t d = 0; d < shapes[i].size(); ++d)
      text += (d ? ", " : "") + std::to_string(shapes[i][d]);
    text += "]";
  }
  return text + "]";
}

std::vector<EventAverage> key_averages(std::span<const Event> events, bool group_by_input_shape) {
  std::vector<EventAverage> rows;
  std::map<std::pair<std::string, std::string>, size_t> row_of;  // lookups only
  for (const Event& e : events) {
    std::string shapes = group_by_input_shape ? shapes_text(e.shapes) : std::string();
    // A queued op's kernel is a row of its own: the op's row is its issue.
    std::string name = e.kind == EventKind::Kernel ? e.name + " (kernel)" : e.name;
    auto [it, fresh] = row_of.try_emplace({name, shapes}, rows.size());
    if (fresh) rows.push_back(EventAverage{std::move(name), std::move(shapes), e.kind});
    EventAverage& row = rows[it->second];
    row.calls += 1;
    row.self_ns += e.self_ns;
    row.total_ns += e.duration_ns;
    row.self_bytes += e.self_bytes;
    row.total_bytes += e.total_bytes;
    if (e.threads > 0) {
      row.threads_min = row.threads_min ? std::min(row.threads_min, e.threads) : e.threads;
      row.threads_max = std::max(row.threads_max, e.threads);
    }
  }
  return rows;
}

namespace {

double microseconds(int64_t ns) {
  return double(ns) / 1e3;
}

// PyTorch's _format_time, _format_time_share and _format_memory.
std::string time_text(double us) {
  char text[64];
  if (us >= 1e6) {
    std::snprintf(text, sizeof text, "%.3fs", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(text, sizeof text, "%.3fms", us / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.3fus", us);
  }
  return text;
}

std::string share_text(int64_t part, int64_t whole) {
  if (whole == 0) return "NaN";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", double(part) * 100.0 / double(whole));
  return text;
}

std::string memory_text(int64_t bytes) {
  constexpr double kKB = 1024, kMB = kKB * 1024, kGB = kMB * 1024;
  const double b = double(bytes), magnitude = b < 0 ? -b : b;
  char text[48];
  if (magnitude >= kGB) {
    std::snprintf(text, sizeof text, "%.2f GB", b / kGB);
  } else if (magnitude >= kMB) {
    std::snprintf(text, sizeof text, "%.2f MB", b / kMB);
  } else if (magnitude >= kKB) {
    std::snprintf(text, sizeof text, "%.2f KB", b / kKB);
  } else {
    return std::to_string(bytes) + " B";
  }
  return text;
}

using SortKey = std::function<double(const EventAverage&)>;

// Null for "": the rows stay in the order given.
SortKey sort_key(const std::string& column) {
  if (column.empty()) return nullptr;
  if (column == "self_cpu_time_total") return [](const EventAverage& r) { return r.self_ns; };
  if (column == "cpu_time_total") return [](const EventAverage& r) { return r.total_ns; };
  if (column == "cpu_time") {
    return [](const EventAverage& r) { return double(r.total_ns) / double(r.calls); };
  }
  if (column == "count") return [](const EventAverage& r) { return r.calls; };
  if (column == "self_cpu_memory_usage") return [](const EventAverage& r) { return r.self_bytes; };
  if (column == "cpu_memory_usage") return [](const EventAverage& r) { return r.total_bytes; };
  KILN_CHECK_VALUE(false, "table: sort_by '", column,
                   "' is not a column; use self_cpu_time_total, cpu_time_total, cpu_time, count, "
                   "self_cpu_memory_usage or cpu_memory_usage");
  return {};
}

// Python's "{: >width}": right-aligned, never cut.
void pad_left(std::string& line, const std::string& text, size_t width) {
  if (text.size() < width) line.append(width - text.size(), ' ');
  line += text;
  line += "  ";
}

std::string line_end(std::string line) {
  // PyTorch's rows keep the two spaces after the last column; so do these.
  return line + "\n";
}

// "2", or "1-2" for a row whose events ran on either; "" for none recorded.
std::string threads_text(const EventAverage& r) {
  if (r.threads_max == 0) return "";
  if (r.threads_min == r.threads_max) return std::to_string(r.threads_max);
  return std::to_string(r.threads_min) + "-" + std::to_string(r.threads_max);
}

}  // namespace

std::string table(std::vector<EventAverage> rows, const TableOptions& options) {
  if (rows.empty()) return "";
  if (const SortKey key = sort_key(options.sort_by)) {
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const EventAverage& a, const EventAverage& b) { return key(a) > key(b); });
  }
  // As PyTorch: the column only when some row has an input ("[]" has none).
  const bool has_shapes = std::any_of(rows.begin(), rows.end(), [](const EventAverage& r) {
    return !r.input_shapes.empty() && r.input_shapes != "[]";
  });
  size_t name_width = 0, shapes_width = 0;
  for (const EventAverage& r : rows) {
    name_width = std::max(name_width, r.name.size() + 4);
    shapes_width = std::max(shapes_width, r.input_shapes.size() + 4);
  }
  name_width = std::min(name_width, options.max_name_column_width);
  shapes_width = std::min(shapes_width, options.max_shapes_column_width);

  std::vector<std::string> headers = {"Name",        "Self CPU %", "Self CPU",
                                      "CPU total %", "CPU total",  "CPU time avg"};
  if (options.profile_memory) headers.insert(headers.end(), {"CPU Mem", "Self CPU Mem"});
  // Compiled steps' threads (Note [Threads per step]); not in PyTorch's
  // table, so shown only when some row recorded them.
  const bool has_threads = std::any_of(rows.begin(), rows.end(),
                                       [](const EventAverage& r) { return r.threads_max > 0; });
  if (has_threads) headers.push_back("Threads");
  headers.push_back("# of Calls");
  std::vector<size_t> widths(headers.size(), 12);
  widths[0] = name_width;
  if (has_shapes) {
    headers.push_back("Input Shapes");
    widths.push_back(shapes_width);
  }
  auto format_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i)
      pad_left(line, cells[i], widths[i]);
    return line_end(line);
  };
  std::string separator;
  for (size_t w : widths)
    separator += std::string(w, '-') + "  ";
  separator = line_end(separator);

  int64_t self_total = 0;
  for (const EventAverage& r : rows)
    self_total += r.self_ns;
  std::string out = separator + format_row(headers) + separator;
  const size_t limit = options.row_limit < 0 ? rows.size() : size_t(options.row_limit);
  for (size_t i = 0; i < std::min(limit, rows.size()); ++i) {
    const EventAverage& r = rows[i];
    std::string name = r.name;
    if (name.size() + 3 >= options.max_name_column_width) {
      name = name.substr(0, options.max_name_column_width - 3) + "...";
    }
    std::vector<std::string> cells = {name,
                                      share_text(r.self_ns, self_total),
                                      time_text(microseconds(r.self_ns)),
                                      share_text(r.total_ns, self_total),
                                      time_text(microseconds(r.total_ns)),
                                      time_text(microseconds(r.total_ns) / double(r.calls))};
    if (options.profile_memory) {
      cells.push_back(memory_text(r.total_bytes));
      cells.push_back(memory_text(r.self_bytes));
    }
    if (has_threads) cells.push_back(threads_text(r));
    cells.push_back(std::to_string(r.calls));
    if (has_shapes) cells.push_back(r.input_shapes.substr(0, shapes_width));
    out += format_row(cells);
  }
  out += separator;
  out += "Self CPU time total: " + time_text(microseconds(self_total)) + "\n";
  return out;
}

}  // namespace kiln::profiler
