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
#include <vector>

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

}  // namespace kiln::jit
