#include "kiln/jit/exec/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "kiln/core/allocator.h"

namespace kiln::jit {
namespace {

int64_t aligned(int64_t nbytes) {
  constexpr int64_t align = int64_t(kAlignment);
  return (nbytes + align - 1) / align * align;
}

template <class Request>
bool live_together(const Request& a, const Request& b) {
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

namespace kiln::jit {
namespace {

SizeExpr aligned(const SizeExpr& nbytes) {
  constexpr int64_t align = int64_t(kAlignment);
  return floordiv(nbytes + (align - 1), align) * align;
}

// a >= b for every nonnegative value of the symbols.
bool provably_at_least(const SizeExpr& a, const SizeExpr& b) {
  return (a - b).provably_nonnegative();
}

// max(a, b), without a max atom when one provably is the larger.
SizeExpr upper(const SizeExpr& a, const SizeExpr& b) {
  if (provably_at_least(a, b)) return a;
  if (provably_at_least(b, a)) return b;
  return max(a, b);
}

}  // namespace

MemoryPlan SymbolicMemoryPlan::evaluate(const std::map<std::string, int64_t>& bindings) const {
  MemoryPlan plan;
  plan.offsets.reserve(offsets.size());
  for (const SizeExpr& offset : offsets)
    plan.offsets.push_back(offset.evaluate(bindings));
  plan.arena_bytes = arena_bytes.evaluate(bindings);
  plan.unshared_bytes = unshared_bytes.evaluate(bindings);
  return plan;
}

SymbolicMemoryPlan plan_memory_symbolic(const std::vector<SymbolicBufferRequest>& requests,
                                        const std::map<std::string, int64_t>& reference) {
  const size_t n = requests.size();
  SymbolicMemoryPlan plan;
  plan.offsets.assign(n, SizeExpr(0));
  std::vector<SizeExpr> sizes, ends(n);
  std::vector<int64_t> at_reference;
  for (const SymbolicBufferRequest& r : requests) {
    sizes.push_back(aligned(r.nbytes));
    at_reference.push_back(r.nbytes.evaluate(reference));  // as plan_memory orders
    plan.unshared_bytes = plan.unshared_bytes + sizes.back();
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return at_reference[a] > at_reference[b]; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<size_t> busy;
    for (size_t p : placed) {
      if (live_together(requests[p], requests[i])) busy.push_back(p);
    }
    // Candidates, lowest first at the reference sizes: 0 and each live end.
    std::vector<SizeExpr> candidates{SizeExpr(0)};
    for (size_t p : busy)
      candidates.push_back(ends[p]);
    std::vector<int64_t> candidate_values;
    for (const SizeExpr& c : candidates)
      candidate_values.push_back(c.evaluate(reference));
    std::vector<size_t> by_value(candidates.size());
    std::iota(by_value.begin(), by_value.end(), 0);
    std::stable_sort(by_value.begin(), by_value.end(),
                     [&](size_t a, size_t b) { return candidate_values[a] < candidate_values[b]; });
    auto free_everywhere = [&](const SizeExpr& offset) {
      return std::all_of(busy.begin(), busy.end(), [&](size_t p) {
        return provably_at_least(plan.offsets[p], offset + sizes[i]) ||
               provably_at_least(offset, ends[p]);
      });
    };
    std::optional<SizeExpr> chosen;
    for (size_t c : by_value) {
      if (free_everywhere(candidates[c])) {
        chosen = candidates[c];
        break;
      }
    }
    if (!chosen) {  // above everything live: free for every size by construction
      chosen = SizeExpr(0);
      for (size_t p : busy)
        chosen = upper(*chosen, ends[p]);
    }
    plan.offsets[i] = *chosen;
    ends[i] = *chosen + sizes[i];
    plan.arena_bytes = upper(plan.arena_bytes, ends[i]);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace kiln::jit
