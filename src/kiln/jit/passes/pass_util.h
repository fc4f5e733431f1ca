// Predicates the passes share: what a node does besides computing its
// outputs, when a node is dead, when one value may take another's place.
#pragma once

#include <optional>

#include "kiln/jit/ir/graph.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {

// Whether the node writes one of its (present) inputs in place: batch_norm's
// running statistics when training.
bool writes_inputs(const Node& node);

// Whether the node writes its input `index` in place.
bool writes_input(const Node& node, size_t index);

// The memory nodes of a graph write in place (batch_norm's running
// statistics when training), found once per pass. A value sharing it holds
// other data before and after the write, so it cannot be folded, merged, or
// stand for a copy of itself.
class WrittenMemory {
 public:
  explicit WrittenMemory(const Graph& graph);
  bool empty() const { return bases_.empty(); }
  // Whether `value` shares memory with a written value: the same base after
  // following views back.
  bool aliases(const Value& value) const;

 private:
  std::vector<const Value*> bases_;  // few: one per written input
};

// Whether running the node does more than compute its outputs: it writes an
// input, has another declared side effect, or draws from the random
// generator. Such a node is never folded, merged or removed: dropping an
// unused dropout would shift the random numbers every later random op draws,
// and compiled results must equal eager ones from the same seed.
bool has_effects(const Node& node);

// Used by a node or returned by the graph.
bool is_used(const Value& value);

// No output used and no effects: removing the node changes nothing.
bool is_dead(const Node& node);

// Whether `replacement` may stand for `value` at all its uses: same dtype and
// shape, and not a wrapped number (a Python number changes the type
// promotion of the ops it meets, so it cannot stand in for a tensor).
bool can_replace(const Value& value, const Value& replacement);

// Whether the value is contiguous wherever it lives: an input (a plan
// assumes contiguous inputs), a parameter, a constant, or the output of an
// op that writes a fresh buffer. A view op's output may not be.
bool is_known_contiguous(const Value& value);

// A constant's or parameter's data without its autograd state (a frozen
// parameter may require grad; folding must not record a backward node),
// carrying the wrapped-number flag of its graph value, which dispatch reads
// for type promotion exactly as the node's inference did. Null: absent.
Tensor plain_data(const Value* value);

// A one-element floating constant's value (or a parameter's, in a frozen
// graph, whose parameters are read-only: an ONNX initializer); none for
// anything else.
std::optional<double> constant_number(const Value* value, bool frozen);

// While it lives, a recorder on this thread does not see the ops a pass
// dispatches (passes may run while a trace is being recorded).
class NoDispatchObserver {
 public:
  NoDispatchObserver();
  ~NoDispatchObserver();
  NoDispatchObserver(const NoDispatchObserver&) = delete;
  NoDispatchObserver& operator=(const NoDispatchObserver&) = delete;

 private:
  DispatchObserver* saved_;
};

}  // namespace kiln::jit
