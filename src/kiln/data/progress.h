// A progress bar for training loops:
//
//   kiln::ProgressBar bar(loader.num_batches(), "epoch 1");
//   for (auto batch : loader) { ...; bar.set_postfix(kiln::str("loss ", loss)); bar.update(); }
//   bar.close();
//
//   epoch 1  42%|████████▍           | 211/500 [00:03<00:04, 70.3 it/s] loss 0.123
//
// On a terminal it redraws one line with \r (at most every `redraw_interval`
// seconds); piped to a file or a CI log, where \r makes a mess, it prints a
// plain line every `print_interval` seconds and one at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace kiln {

struct ProgressOptions {
  std::ostream* out = nullptr;  // null: std::cout
  // Whether `out` is a terminal; unset asks isatty() when out is std::cout
  // and says no for any other stream.
  std::optional<bool> is_terminal;
  double redraw_interval = 0.1;  // seconds, terminal mode
  double print_interval = 10.0;  // seconds, plain-line mode
  int bar_width = 20;            // cells of the bar itself
};

class ProgressBar {
 public:
  explicit ProgressBar(int64_t total, std::string description = "", ProgressOptions options = {});
  ~ProgressBar();  // closes the bar if close() was not called
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t steps = 1);
  void set_postfix(std::string postfix) { postfix_ = std::move(postfix); }
  // Draws the final state and ends the line; later calls do nothing.
  void close();

  int64_t current() const { return current_; }
  int64_t total() const { return total_; }
  double elapsed_seconds() const;

  // The line for a state; pure, so tests check the format without a clock.
  static std::string format(const std::string& description, int64_t current, int64_t total,
                            double elapsed_seconds, const std::string& postfix, int bar_width,
                            bool unicode);

 private:
  void draw(bool final_line);

  using Clock = std::chrono::steady_clock;
  int64_t total_, current_ = 0;
  std::string description_, postfix_;
  ProgressOptions options_;
  bool terminal_, closed_ = false;
  Clock::time_point start_, last_draw_;
  size_t last_width_ = 0;  // of the previous terminal line, to blank its tail
};

// "mm:ss", or "h:mm:ss" past an hour.
std::string format_duration(double seconds);

}  // namespace kiln
