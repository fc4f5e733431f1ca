#include "kiln/data/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace kiln {
namespace {

std::string format_rate(double per_second) {
  char text[32];
  if (per_second >= 1.0 || per_second == 0.0) {
    std::snprintf(text, sizeof(text), "%.1f it/s", per_second);
  } else {
    std::snprintf(text, sizeof(text), "%.1f s/it", 1.0 / per_second);
  }
  return text;
}

// Bar cells in eighths, so a slow epoch still moves: U+2588..U+258F.
std::string draw_bar(double fraction, int width, bool unicode) {
  static const char* const kEighths[] = {"",       "\u258f", "\u258e", "\u258d",
                                         "\u258c", "\u258b", "\u258a", "\u2589"};
  int64_t eighths = int64_t(std::floor(fraction * width * 8));
  std::string bar;
  int cells = 0;
  for (; cells < eighths / 8; ++cells)
    bar += unicode ? "\u2588" : "#";
  if (cells < width && eighths % 8 != 0) {
    bar += unicode ? kEighths[eighths % 8] : "";
    if (unicode) ++cells;
  }
  bar.append(size_t(width - cells), ' ');
  return bar;
}

// Display width: every code point counts one column.
size_t columns(const std::string& text) {
  return size_t(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

}  // namespace

std::string format_duration(double seconds) {
  int64_t total = int64_t(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", (long long)(total / 3600),
                  (long long)(total / 60 % 60), (long long)(total % 60));
  } else {
    std::snprintf(text, sizeof(text), "%02lld:%02lld", (long long)(total / 60),
                  (long long)(total % 60));
  }
  return text;
}

std::string ProgressBar::format(const std::string& description, int64_t current, int64_t total,
                                double elapsed_seconds, const std::string& postfix, int bar_width,
                                bool unicode) {
  std::string line;
  if (!description.empty()) line += description + " ";
  double rate = elapsed_seconds > 0 ? double(current) / elapsed_seconds : 0.0;
  char text[64];
  if (total > 0) {
    double fraction = std::clamp(double(current) / double(total), 0.0, 1.0);
    std::snprintf(text, sizeof(text), "%3d%%|", int(fraction * 100));
    line += text + draw_bar(fraction, bar_width, unicode) + "| ";
    std::snprintf(text, sizeof(text), "%lld/%lld ", (long long)current, (long long)total);
    line += text;
    std::string remaining =
        rate > 0 ? format_duration(double(total - current) / rate) : std::string("?");
    line +=
        "[" + format_duration(elapsed_seconds) + "<" + remaining + ", " + format_rate(rate) + "]";
  } else {  // an unknown total: count and rate only
    std::snprintf(text, sizeof(text), "%lld ", (long long)current);
    line += text;
    line += "[" + format_duration(elapsed_seconds) + ", " + format_rate(rate) + "]";
  }
  if (!postfix.empty()) line += " " + postfix;
  return line;
}

ProgressBar::ProgressBar(int64_t total, std::string description, ProgressOptions options)
    : total_(total), description_(std::move(description)), options_(options) {
  if (!options_.out) options_.out = &std::cout;
  terminal_ = options_.is_terminal.value_or(options_.out == &std::cout && isatty(STDOUT_FILENO));
  start_ = last_draw_ = Clock::now();
  if (terminal_) draw(false);
}

ProgressBar::~ProgressBar() {
  try {
    close();
  } catch (...) {  // a destructor must not throw; a failed write is not worth a crash
  }
}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressBar::update(int64_t steps) {
  if (closed_) return;
  current_ += steps;
  double since_draw = std::chrono::duration<double>(Clock::now() - last_draw_).count();
  double interval = terminal_ ? options_.redraw_interval : options_.print_interval;
  if (since_draw >= interval) draw(false);
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  draw(true);
}

void ProgressBar::draw(bool final_line) {
  last_draw_ = Clock::now();
  std::string line = format(description_, current_, total_, elapsed_seconds(), postfix_,
                            options_.bar_width, terminal_);
  std::ostream& out = *options_.out;
  if (!terminal_) {
    out << line << "\n" << std::flush;
    return;
  }
  size_t width = columns(line);
  // Blank what is left of a longer previous line (a shrinking postfix).
  std::string padding(last_width_ > width ? last_width_ - width : 0, ' ');
  last_width_ = width;
  out << "\r" << line << padding << (final_line ? "\n" : "") << std::flush;
}

}  // namespace kiln
