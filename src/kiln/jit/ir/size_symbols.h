// Size symbols that nodes bind when they run (Note [Data-dependent output
// shapes] in ops/data_dependent.h): nonzero's row count, unique's number of
// values. A graph names each such node's symbol when it appends the node;
// runners and the recorder learn its value from the node's outputs.
//
//   %i : i64[nz0, 2] = nonzero(%x) {size_symbol="nz0"}
//   %v : f32[nz0]    = index(%x, %i)   -- nz0 is bound once nonzero has run
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// The attributes of a node of `op` about to join `graph`: for an op whose
// output size is data-dependent and whose size_symbol is unset, a symbol no
// size of the graph (its enclosing graphs and blocks too) mentions yet,
// `nz0`, `nz1`, ... by the op's stem. Other attributes are returned as given.
// `also_used`: names taken elsewhere (the ONNX importer builds a block apart
// from the graphs around it, and passes theirs).
Attrs with_size_symbol(const Graph& graph, const OpDef& op, Attrs attrs,
                       const std::set<std::string>& also_used = {});
// Every symbol `graph` and its blocks mention: types, attributes, guards,
// and the symbols their nodes bind.
std::set<std::string> symbols_in(const Graph& graph);

// The symbol `node` binds, or "" when its sizes follow from its inputs'.
std::string bound_symbol(const Node& node);
// Whether the symbol `node` binds is read by anything but its own outputs:
// another value's type, an attribute, a guard (of the whole graph). Such a
// node stays even when its outputs are unused, or the symbol has no value.
bool size_symbol_read_elsewhere(const Node& node);
// Whether a node of `graph` or of its blocks binds a symbol.
bool binds_size_symbols(const Graph& graph);

// The value `node`'s run gave its symbol, read off its outputs' shapes,
// checked against the rest of each output's type (evaluated with
// `known`) and against the symbol's upper bound. An error names the node.
int64_t bound_value(const Node& node, std::span<const Tensor> outputs,
                    const std::map<std::string, int64_t>& known);

// The graph's guards (and its enclosing graphs') that mention `symbol` and
// whose every symbol `known` binds: an error naming the first that fails.
void check_guards_on(const Graph& graph, const std::string& symbol,
                     const std::map<std::string, int64_t>& known);

}  // namespace kiln::jit
