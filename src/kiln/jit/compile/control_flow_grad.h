// Gradients through cond and scan nodes, for the Interpreter's replay (what
// graph autodiff records: autodiff.h): the ControlFlowRunner every
// Interpreter of jit/compile is made with.
//
// Replayed with inputs that require grad, a cond or scan node's results get
// one backward node whose rule is control flow again: a cond over the two
// branches' vector-Jacobian products, and for a scan a reverse scan of the
// step's vjp over the per-step carries (recomputed by a forward scan that
// also returns them). Recorded, the backward graph therefore branches and
// loops as the forward does.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kiln/jit/exec/runner.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// Whether gradients flow through this control-flow node (while_loop: not yet).
bool control_flow_has_grad(const Node& node);

// The node's results, run with `blocks` (one runner per block), carrying a
// backward node when grad mode is on and an input requires grad.
std::vector<Tensor> run_control_flow_with_grad(
    const Node& node, std::span<const Tensor> inputs,
    const std::vector<std::shared_ptr<const GraphRunner>>& blocks);

}  // namespace kiln::jit
