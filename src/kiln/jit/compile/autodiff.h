// Graph-level reverse-mode autodiff: a forward graph split into a forward
// graph that also returns what the backward reads, and a backward graph
// from those saved values and the outputs' gradients to the gradients of
// the inputs and parameters.
//
// How: the forward graph is replayed through dispatch (the Interpreter) with
// autograd on and a recorder listening, and kiln::grad runs under the same
// recorder. Every backward op is the op table's own grad rule, so the
// recorded joint graph computes exactly what eager autograd computes. The
// joint graph is then cut: nodes the forward outputs need (and ops with side
// effects, such as batch_norm's running statistics) stay in the forward;
// the rest, the nodes the gradients need, form the backward. Values crossing
// the cut are the saved activations: only what the backward reads.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/ir/graph.h"
#include "kiln/jit/trace/report.h"

namespace kiln::jit {

// A value the backward reads from the forward: one of the forward's inputs
// (the caller's tensor) or an extra output of the forward graph.
struct SavedValue {
  bool is_input = false;
  size_t index = 0;  // input index, or index into the forward graph's outputs
};

// What one output of the backward graph is the gradient of.
struct GradTarget {
  ValueKind kind = ValueKind::Input;  // Input or Param
  size_t input = 0;                   // the input's index, for Input
  std::string param;                  // the parameter's name, for Param
};

struct DifferentiatedGraph {
  // Inputs and parameters of the original graph; outputs: the original
  // outputs, then the saved values that are not inputs.
  std::shared_ptr<Graph> forward;
  // Inputs: the saved values, then one gradient per output in grad_outputs;
  // parameters: those the backward reads (bound to the same tensors);
  // outputs: one gradient per entry of `targets`.
  std::shared_ptr<Graph> backward;
  size_t num_outputs = 0;            // the original graph's outputs
  std::vector<SavedValue> saved;     // in the backward graph's input order
  std::vector<size_t> grad_outputs;  // original outputs that carry a gradient
  std::vector<GradTarget> targets;   // inputs/parameters that get one (unused ones do not)
  std::vector<TraceWarning> warnings;
};

// Why `graph` cannot be differentiated for these flags, or "" when it can:
// an op on a path from a flagged input or parameter to a floating output
// that has no grad rule ("op 'argmax' has no grad rule"). Eager autograd
// then reports it when a backward reaches it, as it would for eager code.
std::string why_not_differentiable(const Graph& graph, const std::vector<bool>& input_needs_grad,
                                   const std::vector<bool>& param_needs_grad);

// Differentiates `graph` (its first `num_outputs` outputs; the rest are
// state updates that only run forward) with respect to the inputs and
// parameters flagged. `example_inputs` are run once (on copies of the
// parameters, with the random generator put back afterwards: nothing the
// caller can see changes). Check why_not_differentiable() first: an op
// without a grad rule here is an error.
DifferentiatedGraph differentiate(const Graph& graph, size_t num_outputs,
                                  std::span<const Tensor> example_inputs,
                                  const std::vector<bool>& input_needs_grad,
                                  const std::vector<bool>& param_needs_grad);

}  // namespace kiln::jit
