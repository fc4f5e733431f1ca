#include "kiln/jit/ir/dot.h"

#include <unordered_map>

#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/text_format.h"

namespace kiln::jit {
namespace {

constexpr int64_t kInlineConstantElements = 4;

// A DOT string literal; "\n" in `text` becomes a line break of the label.
std::string dot_label(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

class DotWriter {
 public:
  // `prefix` keeps the ids of a block's items apart from its enclosing
  // graph's; `indent` nests its lines.
  DotWriter(const Graph& graph, std::string prefix, std::string indent)
      : graph_(graph), names_(graph), prefix_(std::move(prefix)), indent_(std::move(indent)) {}

  std::string run() {
    return "digraph graph_ir {\n  node [fontname=\"monospace\"];\n" + body() + "}\n";
  }

  // The graph's items, one line each.
  std::string body() {
    write_sources(graph_.inputs(), "in", "invhouse");
    write_sources(graph_.params(), "p", "cylinder");
    write_sources(graph_.constants(), "c", "note");
    const auto nodes = graph_.nodes();
    for (size_t k = 0; k < nodes.size(); ++k)
      write_node(k, *nodes[k]);
    write_graph_outputs();
    return out_;
  }

 private:
  std::string source_label(const Value& value) const {
    std::string label = names_(&value) + "\n" + type_to_text(value.type());
    if (value.kind() != ValueKind::Constant || !value.data().defined()) return label;
    return label + "\n" + constant_data_to_text(value.data(), kInlineConstantElements);
  }

  void write_sources(const std::vector<Value*>& values, const std::string& prefix,
                     const std::string& shape) {
    for (size_t k = 0; k < values.size(); ++k) {
      std::string id = prefix_ + str(prefix, k);
      ids_.emplace(values[k], id);
      out_ += indent_ + id + " [shape=" + shape + ", label=" + dot_label(source_label(*values[k])) +
              "];\n";
    }
  }

  void write_node(size_t k, const Node& node) {
    std::string id = prefix_ + str("n", k);
    std::string names, types;
    for (const Value* out : node.outputs()) {
      ids_.emplace(out, id);
      names += (names.empty() ? "" : ", ") + names_(out);
      types += '\n';
      types += type_to_text(out->type());
    }
    std::string label = (names.empty() ? "" : names + " = ") + node.op().name + types;
    out_ += indent_ + id + " [shape=box, label=" + dot_label(label) + "];\n";
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      if (const Value* in = node.input(i)) write_edge(in, id, node.inputs().size() > 1, i);
    }
    for (size_t b = 0; b < node.num_blocks(); ++b)
      write_block(node, b, id);
  }

  // A block as a cluster beside its node; its results flow into the node.
  void write_block(const Node& node, size_t b, const std::string& node_id) {
    const std::string cluster = str(node_id, "_b", b, "_");
    const Graph& block = node.block(b);
    out_ += indent_ + "subgraph cluster_" + cluster + " {\n";
    out_ += indent_ + "  label=" + dot_label(node.op().blocks[b]) + "; style=dashed;\n";
    out_ += DotWriter(block, cluster, indent_ + "  ").body();
    out_ += indent_ + "}\n";
    for (size_t k = 0; k < block.outputs().size(); ++k)
      out_ += indent_ + cluster + str("out", k) + " -> " + node_id + " [style=dashed];\n";
  }

  void write_edge(const Value* from, const std::string& to, bool label_input, size_t input) {
    auto it = ids_.find(from);
    std::string from_id = it != ids_.end() ? it->second : "missing";
    bool label_output = from->producer() && from->producer()->outputs().size() > 1;
    std::string label;
    if (label_output) label = str("out ", from->output_index());
    if (label_output && label_input) label += " -> ";
    if (label_input) label += std::to_string(input);
    out_ += indent_ + from_id + " -> " + to;
    out_ += label.empty() ? ";\n" : " [label=" + dot_label(label) + "];\n";
  }

  void write_graph_outputs() {
    const auto& outputs = graph_.outputs();
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::string id = prefix_ + str("out", k);
      out_ += indent_ + id + " [shape=house, label=" + dot_label(str("output ", k)) + "];\n";
      write_edge(outputs[k], id, false, 0);
    }
  }

  const Graph& graph_;
  ValueNames names_;
  std::string prefix_, indent_;
  std::unordered_map<const Value*, std::string> ids_;  // lookups only, never iterated
  std::string out_;
};

}  // namespace

std::string to_dot(const Graph& graph) {
  return DotWriter(graph, "", "  ").run();
}

}  // namespace kiln::jit
