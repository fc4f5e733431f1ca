#pragma once

#include <vector>

#include "kiln/autograd/node.h"

namespace kiln {

// Runs the backward graph from `roots` seeded with `root_grads`. Returns the
// gradients that arrive at `captures` (for grad(inputs=...)); when captures
// is non-empty no leaf's .grad is written, and only the nodes that lead to
// a capture run.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots,
                                 const std::vector<Tensor>& root_grads, bool retain_graph,
                                 bool create_graph, const std::vector<Edge>& captures);

}  // namespace kiln
