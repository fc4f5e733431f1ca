// The Interpreter replays a graph node by node through dispatch, so every op
// runs the same kernel as in eager code (results are bitwise equal),
// autograd records the backward as it does for eager ops, and a recorder on
// the calling thread records the replayed ops (a compiled function called
// inside a trace is inlined).
//
// A graph with nodes whose output sizes the data decides (nonzero, unique:
// Note [Data-dependent output shapes]) runs here too: each such node binds
// its size symbol when it runs, attributes that mention it are evaluated
// before their node runs, and the graph's guards on it are checked then.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/exec/runner.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

class Interpreter final : public GraphRunner {
 public:
  // Parameters are read from the graph on every run: the weights the graph
  // is bound to may change between runs (training, load_state_dict).
  // How control-flow nodes run: run_control_flow (control_flow_exec.h) by
  // default; jit/compile gives one that makes them differentiable.
  using ControlFlowRunner =
      std::function<std::vector<Tensor>(const Node&, std::span<const Tensor>,
                                        const std::vector<std::shared_ptr<const GraphRunner>>&)>;
  explicit Interpreter(std::shared_ptr<const Graph> graph, ControlFlowRunner control_flow = {});
  std::vector<Tensor> run_unchecked(std::span<const Tensor> inputs) const override;

 private:
  // One node as slot numbers: each value of the graph has a slot in a
  // per-call vector of tensors.
  struct Step {
    const OpDef* op;
    Attrs attrs;
    std::vector<int> inputs;  // -1: an absent optional input
    std::vector<int> outputs;
    std::vector<int> release;  // slots whose last use is this step
    const Node* node;          // for a control-flow node: what run_control_flow reads
    std::vector<std::shared_ptr<const GraphRunner>> blocks;  // its blocks' interpreters
    std::string binds;                                       // the size symbol it binds, or ""
  };

  void plan_releases();
  std::vector<Tensor> run_step(const Step& step, std::vector<Tensor> args,
                               std::map<std::string, int64_t>* sizes) const;
  std::map<std::string, int64_t> input_sizes(std::span<const Tensor> inputs) const;

  std::shared_ptr<const Graph> graph_;
  ControlFlowRunner control_flow_;
  size_t num_slots_ = 0;
  std::vector<int> input_slots_, output_slots_;
  std::vector<std::pair<int, const Value*>> bound_;  // parameters and constants
  std::vector<Step> steps_;
  bool binds_sizes_ = false;  // a node (or a block's) binds a size symbol
};

}  // namespace kiln::jit
