#include "kiln/jit/trace/compile_report.h"

#include <cstdio>

#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

}  // namespace

std::string CompileReport::to_string() const {
  std::string text = passes.to_string();
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (planned_bytes >= 0) {
    const double share =
        unshared_bytes > 0 ? 100.0 * double(planned_bytes) / double(unshared_bytes) : 100.0;
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.0f%%", share);
    text +=
        str("memory: ", planned_bytes, " bytes planned for intermediates (", percent, " of the ",
            unshared_bytes, " bytes they take one by one); ", steps, " kernel steps per call\n");
  }
  text += str("compile time: record ", milliseconds(record_seconds), ", passes ",
              milliseconds(passes.seconds), ", lowering ", milliseconds(lower_seconds), ", total ",
              milliseconds(total_seconds()), "\n");
  return text;
}

}  // namespace kiln::jit
