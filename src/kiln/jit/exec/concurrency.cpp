#include "kiln/jit/exec/concurrency.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "kiln/ops/collective_ops.h"

namespace kiln::jit {
namespace {

// Where an access lands. Arena and Fixed offsets are addresses in one
// space each (the arena's placement, the held storages' pointers); Input is
// one space for every input (two inputs may be one tensor), Output one per
// output unless written into a parameter (then it may be any held memory);
// before placement, Buffer: one arena buffer (root), as if it had its own
// bytes.
// Collective: the order all_reduce_start/all_reduce_wait issue and wait in,
// which every rank must share (no two side by side, none passes another).
enum class Space : uint8_t { Arena, Buffer, Fixed, Input, Output, Generator, Collective, Barrier };

struct Access {
  Space space;
  uint32_t root = 0;  // the output (Space::Output) or buffer (Space::Buffer)
  int64_t lo = 0, hi = 0;
  bool write = false;
};

constexpr int64_t kEverything = std::numeric_limits<int64_t>::max();

bool overlap(const Access& a, const Access& b) {
  return a.lo < b.hi && b.lo < a.hi;
}

bool conflict(const Access& a, const Access& b) {
  if (a.space == Space::Barrier || b.space == Space::Barrier) return true;
  if (!a.write && !b.write) return false;
  auto output_into_fixed = [](const Access& out, const Access& other) {
    return out.space == Space::Output && out.root == UINT32_MAX && other.space == Space::Fixed;
  };
  if (output_into_fixed(a, b) || output_into_fixed(b, a)) return true;
  if (a.space != b.space) return false;
  switch (a.space) {
    case Space::Input:
    case Space::Generator:
    case Space::Collective:
      return true;
    case Space::Output:
      return (a.root == b.root || a.root == UINT32_MAX || b.root == UINT32_MAX) && overlap(a, b);
    case Space::Buffer:
      return a.root == b.root && overlap(a, b);
    default:
      return overlap(a, b);
  }
}

// The bytes a view spans, from its first element's offset `base`.
std::pair<int64_t, int64_t> extent(const cpu::StridedView& v, int64_t base) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < v.ndim; ++d) {
    if (v.shape[d] == 0) return {base, base};
    const int64_t reach = (v.shape[d] - 1) * v.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const auto size = int64_t(element_size(v.dtype));
  return {base + lo * size, base + (hi + 1) * size};
}

// `placed`: arena offsets are the placement's (the bytes steps share);
// else each arena buffer is a space of its own (before placement).
Access access_of(const Plan& plan, uint32_t arg, bool write, bool placed) {
  const Slot& slot = plan.slots[size_t(plan.arg_slots[arg])];
  const cpu::StridedView& v = plan.args[arg];
  Access a{Space::Arena, 0, 0, 0, write};
  int64_t base = slot.byte_offset;
  switch (slot.root) {
    case RootKind::Arena:
      if (placed) {
        base += plan.memory.offsets[slot.root_index];
      } else {
        a.space = Space::Buffer;
        a.root = slot.root_index;
      }
      break;
    case RootKind::Fixed:
      a.space = Space::Fixed;
      base = int64_t(reinterpret_cast<uintptr_t>(v.data));
      break;
    case RootKind::Input:
      a.space = Space::Input;
      break;
    case RootKind::Output:
      a.space = Space::Output;
      a.root = plan.output_held[slot.root_index] >= 0 ? UINT32_MAX : slot.root_index;
      break;
  }
  std::tie(a.lo, a.hi) = extent(v, base);
  return a;
}

std::vector<Access> accesses_of(const Plan& plan, const Step& step, bool placed, int64_t& bytes) {
  std::vector<Access> accesses;
  bytes = 0;
  if (step.control_flow || step.op->name == "custom_function") {
    accesses.push_back({Space::Barrier, 0, 0, kEverything, true});
    return accesses;
  }
  std::vector<int> mutated =
      step.op->mutated_inputs ? step.op->mutated_inputs(*step.attrs) : std::vector<int>();
  for (uint32_t k = 0; k < step.num_inputs + step.num_outputs; ++k) {
    const uint32_t arg = step.first_arg + k;
    if (plan.arg_slots[arg] < 0) continue;  // an absent optional input
    const bool write =
        k >= step.num_inputs || std::find(mutated.begin(), mutated.end(), int(k)) != mutated.end();
    Access a = access_of(plan, arg, write, placed);
    bytes += a.hi - a.lo;
    accesses.push_back(a);
  }
  if (step.op->is_random) accesses.push_back({Space::Generator, 0, 0, 1, true});
  if (is_collective(*step.op)) accesses.push_back({Space::Collective, 0, 0, 1, true});
  return accesses;
}

// The wave of each step: one more than the latest wave of an earlier step
// it conflicts with.
std::vector<uint32_t> step_waves(const Plan& plan, bool placed, std::vector<int64_t>& bytes) {
  const size_t n = plan.steps.size();
  std::vector<std::vector<Access>> accesses(n);
  bytes.assign(n, 0);
  std::vector<uint32_t> wave(n, 0);
  for (size_t j = 0; j < n; ++j) {
    accesses[j] = accesses_of(plan, plan.steps[j], placed, bytes[j]);
    for (size_t i = 0; i < j; ++i) {
      if (wave[i] < wave[j]) continue;  // cannot raise it
      bool conflicts = false;
      for (const Access& a : accesses[i]) {
        for (const Access& b : accesses[j])
          conflicts = conflicts || conflict(a, b);
      }
      if (conflicts) wave[j] = wave[i] + 1;
    }
  }
  return wave;
}

// Each buffer lives from the start of the wave that first uses it to the
// end of the wave that last does: the placement then gives the buffers
// alive in one wave bytes of their own.
void widen_lifetimes(Plan& plan, const std::vector<uint32_t>& wave_of_step) {
  std::vector<bool> seen(plan.buffers.size(), false);
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& step = plan.steps[k];
    const Wave& w = plan.waves[wave_of_step[k]];
    const size_t first = w.first, last = size_t(w.first) + w.count - 1;
    for (uint32_t a = step.first_arg; a < step.first_arg + step.num_inputs + step.num_outputs;
         ++a) {
      const int32_t id = plan.arg_slots[a];
      if (id < 0 || plan.slots[size_t(id)].root != RootKind::Arena) continue;
      const uint32_t b = plan.slots[size_t(id)].root_index;
      BufferRequest& buffer = plan.buffers[b];
      buffer.first_step = seen[b] ? std::min(buffer.first_step, first) : first;
      buffer.last_step = seen[b] ? std::max(buffer.last_step, last) : last;
      seen[b] = true;
    }
  }
}

}  // namespace

