// Reads the IR text form (printer.h) back into a Graph: for any graph g,
// to_text(*parse_graph(to_text(g, {.full = true}))) == to_text(g, {.full = true}).
//
// Nodes are built with Graph::append_typed, so the declared output types are
// kept as written; verify() (verifier.h) compares them with the op table's
// inference. Hand-written text may leave things out: a node whose outputs
// carry no types (`%y = relu(%x)`) gets them inferred, attributes left out
// take their defaults, node outputs may use any name, and `#` starts a
// comment. Parameters come without weights (Value::data() is undefined).
// A size (a shape's dim, an int or int[] attribute) is an integer or a size
// expression (`batch`, `2*seq`, `(h - 3) // 2 + 1`) that parse_size_expr
// (core/size_expr.h) reads; its errors point at the line:column of the fault.
//
// Errors are kiln::Error naming line:column and what was expected; no input
// crashes the parser.
#pragma once

#include <memory>
#include <string_view>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

std::unique_ptr<Graph> parse_graph(std::string_view text);

}  // namespace kiln::jit
