// The control-flow ops in the graph: how a cond, while_loop or scan node's
// inputs, blocks and outputs fit together, and the types that follow. The
// op table declares the ops (ops/control_flow.cpp: names, attributes,
// block names); graphs are this layer's, so their typing rules live here.
//
//   cond(pred, operands...)
//     then, else: graph(operands...) -> (results...)       outputs: results
//   while_loop(carried..., captures...) {num_carried, max_iterations}
//     cond: graph(carried..., captures...) -> (bool[] or bool[1])
//     body: graph(carried..., captures...) -> (carried...)  outputs: carried
//   scan(init..., xs..., captures...) {num_carry, num_xs, reverse, length}
//     step: graph(carry..., x_t..., captures...) -> (carry..., y_t...)
//     outputs: carry..., ys... (each y_t stacked: [length, y_t...])
//
// A capture is a value of the enclosing graph that a body reads (a weight,
// an activation): blocks are closed, so it enters as an input. x_t drops
// xs's leading dim; max_iterations -1 is none.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

inline bool is_control_flow(const OpDef& op) {
  return !op.blocks.empty();
}

// Checks `node` against its blocks (counts, dtypes and shapes of what flows
// between them) and returns its output types. Errors name the op, the block
// and the value.
std::vector<TensorMeta> infer_control_flow(const Node& node);

// The output types of any node: the op table's inference, or the rules
// above for a control-flow node.
std::vector<TensorMeta> infer_node_types(const Node& node);

// Where a scan's inputs and its step's outputs split.
struct ScanLayout {
  size_t num_carry, num_xs, num_captures, num_ys;
};
ScanLayout scan_layout(const Node& node);

// Block b of `node` run on these inputs (in the block's input order).
using BlockRunner = std::function<std::vector<Tensor>(size_t, const std::vector<Tensor>&)>;

// The node run through kiln::cond / while_loop / scan, each block by
// `run_block`: what the node means, whoever runs it (the Interpreter,
// evaluate below), so autograd and an outer recording see what eager code
// would.
std::vector<Tensor> run_control_flow(const Node& node, std::span<const Tensor> inputs,
                                     const BlockRunner& run_block);

// `graph` run node by node through dispatch, control-flow nodes through
// run_control_flow with their blocks evaluated the same way: the graph's
// meaning, for this layer and those that do not reach the executors (the
// recorder's backward of a control-flow node replays the blocks it
// recorded). Parameters and constants read their bound tensors.
std::vector<Tensor> evaluate(const Graph& graph, std::span<const Tensor> inputs);

}  // namespace kiln::jit
