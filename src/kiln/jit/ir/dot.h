// Graphviz export: `dot -Tsvg graph.dot -o graph.svg`.
//
// One box per node, labeled with its output names, op, and output types;
// graph inputs are inverted houses, parameters cylinders, constants notes
// (with the value when it has at most 4 elements), graph outputs houses.
// There is one edge per use, labeled with the input index when the node
// takes several inputs (and the output index when the producer has several).
// A control-flow node's blocks are dashed clusters beside it, labeled with
// the block's name, their outputs feeding the node.
#pragma once

#include <string>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

std::string to_dot(const Graph& graph);

}  // namespace kiln::jit
