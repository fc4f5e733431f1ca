// The same graph for another batch size: the first dimension of the inputs
// changes and every node's output type is inferred again from the op table.
//
//   std::shared_ptr<Graph> g64 = jit::rebatch(compiled.graph(), 64);
//
// Traced graphs have static shapes; most models still run at any batch
// because their ops only carry the batch through (linear, conv, pooling,
// flatten, softmax over features). A graph whose shapes depend on the batch
// in another way (a reshape to a fixed shape, a sum over the batch feeding a
// view) is refused: every value must keep its shape, or keep it with the old
// batch replaced by the new one in the first dimension. The error names the
// first node that breaks that rule. A graph with symbolic sizes (core/dim.h)
// is refused, naming its first symbolic dim.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// The batch of a graph: the first dimension its inputs share (inputs of
// rank 0 aside). Throws when it has no such input or they disagree.
int64_t batch_size_of(const Graph& graph);

// Parameters and constants are shared with `graph`, not copied.
std::shared_ptr<Graph> rebatch(const Graph& graph, int64_t batch);

}  // namespace kiln::jit
