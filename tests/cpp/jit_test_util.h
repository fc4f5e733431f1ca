// Helpers shared by the tracing tests.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "kiln/jit/trace/report.h"
#include "kiln/ops/copy.h"
#include "test_util.h"

namespace kiln::jit {

// Collects the warnings reported while it lives (instead of printing them).
class CapturedWarnings {
 public:
  CapturedWarnings() {
    previous_ = set_warning_handler([this](const TraceWarning& w) { warnings.push_back(w); });
  }
  ~CapturedWarnings() { set_warning_handler(previous_); }
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;

  size_t count(WarningKind kind) const {
    size_t n = 0;
    for (const TraceWarning& w : warnings)
      n += w.kind == kind;
    return n;
  }
  // The first warning of `kind` whose message contains `text`, or null.
  const TraceWarning* find(WarningKind kind, const std::string& text = "") const {
    for (const TraceWarning& w : warnings) {
      if (w.kind == kind && w.message.find(text) != std::string::npos) return &w;
    }
    return nullptr;
  }
  std::string all() const {
    std::string text;
    for (const TraceWarning& w : warnings)
      text += "[" + to_string(w.kind) + "] " + w.message + "\n";
    return text;
  }

  std::vector<TraceWarning> warnings;

 private:
  WarningHandler previous_;
};

// Same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = contiguous(a), cb = contiguous(b);
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * ca.itemsize()) == 0;
}

}  // namespace kiln::jit
