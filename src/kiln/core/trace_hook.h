// A hook for the tracer (jit/trace, far above core). While a trace records on
// a thread, the recorder installs itself here so that core can tell it about
// what dispatch never sees: a tensor's value read into the host program
// (item(), to_vector(), printing; the Python bindings report numpy(),
// tolist(), bool() and float() the same way), random numbers drawn outside
// any op, and tensors created by factories. With no trace recording, each
// report costs one thread-local load.
#pragma once

#include <optional>
#include <source_location>

#include "kiln/core/dim.h"

namespace kiln {

class Tensor;

struct TraceHook {
  virtual ~TraceHook() = default;
  // `what` names the read ("item()"); `where` is the caller, when known
  // (line 0 when not).
  virtual void on_host_read(const Tensor& t, const char* what,
                            const std::source_location& where) = 0;
  // A factory or initializer drew from a generator ("randn").
  virtual void on_random_draw(const char* what, const std::source_location& where) = 0;
  // make_tensor made a tensor with new storage.
  virtual void on_tensor_created(const Tensor& t) = 0;
  // The shape the recording gives `t` when it has symbolic dims (a trace
  // with dynamic shapes); nullopt when its shape is just t.shape().
  virtual std::optional<DimList> symbolic_shape(const Tensor& t) = 0;
  // A symbolic size was read as a plain integer (`what`: "int()"): the
  // recording is specialized to `value` from here on.
  virtual void on_size_specialized(const Dim& size, int64_t value, const char* what,
                                   const std::source_location& where) = 0;
};

// The hook of this thread, or null.
TraceHook* trace_hook();
void set_trace_hook(TraceHook* hook);

inline void report_host_read(const Tensor& t, const char* what,
                             std::source_location where = std::source_location::current()) {
  if (TraceHook* hook = trace_hook()) hook->on_host_read(t, what, where);
}

inline void report_random_draw(const char* what,
                               std::source_location where = std::source_location::current()) {
  if (TraceHook* hook = trace_hook()) hook->on_random_draw(what, where);
}

}  // namespace kiln
