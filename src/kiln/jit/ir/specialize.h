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

#include <functional>
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

// The graph rebuilt with new input types and attributes, every node's output
// types inferred again (specialize and rebatch are two such rewrites).
// `explain` turns an error appending a node (named by its first output) into
// the one to throw; `check` sees each old output beside its new one.
struct TypeRewrite {
  std::function<TensorMeta(const Value& input)> input_type;
  // Any value's type under the rewrite, for one that reaches into control
  // flow (its blocks' inputs and outputs); unset: control flow is refused.
  std::function<TensorMeta(const Value& value)> value_type;
  std::function<Attrs(const Node& node)> attrs;
  std::function<std::string(const std::string& node_name, const Node& node)> explain;
  std::function<void(const std::string& value_name, const Node& node, const Value& before,
                     const Value& now)>
      check;
};
std::shared_ptr<Graph> rewrite_types(const Graph& graph, const TypeRewrite& rewrite);

}  // namespace kiln::jit
