// Where each buffer a plan needs per call sits in the workspace's arena.
// Each request carries its lifetime in steps; buffers whose lifetimes do not
// overlap may share memory. plan_memory() places the largest buffers first,
// each at the lowest offset where it overlaps no buffer live at the same
// time (greedy by size, as TensorFlow Lite's arena planner does): a
// deterministic plan, close to the peak of what is live at any one step.
// (Reuse in place, an elementwise op writing over its input's buffer, is
// decided by lowering, which merges the two requests into one.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/core/size_expr.h"

namespace kiln::jit {

struct BufferRequest {
  int64_t nbytes = 0;
  size_t first_step = 0;  // the step that writes it
  size_t last_step = 0;   // the last step that reads it or a view of it
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request, each a multiple of kAlignment
  int64_t arena_bytes = 0;       // the planned peak
  int64_t unshared_bytes = 0;    // what the buffers would take each in a place of its own
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

// The same placement for buffers whose sizes are expressions over size
// symbols (a graph traced with dynamic shapes): offsets are expressions too,
// so one plan serves every size and its peak is a formula.
//
// Buffers are taken largest first as they compare at `reference` (the sizes
// the plan should be tightest at). Each takes the lowest candidate offset
// (0, or the end of a buffer live at the same time) that overlaps no live
// buffer *for every value of the symbols* (proved from nonnegativity, see
// SizeExpr::provably_nonnegative); when no candidate is provably free the
// buffer goes above every live one, which is free by construction. With
// constant sizes this is exactly plan_memory().
struct SymbolicBufferRequest {
  SizeExpr nbytes;
  size_t first_step = 0;
  size_t last_step = 0;
};

struct SymbolicMemoryPlan {
  std::vector<SizeExpr> offsets;  // one per request, each a multiple of kAlignment
  SizeExpr arena_bytes;
  SizeExpr unshared_bytes;
  // Set, and nothing else, when an offset's expression (max() of max() of
  // ...) grows past a bound: such expressions can double in cost with each
  // level (a detector with many strided sizes took minutes), so the caller
  // plans each size on its own (plan_memory) instead.
  bool too_nested = false;

  // The plan at these sizes (every symbol of the requests bound).
  MemoryPlan evaluate(const std::map<std::string, int64_t>& bindings) const;
};

SymbolicMemoryPlan plan_memory_symbolic(const std::vector<SymbolicBufferRequest>& requests,
                                        const std::map<std::string, int64_t>& reference);

}  // namespace kiln::jit
