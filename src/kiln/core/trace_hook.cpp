#include "kiln/core/trace_hook.h"

namespace kiln {
namespace {
thread_local TraceHook* t_trace_hook = nullptr;
}  // namespace

TraceHook* trace_hook() {
  return t_trace_hook;
}

void set_trace_hook(TraceHook* hook) {
  t_trace_hook = hook;
}

}  // namespace kiln
