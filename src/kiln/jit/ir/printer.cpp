#include "kiln/jit/ir/printer.h"

#include <cstring>

#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/copy.h"

namespace kiln::jit {
namespace {

// Element `i` of a contiguous tensor as text.
std::string element_text(const void* data, DType dtype, int64_t i) {
  return visit_dtype(dtype, [&](auto tag) -> std::string {
    using T = decltype(tag);
    T value;
    std::memcpy(&value, static_cast<const char*>(data) + i * int64_t(sizeof(T)), sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else if constexpr (std::is_floating_point_v<T>) {
      return format_number(value);
    } else {
      return std::to_string(value);
    }
  });
}

// Writes dimension `dim` onwards of a contiguous tensor, from element `*next`.
void write_nested(std::string& out, const void* data, DType dtype, const IntList& shape, size_t dim,
                  int64_t* next) {
  if (dim == shape.size()) {
    out += element_text(data, dtype, (*next)++);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i) out += ", ";
    write_nested(out, data, dtype, shape, dim + 1, next);
  }
  out += ']';
}

std::string node_text(const Node& node, const ValueNames& names) {
  std::string out;
  const auto& outputs = node.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) out += ", ";
    out += names(outputs[i]) + " : " + type_to_text(outputs[i]->type());
  }
  if (!outputs.empty()) out += " = ";
  out += node.op().name + "(";
  const auto& inputs = node.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) out += ", ";
    out += names(inputs[i]);  // "none" for an absent input
  }
  out += ")";
  const auto& attrs = node.attrs().items();
  if (attrs.empty()) return out;
  out += " {";
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i) out += ", ";
    out += attrs[i].first + "=" + attr_value_to_text(attrs[i].second);
  }
  return out + "}";
}

std::string constant_text(const Value& constant, const ValueNames& names,
                          const PrintOptions& options) {
  std::string out = names(&constant) + " : " + type_to_text(constant.type()) + " = ";
  out += constant.type().wrapped_number ? "number " : "const ";
  if (!constant.data().defined()) return out + "<no data>";
  return out + constant_data_to_text(constant.data(), options.full ? -1 : options.constant_limit);
}

}  // namespace

std::string constant_data_to_text(const Tensor& data, int64_t limit) {
  if (limit >= 0 && data.numel() > limit) {
    return str("<", data.numel(), " x ", short_name(data.dtype()), ">");
  }
  Tensor dense = contiguous(data);
  std::string out;
  int64_t next = 0;
  write_nested(out, dense.data_ptr(), dense.dtype(), dense.shape(), 0, &next);
  return out;
}

namespace {

// The graph's text, each line after the first indented by `indent`.
std::string graph_text(const Graph& graph, const PrintOptions& options, const std::string& indent) {
  ValueNames names(graph);
  const std::string line = indent + "  ";
  std::string out = "graph(";
  const auto& inputs = graph.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) out += ", ";
    out += names(inputs[i]) + " : " + type_to_text(inputs[i]->type());
  }
  out += ") {\n";
  for (const Value* param : graph.params())
    out += line + names(param) + " : " + type_to_text(param->type()) + " = param\n";
  for (const Value* constant : graph.constants())
    out += line + constant_text(*constant, names, options) + "\n";
  // What the sizes must satisfy for this graph to be the traced code's.
  for (const ShapeGuard& guard : graph.guards())
    out += line + "guard " + guard.to_string() +
           (guard.reason.empty() ? "" : " " + quote(guard.reason)) + "\n";
  for (const Node* node : graph.nodes()) {
    out += line + node_text(*node, names) + "\n";
    // Blocks follow their node, one level deeper, each a graph of its own.
    for (size_t b = 0; b < node->num_blocks(); ++b) {
      out += line + "  " + node->op().blocks[b] + " " +
             graph_text(node->block(b), options, line + "  ");
    }
  }
  out += line + "return (";
  const auto& outputs = graph.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) out += ", ";
    out += names(outputs[i]);
  }
  return out + ")\n" + indent + "}\n";
}

}  // namespace

std::string to_text(const Graph& graph, const PrintOptions& options) {
  return graph_text(graph, options, "");
}

std::ostream& operator<<(std::ostream& os, const Graph& graph) {
  return os << to_text(graph);
}

}  // namespace kiln::jit
