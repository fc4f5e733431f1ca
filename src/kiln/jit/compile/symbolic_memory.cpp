#include "kiln/jit/compile/symbolic_memory.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "kiln/core/dtype.h"
#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

// Ordering the buffers needs their sizes compared; 1024 for every symbol
// compares them as they are at large sizes, where memory matters. The plan is
// valid at every size whatever this is (plan_memory_symbolic proves it).
constexpr int64_t kReferenceSize = 1024;

SizeExpr nbytes_of(const Value& v) {
  SizeExpr n = int64_t(element_size(v.dtype()));
  for (const Dim& d : v.shape())
    n = n * d.expr();
  return n;
}

// Every value of a graph in one order: inputs, parameters, constants, then
// each node's outputs. A specialized copy lists its values in the same order.
std::vector<const Value*> values_in_order(const Graph& graph) {
  std::vector<const Value*> out(graph.inputs().begin(), graph.inputs().end());
  out.insert(out.end(), graph.params().begin(), graph.params().end());
  out.insert(out.end(), graph.constants().begin(), graph.constants().end());
  for (const Node* node : graph.nodes()) {
    out.insert(out.end(), node->outputs().begin(), node->outputs().end());
  }
  return out;
}

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return str(bytes, " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes) / 1024.0;
  size_t unit = 0;
  for (; value >= 1024.0 && unit + 1 < std::size(units); ++unit)
    value /= 1024.0;
  char text[32];
  std::snprintf(text, sizeof text, value < 10 ? "%.1f %s" : "%.0f %s", value, units[unit]);
  return text;
}

std::map<std::string, int64_t> reference_bindings(const std::vector<SymbolicBufferRequest>& reqs) {
  std::map<std::string, int64_t> reference;
  for (const SymbolicBufferRequest& r : reqs) {
    for (const std::string& s : r.nbytes.symbols())
      reference[s] = kReferenceSize;
  }
  return reference;
}

}  // namespace

std::string MemoryFormula::to_string() const {
  return str("peak ", peak(), " bytes (intermediates ", intermediates, ", outputs ", outputs,
             "); weights ", format_bytes(weights));
}

std::optional<int64_t> max_size_for(const MemoryFormula& formula, int64_t bytes,
                                    const std::string& symbol,
                                    const std::map<std::string, int64_t>& others,
                                    const std::vector<ShapeGuard>& guards, int64_t lowest) {
  std::map<std::string, int64_t> bindings = others;
  const SizeExpr peak = formula.peak();
  auto fits = [&](int64_t value) {
    bindings[symbol] = value;
    for (const std::string& s : peak.symbols()) {
      KILN_CHECK_VALUE(bindings.count(s), "max_size_for: the peak ", peak, " depends on '", s,
                       "' too; give its value");
    }
    if (formula.weights + peak.evaluate(bindings) > bytes) return false;
    return std::all_of(guards.begin(), guards.end(), [&](const ShapeGuard& g) {
      for (const std::string& s : g.lhs.symbols())
        if (!bindings.count(s)) return true;  // about other symbols: not this question
      for (const std::string& s : g.rhs.symbols())
        if (!bindings.count(s)) return true;
      return g.holds(bindings);
    });
  };
  if (!fits(lowest)) return std::nullopt;
  // Double until it stops fitting (or a bound far past any real memory).
  constexpr int64_t kLimit = int64_t(1) << 40;
  int64_t good = lowest, step = 1;
  while (good + step <= kLimit && fits(good + step)) {
    good += step;
    step *= 2;
  }
  // good fits, good + step does not (or passes the limit): bisect between.
  int64_t bad = std::min(good + step, kLimit + 1);
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

SymbolicPlacer::SymbolicPlacer(std::shared_ptr<const Graph> symbolic)
    : symbolic_(std::move(symbolic)) {
  KILN_CHECK(symbolic_ != nullptr, "SymbolicPlacer: no graph");
}

SymbolicPlacer::Placement SymbolicPlacer::make_placement(
    const std::vector<const Value*>& symbolic_of, const Plan& plan, std::vector<size_t> key) const {
  std::vector<SymbolicBufferRequest> requests;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const Value* v = symbolic_of[key[3 * b]];
    requests.push_back({nbytes_of(*v), plan.buffers[b].first_step, plan.buffers[b].last_step});
  }
  Placement placement;
  placement.key = std::move(key);
  placement.plan = plan_memory_symbolic(requests, reference_bindings(requests));
  MemoryFormula& f = placement.formula;
  f.intermediates = placement.plan.arena_bytes;
  f.unshared = placement.plan.unshared_bytes;
  for (size_t j = 0; j < symbolic_->outputs().size(); ++j) {
    if (plan.output_held[j] < 0) f.outputs = f.outputs + nbytes_of(*symbolic_->outputs()[j]);
  }
  std::unordered_set<const void*> counted;
  for (const Tensor& t : plan.held) {
    if (counted.insert(t.storage().get()).second) f.weights += int64_t(t.storage()->nbytes());
  }
  return placement;
}

MemoryPlan SymbolicPlacer::place(const Graph& specialized, const Plan& plan,
                                 const std::map<std::string, int64_t>& bindings) {
  const std::vector<const Value*> symbolic_of = values_in_order(*symbolic_);
  std::unordered_map<size_t, size_t> position;  // specialized value id -> position
  {
    const std::vector<const Value*> values = values_in_order(specialized);
    KILN_CHECK(values.size() == symbolic_of.size(), "SymbolicPlacer: the specialized graph has ",
               values.size(), " values, the symbolic one ", symbolic_of.size());
    for (size_t i = 0; i < values.size(); ++i)
      position[values[i]->id()] = i;
  }
  // Each buffer's value: the first slot in the arena buffer is the one that made it.
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> key(3 * plan.buffers.size(), kNone);
  for (const Slot& slot : plan.slots) {
    if (slot.root != RootKind::Arena) continue;
    size_t& value = key[3 * slot.root_index];
    if (value == kNone) value = position.at(slot.value_id);
  }
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    KILN_CHECK(key[3 * b] != kNone, "SymbolicPlacer: buffer ", b, " has no value");
    key[3 * b + 1] = plan.buffers[b].first_step;
    key[3 * b + 2] = plan.buffers[b].last_step;
  }
  std::shared_ptr<const Placement> placement;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& p : placements_) {
      if (p->key == key) placement = p;
    }
  }
  if (!placement) {
    auto made = std::make_shared<const Placement>(make_placement(symbolic_of, plan, key));
    std::lock_guard<std::mutex> lock(mutex_);
    placements_.push_back(made);
    placement = made;
  }
  if (placement->plan.too_nested) {  // no formula: this size's own placement
    std::vector<BufferRequest> requests;
    for (const auto& buffer : plan.buffers)
      requests.push_back({buffer.nbytes, buffer.first_step, buffer.last_step});
    return plan_memory(requests);
  }
  MemoryPlan memory = placement->plan.evaluate(bindings);
  // The expressions, evaluated, are the sizes this plan asked for.
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const int64_t expected = nbytes_of(*symbolic_of[key[3 * b]]).evaluate(bindings);
    KILN_CHECK(expected == plan.buffers[b].nbytes, "SymbolicPlacer: buffer ", b, " is ",
               plan.buffers[b].nbytes, " bytes, its symbolic size says ", expected);
  }
  return memory;
}

std::optional<MemoryFormula> SymbolicPlacer::formula() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (placements_.empty() || placements_.front()->plan.too_nested) return std::nullopt;
  return placements_.front()->formula;
}

}  // namespace kiln::jit
