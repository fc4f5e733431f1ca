// Common-subexpression elimination:
//   %a = op(%x, %y) {attrs} ... %b = op(%x, %y) {attrs}   -> uses of %b use %a
//   %c0 = const D ... %c1 = const D (same dtype, shape, bytes)   -> uses of %c1 use %c0
//
// Nodes with effects never merge (two dropouts draw different masks), and a
// node that writes an input in place is a barrier: what is computed after it
// may read what it wrote, so it never merges with what was computed before.
// Constants merge only when neither is written in place and both are, or
// neither is, a wrapped number (a Python number promotes differently).
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "kiln/jit/ir/text_format.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/copy.h"

namespace kiln::jit {
namespace {

// Two nodes with the same key compute the same values. Attributes are
// compared by their exact text (numbers print so that they read back bit
// for bit, so 0.0 and -0.0 differ).
std::string node_key(const Node& node) {
  std::string key = node.op().name + "(";
  for (const Value* in : node.inputs())
    key += in ? std::to_string(in->id()) + "," : "none,";
  key += ")";
  for (const auto& [name, value] : node.attrs().items())
    key += " " + name + "=" + attr_value_to_text(value);
  return key;
}

// A node whose result is written in place later holds more than what it
// computed: it cannot stand for another node, nor another for it.
bool output_is_written(const Node& node, const WrittenMemory& written) {
  for (const Value* out : node.outputs()) {
    if (written.aliases(*out)) return true;
  }
  return false;
}

bool merge_nodes(Graph& graph, const WrittenMemory& written, PassContext& context) {
  std::unordered_map<std::string, Node*> seen;  // lookups only, never iterated
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (writes_inputs(*node)) seen.clear();
    if (has_effects(*node) || output_is_written(*node, written)) continue;
    if (node->num_blocks()) continue;  // equal inputs, but blocks are not compared
    auto [it, inserted] = seen.try_emplace(node_key(*node), node);
    if (inserted) continue;
    Node* earlier = it->second;
    for (size_t i = 0; i < node->outputs().size(); ++i)
      node->output(i)->replace_all_uses_with(earlier->output(i));
    context.count_rule("merge " + node->op().name);
    graph.erase(node);
    changed = true;
  }
  return changed;
}

// The bytes of a constant's data in row-major order.
std::string_view bytes_of(const Tensor& contiguous_data) {
  return {static_cast<const char*>(contiguous_data.data_ptr()),
          size_t(contiguous_data.numel()) * contiguous_data.itemsize()};
}

std::string constant_key(const Value& constant, std::string_view bytes) {
  return str(type_to_text(constant.type()), constant.type().wrapped_number ? " number " : " ",
             std::hash<std::string_view>()(bytes));
}

struct SeenConstant {
  Value* value;
  Tensor data;  // contiguous
};

bool merge_constants(Graph& graph, const WrittenMemory& written, PassContext& context) {
  // Same key: candidates to compare byte for byte (a hash may collide).
  std::unordered_map<std::string, std::vector<SeenConstant>> seen;  // lookups only
  bool changed = false;
  for (Value* constant : std::vector<Value*>(graph.constants())) {
    if (written.aliases(*constant)) continue;
    Tensor data = contiguous(constant->data());
    std::string_view bytes = bytes_of(data);
    std::vector<SeenConstant>& candidates = seen[constant_key(*constant, bytes)];
    auto same = std::find_if(candidates.begin(), candidates.end(),
                             [&](const SeenConstant& c) { return bytes_of(c.data) == bytes; });
    if (same == candidates.end()) {
      candidates.push_back({constant, data});
      continue;
    }
    constant->replace_all_uses_with(same->value);
    graph.remove_unused(constant);
    context.count_rule("merge constant");
    changed = true;
  }
  return changed;
}

}  // namespace

bool cse(Graph& graph, PassContext& context) {
  const WrittenMemory written(graph);
  bool changed = merge_constants(graph, written, context);
  changed |= merge_nodes(graph, written, context);
  return changed;
}

}  // namespace kiln::jit
