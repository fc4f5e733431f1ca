// Gradients through cond, scan and a bounded while_loop run as one unit:
// a compiled graph's control-flow node replayed by jit's Interpreter, and a
// node a recording trace (jit/trace) takes over, whose eager run keeps no
// per-op history. (Run eagerly, kiln::cond and the loops need none of this:
// autograd sees every op of the path they took.)
//
// The results get one backward node whose rule is control flow again, so a
// recorded backward branches and loops as the forward does:
// - cond: a cond over the two branches' vector-Jacobian products;
// - scan: a forward scan recomputing each step's incoming carry, then a
//   reverse scan of the step's vjp over those carries;
// - while_loop with max_iterations M: the same over M steps of "run the body
//   when the condition holds, else pass the carry on", so the steps past
//   the loop's end cost a predicate each and give back what they get.
// Nothing is saved per step: the backward recomputes the forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ops/control_flow.h"

namespace kiln {

enum class ControlFlowKind { cond, scan, while_loop };

struct ControlFlowGradSpec {
  ControlFlowKind kind = ControlFlowKind::cond;
  // cond: then, else (operands -> results); scan: the step (carry, x,
  // extra -> carry, ys); while_loop: the condition (carried, extra -> one
  // bool) and the body (carried, extra -> carried).
  std::vector<TensorsFn> blocks;
  // cond: pred, operands; scan: init, xs, extra; while_loop: carried, extra.
  // `extra` is what every step gets as is (a node's captures). The blocks
  // read nothing else that needs a gradient: they are closed, as graph
  // blocks are.
  Tensors inputs;
  size_t num_carry = 0;  // scan: init; while_loop: carried
  size_t num_xs = 0;     // scan
  bool reverse = false;  // scan
  int64_t length = 0;    // scan: the step count
  // while_loop: the bound the backward runs to; -1 (none) makes backward an
  // error naming the fix.
  int64_t max_iterations = -1;
  std::string site;  // the user's "file:line", for errors; may be empty
};

// Grad mode is on and an input requires grad.
bool control_flow_requires_grad(const Tensors& inputs);

// `results` (computed with grad mode off) as outputs of one backward node
// for `spec`: the floating ones come back as new tensors (views of the
// same data) that require grad; the rest come back as they are.
Tensors with_control_flow_history(ControlFlowGradSpec spec, const Tensors& results);

}  // namespace kiln
