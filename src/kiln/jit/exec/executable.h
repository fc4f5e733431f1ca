// Executable: a graph lowered once to a flat plan (see plan.h) and run many
// times, from any number of threads at once.
//
//   auto graph = std::make_shared<jit::Graph>();
//   ... build it (or trace it), bind the parameters' tensors ...
//   jit::Executable exe(graph);
//   std::vector<Tensor> y = exe.run({x});   // same values as eager, bit for bit
//
// What run() does per call: checks the inputs, takes a workspace (its arena
// holds every intermediate), patches the input and output pointers into the
// prepared kernel arguments, and runs the steps. No op dispatch, attribute
// normalization, shape inference, map lookup or Tensor per step; the only
// allocations are the result tensors (run_into has none).
//
// Semantics, and where they differ from eager:
// - Results are fresh tensors: never an input, a parameter, a constant or a
//   view of one (a graph that returns an input returns a copy of it), so the
//   caller may keep or write them without touching the model.
// - Parameters and constants are referenced, not copied: an optimizer's
//   in-place update is seen by the next call. Outputs named in `into` at
//   construction are the exception to fresh results: they are written into
//   their parameter's memory (a compiled training step's new weights), and
//   that parameter's tensor is the result. Rebinding a parameter to a
//   new tensor (Value::set_data) after compiling is not seen; compile again.
// - Weights that kiln's GEMM reads (linear layers at batch > 1) are kept
//   packed across calls and packed again when their storage's version
//   counter moves, which every kiln in-place op does. A write that bypasses
//   kiln ops (through data_ptr(), or NumPy sharing the memory) must call
//   bump_version() for the next call to see it.
// - Inputs may have any strides. The plan assumes contiguous inputs; an input
//   with other strides takes a slower path that re-derives the views over it
//   and runs the plain kernels where a prepared one assumed those strides.
// - Random ops draw from the default generator per call, as eager does (same
//   sequence for the same seed). batch_norm in training updates its running
//   statistics in place and bumps their version counters, as eager does.
// - No autograd: results do not require grad. Calls are independent of grad
//   mode; training through a compiled graph is not supported yet.
// - A graph with a node whose output size the data decides (nonzero,
//   unique: Note [Data-dependent output shapes]) has no plan: an arena
//   cannot be placed before the run decides its sizes. Such an Executable
//   runs the graph through the Interpreter, allocating at run time, with
//   the Interpreter's semantics (stats() says no plan; run_into and
//   run_views refuse).
// - The graph must not change after compiling (the executable keeps it for
//   graph() and for its parameter tensors, and assumes it is frozen).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "kiln/core/engine_var.h"
#include "kiln/jit/exec/plan.h"
#include "kiln/jit/exec/runner.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

class Workspace;

class Executable final : public GraphRunner {
 public:
  // Lowers the graph: checks it, places every value, prepares the kernels
  // (oneDNN primitives are created here). Throws kiln::Error naming the node
  // when the graph cannot run.
  // `place` chooses the arena offsets (plan.h's BufferPlacer).
  explicit Executable(std::shared_ptr<const Graph> graph,
                      std::span<const OutputIntoParam> into = {}, const BufferPlacer& place = {});
  ~Executable() override;
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // One result per graph output, freshly allocated. Inputs are checked
  // against the graph inputs (count, dtype, shape).
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) const {
    return run(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }
  // run() without the input check, for a caller that made it (GraphRunner).
  std::vector<Tensor> run_unchecked(std::span<const Tensor> inputs) const override;
  // Writes the results into `outputs` (each of its output's exact dtype and
  // shape; any strides). They must not share memory with each other, the
  // inputs, or the parameters and constants. Allocates nothing when the
  // outputs are contiguous. An output written into a parameter must be
  // that parameter's tensor. The outputs' version counters move, as for
  // any in-place write.
  void run_into(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const;

  // For a control-flow step of an enclosing plan (control_flow_exec.h): runs
  // on that plan's argument views, the inputs of the graph's input types and
  // the outputs contiguous and apart from them. Nothing is checked, and
  // nothing is allocated when the inputs have the strides this plan assumed.
  // input_keys: empty, or one per input; a nonzero key promises that every
  // run given that key for that input sees the same memory with the same
  // contents, so steps keep a packed copy of a weight read from it (see
  // fresh_input_key).
  void run_views(std::span<const cpu::StridedView> inputs,
                 std::span<const cpu::StridedView> outputs,
                 std::span<const uint64_t> input_keys = {}) const;

  const Graph& graph() const { return *graph_; }
  const Plan& plan() const { return plan_; }
  RunnerStats stats() const override;
  // Workspaces made so far: at most the number of calls that ever ran at once.
  size_t num_workspaces() const;

 private:
  void check_inputs(std::span<const Tensor> inputs) const;
  void check_plan(const char* what) const;
  void check_outputs(std::span<const Tensor> outputs, std::span<const Tensor> inputs) const;
  void execute(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const;
  // `versions`: the held tensors' version counters to run with (empty: now).
  void run_plan(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                std::span<const uint64_t> versions = {}) const;
  std::vector<uint64_t> held_versions() const;
  void bump_mutated(std::span<const Tensor> inputs) const;
  void wait_for_held() const;
  void run_steps(Workspace& ws, bool inputs_strided, std::span<const uint64_t> input_keys) const;
  void run_step(const Step& step, Workspace& ws, bool inputs_strided,
                std::span<const uint64_t> input_keys, bool profiling, int team) const;
  void run_control_flow(const Step& step, const KernelArgs& args, Workspace& ws,
                        std::span<const uint64_t> input_keys) const;
  std::unique_ptr<Workspace> take_workspace() const;
  void give_back(std::unique_ptr<Workspace> ws) const;

  std::shared_ptr<const Graph> graph_;
  Plan plan_;
  std::shared_ptr<const GraphRunner> runs_at_run_time_;  // set: no plan, see above
  // Free workspaces; a call takes one and gives it back, so concurrent calls
  // never share one. The lock is held only to pop or push.
  // Written by each run queued to the engine (Note [A compiled run as one
  // engine op]); a plan calling Python (custom_function) or holding
  // collectives (all_reduce_start/_wait) is never queued.
  mutable EngineVarSlot runs_var_;
  // A step whose op runs where it was issued (OpDef::runs_where_issued:
  // custom_function, the collectives): the whole run does.
  bool runs_where_issued_ = false;
  // A step draws from the default generator: a queued run writes its
  // variable, so draws keep issue order. Plans without one do not, or every
  // compiled run would wait for every other (and for random eager ops).
  bool draws_random_ = false;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Workspace>> pool_;
  mutable size_t workspaces_made_ = 0;
};

// Input keys (Executable::run_views): a key no other run has had, for a
// loop's capture over one run; and the key of a held tensor at a version.
// The two never meet: made keys have the top bit set.
uint64_t fresh_input_key();
inline uint64_t version_key(uint64_t version) {
  return version + 1;
}

}  // namespace kiln::jit
