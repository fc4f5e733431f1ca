// PerSizeRunner: runs a graph with symbolic sizes (traced with dynamic
// shapes, or loaded) as one static plan per set of input shapes.
//
// A call's input shapes bind the symbols (jit/ir/specialize.h: checked
// against every input dim and the graph's guards), the graph is specialized
// to those values once, and the runner made for that static graph (an
// Executable, or an Interpreter for replays) is kept: a call at sizes seen
// before checks nothing again and allocates no new plan. Oldest sizes are
// dropped past `max_sizes`. The arena offsets of every size's plan come from
// one symbolic placement (symbolic_memory.h), so the peak memory is a
// formula over the symbols.
//
// A graph with a node whose output size its data decides (nonzero, unique:
// Note [Data-dependent output shapes]) has sizes no input gives: it is not
// specialized per size. One runner is made over the symbolic graph (an
// Executable of it runs at run time, node by node, and binds those sizes as
// the nodes run); a call's input shapes are checked as for any other graph.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "kiln/jit/compile/symbolic_memory.h"
#include "kiln/jit/exec/runner.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

class PerSizeRunner final : public GraphRunner {
 public:
  // Makes the runner of a static specialization of the graph; a runner that
  // plans an arena places it with `place`.
  using Factory = std::function<std::shared_ptr<const GraphRunner>(
      std::shared_ptr<const Graph> specialized, const BufferPlacer& place)>;

  PerSizeRunner(std::shared_ptr<const Graph> graph, Factory factory, size_t max_sizes = 64);

  // Checks the inputs' shapes against the graph's symbolic types (an error
  // names the input, the dim and the values), then runs.
  std::vector<Tensor> run_unchecked(std::span<const Tensor> inputs) const override;
  // The static graph these inputs run (made on first use).
  std::shared_ptr<const Graph> specialized(std::span<const Tensor> inputs) const;
  // Plans the graph for inputs of these shapes now rather than at their
  // first call (a trace plans at its example's sizes, as a static graph
  // does), and says what that size's plan holds.
  RunnerStats prepare(std::span<const IntList> input_shapes) const;
  size_t num_sizes() const;
  // The first size's plan (the oldest kept); nothing planned before a size.
  RunnerStats stats() const override;
  // Peak memory over the symbols; nothing before a size was planned.
  std::optional<MemoryFormula> memory_formula() const { return placer_->formula(); }

 private:
  struct Entry {
    std::vector<int64_t> key;  // every input dim, in order
    std::shared_ptr<const Graph> graph;
    std::shared_ptr<const GraphRunner> runner;
  };
  struct Found {
    std::shared_ptr<const Graph> graph;
    std::shared_ptr<const GraphRunner> runner;
  };
  // Copies, not references: another thread may drop the entry meanwhile.
  Found entry_for(std::span<const Tensor> inputs) const;
  Found make_entry(std::vector<int64_t> key, std::span<const IntList> shapes) const;
  static void append_key(std::vector<int64_t>& key, const IntList& shape);

  std::shared_ptr<const Graph> graph_;
  Factory factory_;
  std::shared_ptr<const GraphRunner> unspecialized_;  // set: data-dependent sizes, see above
  std::shared_ptr<SymbolicPlacer> placer_;
  size_t max_sizes_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Entry>> entries_;  // most recent last
};

}  // namespace kiln::jit
