#include "kiln/jit/exec/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "kiln/core/allocator.h"
#include "kiln/util/error.h"

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

// A size expression with two polynomial bounds, lo <= exact <= hi for every
// nonnegative value of the symbols. An aligned size `64*((336*batch + 63) //
// 64)` cannot be compared with `480*batch` by its canonical form; its bounds
// `336*batch` and `384*batch` can.
struct Bounded {
  SizeExpr exact, lo, hi;
};

Bounded operator+(const Bounded& a, const Bounded& b) {
  return {a.exact + b.exact, a.lo + b.lo, a.hi + b.hi};
}

Bounded aligned(const SizeExpr& nbytes) {
  constexpr int64_t align = int64_t(kAlignment);
  SizeExpr exact = floordiv(nbytes + (align - 1), align) * align;
  SizeExpr hi = round_up_coefficients(nbytes, align);
  if (exact == hi) return {exact, exact, exact};  // a multiple already: a polynomial
  return {exact, nbytes, hi};
}

// a >= b for every nonnegative value of the symbols, as far as can be proved.
bool provably_at_least(const Bounded& a, const Bounded& b) {
  return (a.exact - b.exact).provably_nonnegative() || (a.lo - b.hi).provably_nonnegative();
}

// max(a, b), without a max atom when one provably is the larger. Both are
// nonnegative, so their sum bounds the max from above.
Bounded upper(const Bounded& a, const Bounded& b) {
  if (provably_at_least(a, b)) return a;
  if (provably_at_least(b, a)) return b;
  return {max(a.exact, b.exact), a.lo, a.hi + b.hi};
}

// A size at the reference sizes, which only orders buffers and candidate
// offsets: a high-degree size (a product of several strided sizes) may pass
// int64 there, and then orders as the largest.
int64_t at_reference_sizes(const SizeExpr& size, const std::map<std::string, int64_t>& reference) {
  try {
    return size.evaluate(reference);
  } catch (const Error&) {
    return std::numeric_limits<int64_t>::max();
  }
}

// The longest text of an offset the symbolic plan keeps. Offsets above
// every live buffer are max() of ends that may hold maxes in turn; on a
// detector's many strided sizes they doubled level after level, and planning
// took minutes. Ordinary graphs stay far below.
constexpr size_t kMaxOffsetText = 16384;

}  // namespace

MemoryPlan SymbolicMemoryPlan::evaluate(const std::map<std::string, int64_t>& bindings) const {
  KILN_CHECK(!too_nested, "memory plan: a symbolic plan given up as too nested has no offsets");
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
  const Bounded zero{0, 0, 0};
  std::vector<Bounded> sizes, offsets(n, zero), ends(n, zero);
  std::vector<int64_t> at_reference;
  Bounded arena = zero, unshared = zero;
  for (const SymbolicBufferRequest& r : requests) {
    sizes.push_back(aligned(r.nbytes));
    at_reference.push_back(at_reference_sizes(r.nbytes, reference));  // as plan_memory orders
    unshared = unshared + sizes.back();
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
    std::vector<Bounded> candidates{zero};
    for (size_t p : busy)
      candidates.push_back(ends[p]);
    std::vector<int64_t> candidate_values;
    for (const Bounded& c : candidates)
      candidate_values.push_back(at_reference_sizes(c.exact, reference));
    std::vector<size_t> by_value(candidates.size());
    std::iota(by_value.begin(), by_value.end(), 0);
    std::stable_sort(by_value.begin(), by_value.end(),
                     [&](size_t a, size_t b) { return candidate_values[a] < candidate_values[b]; });
    auto free_everywhere = [&](const Bounded& offset) {
      return std::all_of(busy.begin(), busy.end(), [&](size_t p) {
        return provably_at_least(offsets[p], offset + sizes[i]) ||
               provably_at_least(offset, ends[p]);
      });
    };
    std::optional<Bounded> chosen;
    for (size_t c : by_value) {
      if (free_everywhere(candidates[c])) {
        chosen = candidates[c];
        break;
      }
    }
    if (!chosen) {  // above everything live: free for every size by construction
      chosen = zero;
      for (size_t p : busy)
        chosen = upper(*chosen, ends[p]);
      // Its text is what evaluating and comparing it walks (shared
      // sub-expressions once per use): past a bound, give up.
      if (chosen->exact.to_string().size() > kMaxOffsetText) {
        SymbolicMemoryPlan refused;
        refused.too_nested = true;
        return refused;
      }
    }
    offsets[i] = *chosen;
    ends[i] = *chosen + sizes[i];
    arena = upper(arena, ends[i]);
    placed.push_back(i);
  }
  SymbolicMemoryPlan plan;
  for (const Bounded& offset : offsets)
    plan.offsets.push_back(offset.exact);
  plan.arena_bytes = arena.exact;
  plan.unshared_bytes = unshared.exact;
  return plan;
}

}  // namespace kiln::jit
