#include "kiln/jit/trace/report.h"

#include <iostream>
#include <mutex>
#include <set>

namespace kiln::jit {
namespace {

std::mutex g_handler_mutex;
WarningHandler g_handler;  // empty: the default

// Like Python's default warning filter: each distinct text once per process.
void print_once(const TraceWarning& warning) {
  static std::mutex mutex;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mutex);
  if (!printed.insert(warning.message).second) return;
  std::cerr << "kiln: warning: " << warning.message << "\n";
}

}  // namespace

std::string to_string(WarningKind kind) {
  switch (kind) {
    case WarningKind::HostRead:
      return "host read";
    case WarningKind::InputRead:
      return "input read";
    case WarningKind::AliasedWrite:
      return "aliased write";
    case WarningKind::OutsideWrite:
      return "outside write";
    case WarningKind::RandomFactory:
      return "random factory";
    case WarningKind::GradConstant:
      return "grad constant";
    case WarningKind::SideEffectOnConstant:
      return "side effect on constant";
    case WarningKind::UntracedView:
      return "untraced view";
    case WarningKind::ConstantOutput:
      return "constant output";
    case WarningKind::CacheGrowth:
      return "cache growth";
    case WarningKind::SizeSpecialized:
      return "size specialized";
  }
  return "?";
}

bool is_divergence(WarningKind kind) {
  return kind != WarningKind::ConstantOutput && kind != WarningKind::CacheGrowth &&
         kind != WarningKind::SizeSpecialized;
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_handler_mutex);
  std::swap(g_handler, handler);
  return handler;
}

void warn(const TraceWarning& warning) {
  WarningHandler handler;
  {
    std::lock_guard<std::mutex> lock(g_handler_mutex);
    handler = g_handler;
  }
  // Called outside the lock: a handler may install another handler.
  if (handler) {
    handler(warning);
    return;
  }
  if (!warning.fatal) print_once(warning);  // a fatal one is thrown by the recorder
}

TraceWarning make_warning(WarningKind kind, std::string what, const std::source_location& where) {
  TraceWarning warning{kind, std::move(what), "", 0, false};
  if (where.line() == 0) return warning;
  warning.file = where.file_name();
  warning.line = where.line();
  warning.message += " (at " + warning.file + ":" + std::to_string(warning.line) + ")";
  return warning;
}

}  // namespace kiln::jit