void order_by_waves(Plan& plan) {
  const size_t n = plan.steps.size();
  plan.waves.clear();
  plan.has_concurrent_waves = false;
  if (n < 2 || n > kMaxPlannedSteps) return;  // quadratic: large plans run in order
  std::vector<int64_t> bytes;
  std::vector<uint32_t> wave = step_waves(plan, /*placed=*/false, bytes);
  const uint32_t num_waves = *std::max_element(wave.begin(), wave.end()) + 1;
  if (num_waves == n) return;  // a chain: nothing could run side by side
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return wave[a] < wave[b]; });
  std::vector<Step> steps;
  steps.reserve(n);
  std::vector<int> large(num_waves, 0);
  std::vector<uint32_t> wave_of_step(n);
  plan.waves.assign(num_waves, Wave{});
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t w = wave[order[k]];
    if (plan.waves[w].count++ == 0) plan.waves[w].first = k;
    steps.push_back(plan.steps[order[k]]);
    large[w] += bytes[order[k]] >= kConcurrentStepBytes;
    wave_of_step[k] = w;
  }
  plan.steps = std::move(steps);
  for (uint32_t w = 0; w < num_waves; ++w) {
    plan.waves[w].concurrent = large[w] >= 2;
    plan.has_concurrent_waves = plan.has_concurrent_waves || plan.waves[w].concurrent;
  }
  widen_lifetimes(plan, wave_of_step);
}

void check_waves(const Plan& plan) {
  int64_t bytes = 0;
  for (const Wave& w : plan.waves) {
    if (w.count < 2) continue;
    std::vector<std::vector<Access>> accesses;
    for (uint32_t k = 0; k < w.count; ++k)
      accesses.push_back(accesses_of(plan, plan.steps[w.first + k], /*placed=*/true, bytes));
    for (uint32_t k = 1; k < w.count; ++k) {
      for (uint32_t i = 0; i < k; ++i) {
        for (const Access& a : accesses[i]) {
          for (const Access& b : accesses[k]) {
            KILN_ASSERT(!conflict(a, b), "order_by_waves: steps ", w.first + i, " and ",
                        w.first + k, " of one wave conflict once placed");
          }
        }
      }
    }
  }
}

}  // namespace kiln::jit
