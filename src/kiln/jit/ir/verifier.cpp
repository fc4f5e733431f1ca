#include "kiln/jit/ir/verifier.h"

#include <optional>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {
namespace {

// Structural, never a guard: a symbolic dim matches a dim of the same
// canonical form (`batch + batch` is `2*batch`), and nothing else.
bool same_type(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && same_dims(a.shape, b.shape);
}

// Whether a tensor (a weight, a constant's data) is of the declared type.
bool holds_type(const Tensor& data, const Value& value) {
  return data.dtype() == value.dtype() && matches_shape(data.shape(), value.shape());
}

std::string attrs_text(const Attrs& attrs) {
  std::string out = "{";
  for (const auto& [name, value] : attrs.items())
    out += (out.size() > 1 ? ", " : "") + name + "=" + attr_value_to_text(value);
  return out + "}";
}

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : graph_(graph), names_(graph), nodes_(graph.nodes()) {
    for (size_t k = 0; k < nodes_.size(); ++k)
      node_index_.emplace(nodes_[k], k);
  }

  void run() {
    check_inputs();
    check_params();
    check_constants();
    check_names();
    for (size_t k = 0; k < nodes_.size(); ++k)
      check_node(k, *nodes_[k]);
    check_uses();
    check_graph_outputs();
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(const Args&... message) const {
    throw_error(ErrorKind::Runtime, str("verify: ", message...));
  }
  std::string name(const Value* value) const { return names_(value); }
  static std::string where(size_t k, const Node& node) {
    return str("node ", k, " (", node.op().name, ")");
  }

  // SSA: a value is defined once; `order_` keeps the definition order so
  // that the use-list check below walks values deterministically.
  void define(const Value* value, const std::string& where) {
    if (!defined_.insert(value).second) fail(where, ": ", name(value), " is defined twice");
    order_.push_back(value);
  }

  void check_source(const Value* value, ValueKind kind, const std::string& where) {
    if (value == nullptr) fail(where, " is absent");
    if (value->kind() != kind || value->producer() != nullptr) {
      fail(where, " (", name(value), ") is a ", to_string(value->kind()), ", listed as a ",
           to_string(kind));
    }
    if (kind != ValueKind::Constant && value->type().wrapped_number) {
      fail(where, " (", name(value), ") is marked a wrapped number; only constants can be");
    }
    define(value, where);
  }

  void check_inputs() {
    const auto& inputs = graph_.inputs();
    for (size_t k = 0; k < inputs.size(); ++k)
      check_source(inputs[k], ValueKind::Input, str("graph input ", k));
  }

  void check_params() {
    for (const Value* param : graph_.params()) {
      check_source(param, ValueKind::Param, "parameter");
      if (param->name().empty()) fail("a parameter (", name(param), ") has no name");
      const Tensor& data = param->data();
      if (data.defined() && !holds_type(data, *param)) {
        fail("parameter ", name(param), " is declared ", type_to_text(param->type()),
             " but its weight is ", short_name(data.dtype()), data.shape());
      }
    }
  }

  void check_constants() {
    for (const Value* constant : graph_.constants()) {
      check_source(constant, ValueKind::Constant, "constant");
      const Tensor& data = constant->data();
      if (!data.defined()) fail("constant ", name(constant), " has no data");
      if (!holds_type(data, *constant)) {
        fail("constant ", name(constant), " is declared ", type_to_text(constant->type()),
             " but its data is ", short_name(data.dtype()), data.shape());
      }
    }
  }

  // Parameter names are state_dict keys; an input sharing one (or another
  // input's name) could not be told apart in the text form.
  void check_names() {
    std::unordered_set<std::string> params, inputs;  // lookups only, never iterated
    for (const Value* param : graph_.params()) {
      if (!params.insert(param->name()).second) {
        fail("parameter name '", param->name(), "' is used twice");
      }
    }
    for (const Value* input : graph_.inputs()) {
      const std::string& n = input->name();
      if (n.empty()) continue;
      if (params.count(n)) fail("graph input '", n, "' has the name of a parameter");
      if (!inputs.insert(n).second) fail("two graph inputs are named '", n, "'");
    }
  }

  void check_node(size_t k, const Node& node) {
    const std::string at = where(k, node);
    if (&node.graph() != &graph_) fail(at, ": belongs to another graph");
    check_input_count(at, node);
    for (size_t i = 0; i < node.inputs().size(); ++i)
      check_node_input(at, node, i);
    check_attrs(at, node);
    check_blocks(at, node);
    const auto& outputs = node.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Value* out = outputs[i];
      if (out == nullptr) fail(at, ": output ", i, " is missing");
      if (out->kind() != ValueKind::NodeOutput || out->producer() != &node ||
          out->output_index() != i) {
        fail(at, ": output ", i, " (", name(out), ") does not record this node as its producer");
      }
      define(out, at);
    }
    check_types(at, node);
  }

