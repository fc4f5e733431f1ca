#include "kiln/jit/exec/memory_plan.h"

#include "kiln/core/allocator.h"

namespace kiln::jit {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests) {
  constexpr int64_t align = int64_t(kAlignment);
  MemoryPlan plan;
  plan.offsets.reserve(requests.size());
  for (const BufferRequest& request : requests) {
    plan.offsets.push_back(plan.arena_bytes);
    plan.arena_bytes += (request.nbytes + align - 1) / align * align;
  }
  return plan;
}

}  // namespace kiln::jit
