// The verifier: what every graph must satisfy, checked after every pass in
// tests and debug builds, and on every graph read from text or a file.
//
// - SSA: every value is defined once, before its uses, by an input, a
//   parameter, a constant or an earlier node of this graph;
// - use lists and node inputs agree, both ways;
// - input counts are within the op's range, and an input is absent only where
//   the op allows it;
// - attributes are complete and of the kinds the op declares, in its order;
// - input dtypes are the ones the op's kernel takes (a graph has no implicit
//   casts), and the output types equal the op table's inference (symbolic
//   dims by their canonical form: `batch*2` is `2*batch`, `batch` is not `seq`);
// - graph outputs are values of this graph; parameter names are unique and
//   not used by an input; weights and constants match their declared types;
//   only constants are wrapped numbers.
#pragma once

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// Throws kiln::Error naming the node (index and op) or value, and the
// problem, for the first one found.
void verify(const Graph& graph);

}  // namespace kiln::jit
