// Symbolic graphs at concrete sizes.
//
//   // %x : f32[batch, 16] -> ... traced once with dynamic shapes
//   SymbolBindings b = bind_symbols(graph, {x.shape()});   // {batch: 64}
//   std::shared_ptr<Graph> g64 = specialize(graph, b);      // f32[64, 16] -> ...
//
// bind_symbols reads each symbol's value off the first input dim that is
// that symbol alone, then checks every input dim (expressions too) and the
// graph's guards against the values; a mismatch is an error naming the
// input, the dim and the values. specialize copies the graph with every
// symbol replaced by its value, so the passes, the memory planner and the
// kernels' preparation see an ordinary static graph.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

using SymbolBindings = std::map<std::string, int64_t>;

SymbolBindings bind_symbols(const Graph& graph, std::span<const IntList> input_shapes);

// Parameters and constants are shared with `graph`, not copied.
std::shared_ptr<Graph> specialize(const Graph& graph, const SymbolBindings& bindings);

}  // namespace kiln::jit
