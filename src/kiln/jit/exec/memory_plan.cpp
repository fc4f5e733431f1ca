#include "kiln/jit/exec/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "kiln/core/allocator.h"

namespace kiln::jit {
namespace {

int64_t aligned(int64_t nbytes) {
  constexpr int64_t align = int64_t(kAlignment);
  return (nbytes + align - 1) / align * align;
}

bool live_together(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by request order, so the plan is the same every time.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].nbytes > requests[b].nbytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = aligned(requests[i].nbytes);
    plan.unshared_bytes += size;
    // The buffers live at the same time as this one, by offset: take the
    // first gap that fits.
    std::vector<size_t> busy;
    for (size_t p : placed) {
      if (live_together(requests[p], requests[i])) busy.push_back(p);
    }
    std::sort(busy.begin(), busy.end(),
              [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    int64_t offset = 0;
    for (size_t p : busy) {
      if (offset + size <= plan.offsets[p]) break;
      offset = std::max(offset, plan.offsets[p] + aligned(requests[p].nbytes));
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace kiln::jit