  // Each block is a graph of its own, checked whole; its fit to the node
  // (what flows in and out) is check_types' control-flow rule.
  void check_blocks(const std::string& at, const Node& node) {
    if (node.num_blocks() != node.op().blocks.size()) {
      fail(at, ": has ", node.num_blocks(), " blocks, ", node.op().name, " owns ",
           node.op().blocks.size());
    }
    for (size_t b = 0; b < node.num_blocks(); ++b) {
      const Graph& block = node.block(b);
      const std::string& block_name = node.op().blocks[b];
      if (block.owner() != &node) fail(at, ": block '", block_name, "' records another owner");
      if (!block.guards().empty()) {
        fail(at, ": block '", block_name, "' has guards; a graph's guards are its top graph's");
      }
      try {
        Verifier(block).run();
      } catch (const Error& e) {
        fail(at, " block '", block_name, "': ", std::string_view(e.what()).substr(8));
      }
    }
  }

  void check_input_count(const std::string& at, const Node& node) {
    const OpDef& op = node.op();
    const int n = int(node.inputs().size());
    if (n < op.min_inputs) {
      fail(at, ": has ", n, " inputs, ", op.name, " takes at least ", op.min_inputs);
    }
    if (op.max_inputs >= 0 && n > op.max_inputs) {
      fail(at, ": has ", n, " inputs, ", op.name, " takes at most ", op.max_inputs);
    }
  }

  void check_node_input(const std::string& at, const Node& node, size_t i) {
    const Value* value = node.input(i);
    if (value == nullptr) {
      if (node.op().input_may_be_absent(i)) return;
      fail(at, ": input ", i, " is absent but ", node.op().name, " requires it");
    }
    if (!defined_.count(value)) {
      auto later = node_index_.find(value->producer());
      if (value->kind() == ValueKind::NodeOutput && later != node_index_.end()) {
        fail(at, ": input ", i, " (", name(value), ") is used before it is defined (by node ",
             later->second, ")");
      }
      fail(at, ": input ", i, " (", name(value), ") is not a value of this graph");
    }
    const auto& uses = value->uses();
    if (std::count(uses.begin(), uses.end(), Use{const_cast<Node*>(&node), i}) != 1) {
      fail(at, ": input ", i, " (", name(value), ") is not recorded once in its use list");
    }
  }

  void check_attrs(const std::string& at, const Node& node) {
    Attrs normalized;
    try {
      normalized = normalize_attrs(node.op(), node.attrs());
    } catch (const Error& e) {
      fail(at, ": ", e.what());
    }
    if (!(normalized == node.attrs())) {
      fail(at, ": attributes ", attrs_text(node.attrs()), " are not the op's complete set ",
           attrs_text(normalized));
    }
  }

  // Re-infers from the op table; this also refuses inputs of a dtype the
  // kernel does not take (eager dispatch would cast them; a graph must say so).
  void check_types(const std::string& at, const Node& node) {
    std::vector<TensorMeta> inferred;
    try {
      inferred = infer_node_types(node);
    } catch (const Error& e) {
      fail(at, ": ", e.what());
    }
    const auto& outputs = node.outputs();
    if (outputs.size() != inferred.size()) {
      fail(at, ": has ", outputs.size(), " outputs, but ", node.op().name, " gives ",
           inferred.size(), " here");
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const TensorMeta& declared = outputs[i]->type();
      if (declared.wrapped_number) {
        fail(at, ": output ", i, " (", name(outputs[i]),
             ") is marked a wrapped number; only constants can be");
      }
      if (!same_type(declared, inferred[i])) {
        fail(at, ": output ", i, " (", name(outputs[i]), ") is declared ", type_to_text(declared),
             " but ", node.op().name, " infers ", type_to_text(inferred[i]));
      }
    }
  }

  // The other direction of check_node_input: every recorded use is an input.
  void check_uses() {
    for (const Value* value : order_) {
      for (const Use& use : value->uses()) {
        auto user = node_index_.find(use.user);
        if (user == node_index_.end()) {
          fail(name(value), " is used by a node that is not in this graph");
        }
        const Node& node = *use.user;
        if (use.index >= node.inputs().size() || node.input(use.index) != value) {
          fail(name(value), " lists a use as input ", use.index, " of ", where(user->second, node),
               ", which takes another value there");
        }
      }
    }
  }

  void check_graph_outputs() {
    const auto& outputs = graph_.outputs();
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k] == nullptr) fail("graph output ", k, " is absent");
      if (!defined_.count(outputs[k])) {
        fail("graph output ", k, " (", name(outputs[k]), ") is not a value of this graph");
      }
    }
  }

  const Graph& graph_;
  ValueNames names_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, size_t> node_index_;  // lookups only, never iterated
  std::unordered_set<const Value*> defined_;            // lookups only, never iterated
  std::vector<const Value*> order_;
};

}  // namespace

void verify(const Graph& graph) {
  // Symbolic decisions are re-taken from the graph's guards, unless a trace
  // is deciding them from example values right now.
  std::optional<GraphShapeScope> facts;
  if (!current_shape_env()) facts.emplace(graph);
  Verifier(graph).run();
}

}  // namespace kiln::jit
