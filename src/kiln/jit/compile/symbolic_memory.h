// Memory of a graph with symbolic sizes (traced with dynamic shapes, or
// loaded): one arena placement for every size, and peak memory as a formula.
//
// Each size a symbolic graph runs at is specialized and lowered to its own
// plan (per_size_runner.h): kernels prepare for concrete shapes. The arena
// offsets, though, come from one placement whose offsets are expressions
// over the symbols (exec/memory_plan.h's plan_memory_symbolic), made once
// from the first size's buffers and evaluated at each size. So the planned
// bytes at any size are the formula's value there, and the formula can say
// before a call how much memory a size takes:
//
//   peak 3072*batch + 1536 bytes (intermediates 2048*batch, outputs
//   1024*batch + 1536); weights 658 KiB
//
// Counted: the arena (every intermediate value), the result tensors a call
// returns, and the parameters and constants the graph holds. Not counted:
// the caller's inputs, and the scratch memory a oneDNN kernel takes while it
// runs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/dim.h"
#include "kiln/jit/exec/plan.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

struct MemoryFormula {
  SizeExpr intermediates;  // the planned arena
  SizeExpr unshared;       // every intermediate in a place of its own
  SizeExpr outputs;        // the fresh result tensors of one call
  int64_t weights = 0;     // parameters and constants, held once for every size
  SizeExpr peak() const { return intermediates + outputs; }

  // "peak 3072*batch + 1536 bytes (intermediates 2048*batch, outputs
  // 1024*batch + 1536); weights 658 KiB"
  std::string to_string() const;
};

// The largest value of `symbol` (at least `lowest`) at which weights + peak
// fits in `bytes` and every guard holds, the other symbols bound by `others`;
// nothing when even `lowest` does not fit. The peak never shrinks as a size
// grows (sizes are sums of products of nonnegative terms), so a doubling
// search then a bisection finds it; guards are bounds checked along the way.
std::optional<int64_t> max_size_for(const MemoryFormula& formula, int64_t bytes,
                                    const std::string& symbol,
                                    const std::map<std::string, int64_t>& others,
                                    const std::vector<ShapeGuard>& guards, int64_t lowest = 1);

// The arena placement of a symbolic graph's specializations (a BufferPlacer
// for each). Thread-safe.
class SymbolicPlacer {
 public:
  explicit SymbolicPlacer(std::shared_ptr<const Graph> symbolic);

  // The offsets for `plan`, lowered from specialize(symbolic, bindings):
  // the symbolic placement of its buffers (made on first use) at these sizes.
  MemoryPlan place(const Graph& specialized, const Plan& plan,
                   const std::map<std::string, int64_t>& bindings);
  // The formula of the first placement made; nothing before any.
  std::optional<MemoryFormula> formula() const;

 private:
  struct Placement {
    std::vector<size_t> key;  // per buffer: its value's position, first and last step
    SymbolicMemoryPlan plan;
    MemoryFormula formula;
  };
  Placement make_placement(const std::vector<const Value*>& symbolic_of, const Plan& plan,
                           std::vector<size_t> key) const;

  std::shared_ptr<const Graph> symbolic_;
  mutable std::mutex mutex_;
  // One per buffer structure met: the same for every size, except where
  // lowering decides differently at some sizes (an in-place reuse between
  // values whose shapes agree only there).
  std::vector<std::shared_ptr<const Placement>> placements_;
};

}  // namespace kiln::jit
