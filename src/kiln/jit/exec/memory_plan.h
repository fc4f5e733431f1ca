// Where each buffer a plan needs per call sits in the workspace's arena.
// Each request carries its lifetime in steps, so a planner can reuse memory
// between buffers whose lifetimes don't overlap; plan_memory() does not yet
// (every buffer gets its own place).
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
  int64_t arena_bytes = 0;
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

}  // namespace kiln::jit
