#include "kiln/jit/passes/pass_report.h"

#include <algorithm>
#include <cstdio>

namespace kiln::jit {

std::string format_ms(double seconds, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f ms", decimals, seconds * 1e3);
  return text;
}

namespace {

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string pad_left(std::string text, size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

}  // namespace

const PassRecord* PassReport::find(const std::string& pass) const {
  auto it = std::find_if(passes.begin(), passes.end(),
                         [&](const PassRecord& r) { return r.name == pass; });
  return it == passes.end() ? nullptr : &*it;
}

int64_t PassReport::count(const std::string& rule) const {
  int64_t total = 0;
  for (const PassRecord& pass : passes) {
    for (const auto& [name, times] : pass.rules)
      total += name == rule ? times : 0;
  }
  return total;
}

std::string PassReport::to_string() const {
  size_t name_width = 4;
  for (const PassRecord& pass : passes)
    name_width = std::max(name_width, pass.name.size());
  std::string text = pad("pass", name_width + 2) + pad_left("nodes", 14) + pad_left("runs", 7) +
                     pad_left("changed", 9) + pad_left("time", 13) + "\n";
  for (const PassRecord& pass : passes) {
    std::string nodes =
        std::to_string(pass.nodes_before) + " -> " + std::to_string(pass.nodes_after);
    text += pad(pass.name, name_width + 2) + pad_left(nodes, 14) +
            pad_left(std::to_string(pass.runs), 7) +
            pad_left(std::to_string(pass.runs_changed), 9) + pad_left(format_ms(pass.seconds), 13) +
            "\n";
    for (const auto& [rule, times] : pass.rules)
      text += "    " + pad(rule, name_width + 20) + " x" + std::to_string(times) + "\n";
    for (const std::string& note : pass.notes)
      text += "    note: " + note + "\n";
  }
  text += "total: " + std::to_string(nodes_before) + " -> " + std::to_string(nodes_after) +
          " nodes, " + std::to_string(rounds) + (rounds == 1 ? " round" : " rounds") +
          (reached_fixed_point ? " (fixed point)" : " (stopped at the round limit)") + ", " +
          format_ms(seconds) + "\n";
  return text;
}

}  // namespace kiln::jit
