// CompiledFunction: a traced graph made callable.
//
//   CompiledFunction f = jit::trace(fn, {x});
//   std::vector<Tensor> y = f({x2});   // same dtypes and shapes as x
//   std::cout << f.graph().num_nodes();
//
// Calls that autograd must see (grad mode on and an input or parameter that
// requires grad) run a compiled forward whose outputs lead back to a
// compiled backward (compiled_grad.h): both are derived from the graph as it
// was recorded, before the passes, one pair per set of inputs and parameters
// requiring grad. A graph that cannot be differentiated (an op without a
// grad rule on the way: autodiff.h's why_not_differentiable) replays through
// dispatch instead, so eager autograd reports it where eager code would.
// Calls made while a trace records replay through dispatch (the Interpreter)
// too. Other calls go to the runner: the compiled plan (jit/exec's
// Executable) unless a runner factory is installed (set_runner_factory; an
// empty factory restores the Executable).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/jit/compile/compile_report.h"
#include "kiln/jit/compile/compiled_grad.h"
#include "kiln/jit/compile/options.h"
#include "kiln/jit/exec/runner.h"
#include "kiln/jit/trace/recorder.h"

namespace kiln::jit {

using RunnerFactory =
    std::function<std::shared_ptr<const GraphRunner>(std::shared_ptr<const Graph>)>;
// Sets how every CompiledFunction made from now on builds its runner for
// calls autograd need not see; an empty factory restores the Executable.
void set_runner_factory(RunnerFactory factory);

class CompiledFunction {
 public:
  CompiledFunction() = default;  // empty: calling it is an error
  // Optimizes the captured graph as `options` say first (by default the
  // default pipeline, which keeps eager's results bit for bit).
  explicit CompiledFunction(Capture capture, const CompileOptions& options = {});
  // A graph from elsewhere (rewritten, parsed, loaded): the first
  // `num_outputs` outputs are returned, the rest are `state_updates`. The
  // graph must not change afterwards (clone it to rewrite it).
  // unroll_loops_when_lowering: the plan runs scans with a small static trip
  // count unrolled (unroll_loops, then the default pipeline on that copy);
  // graph() keeps the loops either way. KILN_UNROLL=0 turns it off.
  CompiledFunction(std::shared_ptr<const Graph> graph, size_t num_outputs,
                   std::vector<StateUpdate> state_updates = {},
                   std::vector<GradUpdate> grad_updates = {},
                   bool unroll_loops_when_lowering = true);

  // Runs the graph on inputs of the dtypes and shapes it was traced with.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  // The same for inputs the caller already matched against the graph's
  // input types (a signature cache hit): nothing is checked again.
  std::vector<Tensor> run_matched(std::span<const Tensor> inputs) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const { return run(inputs); }

  bool defined() const { return graph_ != nullptr; }
  const Graph& graph() const;
  const std::shared_ptr<const Graph>& shared_graph() const { return graph_; }
  // The graph the plan runs: graph(), or its copy with small static loops
  // unrolled (the constructor's unroll_loops_when_lowering). A symbolic
  // graph's plans are per size; this is then graph(). Null when empty.
  const std::shared_ptr<const Graph>& lowered_graph() const { return lowered_; }
  size_t num_outputs() const { return num_outputs_; }
  const std::vector<StateUpdate>& state_updates() const { return state_updates_; }
  const std::vector<GradUpdate>& grad_updates() const { return grad_updates_; }
  const std::vector<TraceWarning>& warnings() const { return warnings_; }
  // What the passes did to the captured graph (empty when none ran).
  const PassReport& report() const { return compile_report_.passes; }
  // That, with the memory plan and the time each stage took.
  const CompileReport& compile_report() const { return compile_report_; }

  // Whether a call with these inputs replays through dispatch (see above).
  bool replays_through_dispatch(std::span<const Tensor> inputs) const;
  // Whether a call with these inputs needs a backward (see above).
  bool needs_grad(std::span<const Tensor> inputs) const;
  // The compiled forward and backward for these inputs' requires_grad
  // flags (made on first use); null when the graph cannot be differentiated
  // (why_not_differentiable); an error building it is thrown, not hidden.
  std::shared_ptr<const GradPlan> grad_plan(std::span<const Tensor> inputs) const;
  // Replaces the runner for calls autograd need not see.
  void set_runner(std::shared_ptr<const GraphRunner> runner);

  // Whether the graph has symbolic sizes (traced with dynamic shapes): it
  // runs at any sizes its inputs' types and guards admit.
  bool symbolic() const { return symbolic_; }
  // For inputs whose dtypes and ranks match: why their sizes cannot run
  // this graph (a shared size symbol differs, a guard fails), or "" when
  // they can. Sizes admitted once are remembered, so a hit checks a key.
  std::string size_mismatch(std::span<const Tensor> inputs) const;

  // A symbolic graph: plans it for these symbol values now (a traced graph
  // is planned at its example's sizes when it is made, as a static graph
  // is), and fills the report's memory numbers. Nothing for a static graph.
  void prepare(const std::map<std::string, int64_t>& sizes);
  // Peak memory as a formula over the size symbols (symbolic_memory.h);
  // nothing for a static graph or before any size was planned.
  std::optional<MemoryFormula> memory_formula() const;
  // The largest value of `symbol` whose call fits in `bytes` with the
  // weights (the formula's peak plus weights), other symbols as `others`
  // give them, within the graph's guards; nothing when none fits. An empty
  // `symbol` names the only symbol the peak depends on.
  std::optional<int64_t> max_size_for(int64_t bytes, std::string symbol = "",
                                      const std::map<std::string, int64_t>& others = {}) const;

 private:
  struct Optimized {
    Capture capture;
    std::shared_ptr<const Graph> recorded;  // before the passes
    std::optional<PassOptions> passes;
    CompileReport report;
  };
  struct GradCache;
  struct AdmittedSizes;
  static Optimized optimized(Capture capture, const CompileOptions& options);
  explicit CompiledFunction(Optimized optimized);
  void check_inputs(std::span<const Tensor> inputs) const;
  void write_back(const std::vector<Tensor>& results, std::span<const Tensor> inputs) const;

  std::shared_ptr<const Graph> graph_;
  size_t num_outputs_ = 0;
  std::vector<StateUpdate> state_updates_;
  std::vector<GradUpdate> grad_updates_;
  // The parameter each update writes (null: a state update of an input).
  std::vector<const Value*> state_targets_, grad_targets_;
  bool differentiable_ = true;
  std::vector<TraceWarning> warnings_;
  CompileReport compile_report_;
  std::shared_ptr<const GraphRunner> interpreter_;
  bool symbolic_ = false;  // the inputs have symbolic dims: one plan per size
  std::shared_ptr<const GraphRunner> runner_;
  std::shared_ptr<const Graph> lowered_;  // lowered_graph()
  // What differentiate() starts from, and the passes its halves go through.
  std::shared_ptr<const Graph> recorded_;
  std::optional<PassOptions> passes_ = PassOptions{};
  std::shared_ptr<GradCache> grad_cache_;
  std::shared_ptr<AdmittedSizes> admitted_;
};

}  // namespace kiln::jit
