// How tracing tells the user that a compiled function may not do what the
// eager code did: each report is a TraceWarning handed to one replaceable,
// process-wide handler. The default prints each distinct warning once to
// stderr; the Python front end installs a handler that turns them into
// Python warnings at the user's line. With RecordOptions{.strict = true} a
// divergence is fatal: the recorder hands it to the handler marked `fatal`
// (Python's raises TraceError at the user's line) and, when the handler
// returns, throws kiln::Error with its message.
#pragma once

#include <functional>
#include <source_location>
#include <string>

namespace kiln::jit {

enum class WarningKind {
  HostRead,              // a traced value read into the host program (item(), print)
  InputRead,             // an input's or a parameter's own value read while tracing
  AliasedWrite,          // an in-place write through a view or base of a recorded tensor
  OutsideWrite,          // an in-place write into a tensor from outside the traced code
  RandomFactory,         // random numbers drawn outside any op, frozen into the graph
  GradConstant,          // a tensor that requires grad captured as a constant
  SideEffectOnConstant,  // an op updating state (batch_norm's statistics) held in a constant
  UntracedView,          // a view of a recorded tensor made outside the op table
  ConstantOutput,        // an output that does not depend on any input
  CacheGrowth,           // a signature cache past its entry limit
  SizeSpecialized,       // a symbolic size read as a plain integer: guarded to that value
};
std::string to_string(WarningKind kind);

// Divergences are errors in strict mode; ConstantOutput, CacheGrowth and
// SizeSpecialized are only ever warnings (the result is right, the use is
// suspicious or costs recompiles).
bool is_divergence(WarningKind kind);

struct TraceWarning {
  WarningKind kind;
  std::string message;  // the whole text, the C++ caller's location included when known
  std::string file;     // that location; "" when unknown
  unsigned line = 0;
  bool fatal = false;  // strict mode: the recording stops with an error
};

using WarningHandler = std::function<void(const TraceWarning&)>;
// Installs `handler` for every thread; an empty handler restores the
// default. Returns the handler it replaced (empty when it was the default).
WarningHandler set_warning_handler(WarningHandler handler);
// Hands `warning` to the current handler.
void warn(const TraceWarning& warning);

// A warning of `kind` saying `what`, with " (at file:line)" appended when
// `where` is known (line > 0).
TraceWarning make_warning(WarningKind kind, std::string what,
                          const std::source_location& where = std::source_location());

}  // namespace kiln::jit
