#include "kiln/jit/compile/compile_report.h"

#include <cstdio>

#include "kiln/util/error.h"

namespace kiln::jit {

std::string CompileReport::to_string() const {
  std::string text = passes.to_string();
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (!lowering.passes.empty()) {
    text += "when lowering, on the plan's copy of the graph:\n" + lowering.to_string();
    if (text.back() != '\n') text += '\n';
  }
  if (planned_bytes >= 0) {
    const double share =
        unshared_bytes > 0 ? 100.0 * double(planned_bytes) / double(unshared_bytes) : 100.0;
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.0f%%", share);
    std::string at;
    for (const auto& [symbol, value] : planned_at)
      at += str(at.empty() ? " at " : ", ", symbol, "=", value);
    text += str("memory", at, ": ", planned_bytes, " bytes planned for intermediates (", percent,
                " of the ", unshared_bytes, " bytes they take one by one); ", steps,
                " kernel steps per call\n");
  }
  if (memory) text += str("memory at any size: ", memory->to_string(), "\n");
  text += str("compile time: record ", format_ms(record_seconds, 2), ", passes ",
              format_ms(passes.seconds, 2), ", lowering ", format_ms(lower_seconds, 2), ", total ",
              format_ms(total_seconds(), 2), "\n");
  return text;
}

}  // namespace kiln::jit
