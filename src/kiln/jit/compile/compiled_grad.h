// Training through a compiled graph: the forward and backward graphs of
// differentiate() (autodiff.h), optimized and lowered, and the autograd node
// that joins them to eager autograd.
//
// A call that autograd must see runs the compiled forward, which also
// returns the activations the backward reads, and hangs one backward node on
// its outputs. loss.backward() in eager code reaches that node, which runs
// the compiled backward and hands the gradients on to the inputs' history
// and the parameters' .grad, as any eager op's node does.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/jit/compile/autodiff.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/passes/pipeline.h"

namespace kiln::jit {

struct GradPlan {
  DifferentiatedGraph graphs;  // after the passes
  std::unique_ptr<Executable> forward, backward;
  PassReport forward_report, backward_report;
};

// Differentiates `graph` for the flagged inputs and parameters, optimizes
// both halves with `passes` (none when nullopt) and lowers them.
std::shared_ptr<const GradPlan> build_grad_plan(const Graph& graph, size_t num_outputs,
                                                std::span<const Tensor> example_inputs,
                                                const std::vector<bool>& input_needs_grad,
                                                const std::vector<bool>& param_needs_grad,
                                                const std::optional<PassOptions>& passes);

// Runs the plan's forward on `inputs`: every graph output (the state
// updates too, for the caller to write back), the differentiable ones with
// a backward node as their history. `params` are the original graph's
// parameters (the tensors the gradients go to).
std::vector<Tensor> run_with_grad(const std::shared_ptr<const GradPlan>& plan,
                                  std::span<const Tensor> inputs, const Graph& original);

}  // namespace kiln::jit
