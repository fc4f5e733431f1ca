// all_reduce_start and all_reduce_wait: an all-reduce over the ranks of
// kiln::distributed as two nodes of a graph, so that a compiled training
// step holds its gradient all-reduces and runs the rest of backward between
// the two:
//
//   %t : i64[] = all_reduce_start(%g1, %g2) {op="sum"}
//   ... the rest of backward ...
//   %r : f32[30] = all_reduce_wait(%t) {numel=30, dtype=float32}
//
// all_reduce_start packs its inputs (one dtype), flattened, into a buffer of
// its own, queues the asynchronous all-reduce of that buffer on the
// communication thread and outputs a token naming it; all_reduce_wait waits
// for the all-reduce of its token and outputs the reduced buffer. The buffer
// is the pending call's, never the plan's arena: nothing the memory planner
// places can overlap what the communication thread writes, and a plan that
// fails between the two leaves no write into freed memory.
//
// The ops layer sits below kiln::distributed, so the all-reduce itself is a
// hook the distributed layer installs when a process group is initialized
// (set_async_all_reduce); without one the kernels raise, naming what to
// call. Both ops have side effects (never folded, merged or removed), no
// gradient, and no ONNX form.
#pragma once

#include <functional>
#include <string>

#include "kiln/core/tensor.h"
#include "kiln/ops/op.h"

namespace kiln {

class OpRegistry;
void register_collective_ops(OpRegistry& registry);  // called by register_builtin_ops

// Queues an asynchronous all-reduce of `buffer` (in place) under the
// reduction `op` ("sum", "avg", "max", "min") and returns what waits for it:
// a function that blocks until the call is done and raises its error.
using AsyncAllReduce =
    std::function<std::function<void()>(const Tensor& buffer, const std::string& op)>;

// Installed by kiln::distributed's init; the kernels call it.
void set_async_all_reduce(AsyncAllReduce hook);

// The op tables' tests exempt them: they need a process group over several
// ranks, so there is no PyTorch row to compare with (tests/python/test_ddp.py
// runs them under mpirun; tests/cpp/collective_ops_test.cpp checks their IR,
// shapes and errors on one process).
inline bool is_collective(const OpDef& def) {
  return def.name == "all_reduce_start" || def.name == "all_reduce_wait";
}

}  // namespace kiln
