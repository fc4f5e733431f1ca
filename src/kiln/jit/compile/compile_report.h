// What compiling a traced function did, end to end: the pass pipeline's
// report, the memory plan (planned peak of the per-call arena against the
// sum of every intermediate's size) and the time each stage took.
// CompiledFunction::compile_report(); `traced.report()` in Python.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kiln/jit/compile/symbolic_memory.h"
#include "kiln/jit/passes/pass_report.h"

namespace kiln::jit {

struct CompileReport {
  PassReport passes;
  // Run on the plan's own copy of the graph when lowering (unroll_loops):
  // what the plan runs differs from graph() by these. Empty: none ran.
  PassReport lowering;
  // The compiled plan's arena (-1 when the function runs another runner).
  int64_t planned_bytes = -1;
  int64_t unshared_bytes = -1;  // every intermediate in a place of its own
  size_t steps = 0;             // kernels the plan runs per call
  // A graph with symbolic sizes: the numbers above are at `planned_at`
  // (the traced example's sizes), and `memory` is the peak at any size.
  std::map<std::string, int64_t> planned_at;
  std::optional<MemoryFormula> memory;
  double record_seconds = 0;  // running the eager code while recording
  double lower_seconds = 0;   // lowering to the plan (kernels prepared)
  double total_seconds() const { return record_seconds + passes.seconds + lower_seconds; }

  // The passes table, then a line for memory and one for time.
  std::string to_string() const;
};

}  // namespace kiln::jit
