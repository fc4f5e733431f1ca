// GraphRunner: what runs a graph for a CompiledFunction (jit/compile). Two
// implement it: the Interpreter (interpreter.h) replays the graph through
// dispatch, so autograd and an outer trace see every op; the Executable
// (executable.h) runs a plan lowered once, with no dispatch per op.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::jit {

// What a runner planned when it was made, for compile reports.
struct RunnerStats {
  int64_t planned_bytes = -1;   // the arena holding every intermediate; -1: none planned
  int64_t unshared_bytes = -1;  // what the intermediates would take without sharing
  size_t steps = 0;             // steps of the lowered plan; 0 for a replay
};

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Every graph output for these inputs, which the caller has checked
  // against the graph's input types (count, dtypes, shapes): nothing is
  // checked again. Safe to call from many threads at once.
  virtual std::vector<Tensor> run_unchecked(std::span<const Tensor> inputs) const = 0;
  // Nothing planned, for a runner that plans nothing ahead (the Interpreter).
  virtual RunnerStats stats() const { return {}; }
};

}  // namespace kiln::jit
