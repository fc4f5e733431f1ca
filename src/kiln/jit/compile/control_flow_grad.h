// Gradients through control-flow nodes, for the Interpreter's replay (what
// graph autodiff records: autodiff.h): the ControlFlowRunner every
// Interpreter of jit/compile is made with. Replayed with inputs that require
// grad, a cond, scan or bounded while_loop node's results get the backward
// of kiln/autograd/control_flow_grad.h, its blocks run by their runners, so
// a recorded backward branches and loops as the forward does.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kiln/jit/exec/runner.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// Whether gradients flow through this control-flow node (a while_loop: only
// given max_iterations).
bool control_flow_has_grad(const Node& node);

// The node's results, run with `blocks` (one runner per block), carrying a
// backward node when grad mode is on and an input requires grad.
std::vector<Tensor> run_control_flow_with_grad(
    const Node& node, std::span<const Tensor> inputs,
    const std::vector<std::shared_ptr<const GraphRunner>>& blocks);

}  // namespace kiln::jit
