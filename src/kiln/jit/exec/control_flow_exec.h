// Running control-flow nodes (jit/ir/control_flow.h), in both executors.
//
// The Interpreter replays a node through kiln::cond / while_loop / scan
// with each block run by an Interpreter of its own, so autograd and an
// outer recording see what eager code would (jit/ir/control_flow.h's
// run_control_flow).
//
// A lowered plan runs a node as one step whose prepared kernel owns an
// Executable per block (its own plan and arena): a cond runs one branch
// over the step's argument views; a loop double-buffers its carried values
// in two sets of the plan's arena buffers and runs its body's plan once per
// iteration over them, so an iteration allocates nothing; a scan's step
// reads its slice of xs and writes its slice of ys in place.
//
// What stays the same over a loop's iterations (its captures: a scan's
// recurrent weight) is packed once per run, not per iteration: the kernel
// gives each capture a key for the run (executable.h), or passes on the key
// the enclosing plan has for it (a parameter's version: packed once until
// the weight changes), and its block's plan keeps packed copies by key.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kiln/jit/ir/control_flow.h"
#include "kiln/ops/op.h"

namespace kiln::jit {

class Executable;

// The arena buffers the plan step of `node` needs besides its outputs: a
// loop's second set of carried values, each of its output's type (the
// value given keys its size in a symbolic memory plan).
std::vector<const Value*> control_flow_scratch(const Node& node);

// The prepared kernel of a plan step for a control-flow node.
class ControlFlowKernel : public PreparedKernel {
 public:
  // input_keys: one per node input, or empty (Executable::run_views).
  virtual void run_keyed(const KernelArgs& args, std::span<const uint64_t> input_keys) const = 0;
  void run(const KernelArgs& args) const final { run_keyed(args, {}); }
  // The node inputs whose memory a block writes in place (batch_norm's
  // running statistics, captured): the enclosing plan treats the step as
  // writing them.
  virtual std::vector<size_t> mutated_inputs() const = 0;
  // The plan of each block, in the node's block order (for tests and dumps).
  virtual std::vector<const Executable*> blocks() const = 0;
};

// The kernel of a plan step for `node`: its arguments are the node's
// inputs, then its outputs, then the scratch buffers above. The node's
// blocks must outlive it.
std::unique_ptr<ControlFlowKernel> prepare_control_flow(const Node& node);

}  // namespace kiln::jit
