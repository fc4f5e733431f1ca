#include "kiln/jit/ir/specialize.h"

#include "kiln/jit/ir/control_flow.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/jit/ir/text_format.h"
#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

std::string input_label(const Graph& graph, size_t i) {
  const std::string& name = graph.inputs()[i]->name();
  return name.empty() ? str("input ", i) : str("input ", i, " ('", name, "')");
}

// "with h = 100, w = 64: (h - 1) // 16 + 1 = 7, 2*((h - 1) // 32) + 2 = 8".
std::string broken(const ShapeGuard& guard, const SymbolBindings& bindings) {
  std::string text = "with ";
  std::vector<std::string> symbols = symbols_of({Dim(guard.lhs), Dim(guard.rhs)});
  for (size_t i = 0; i < symbols.size(); ++i)
    text += str(i ? ", " : "", symbols[i], " = ", bindings.at(symbols[i]));
  return str(text, ": ", guard.lhs, " = ", guard.lhs.evaluate(bindings), ", ", guard.rhs, " = ",
             guard.rhs.evaluate(bindings));
}

}  // namespace

SymbolBindings bind_symbols(const Graph& graph, std::span<const IntList> input_shapes) {
  const std::vector<Value*>& inputs = graph.inputs();
  KILN_CHECK_VALUE(input_shapes.size() == inputs.size(), "expected ", inputs.size(),
                   " inputs, got ", input_shapes.size());
  SymbolBindings bindings;
  // Where each symbol was bound, for the error when another input disagrees.
  std::map<std::string, std::string> bound_at;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DimList& dims = inputs[i]->shape();
    const IntList& shape = input_shapes[i];
    KILN_CHECK_VALUE(shape.size() == dims.size(), input_label(graph, i), ": expected ", dims.size(),
                     " dims ", to_string(dims), ", got shape ", shape);
    for (size_t d = 0; d < dims.size(); ++d) {
      std::string symbol = lone_symbol(dims[d]);
      if (symbol.empty()) continue;
      auto [it, inserted] = bindings.emplace(symbol, shape[d]);
      if (inserted) {
        bound_at[symbol] = str(input_label(graph, i), " dim ", d);
        continue;
      }
      KILN_CHECK_VALUE(it->second == shape[d], input_label(graph, i), " dim ", d, " is ", symbol,
                       ", which ", bound_at[symbol], " sets to ", it->second, ", but got ",
                       shape[d], " (shape ", shape, ")");
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DimList& dims = inputs[i]->shape();
    for (size_t d = 0; d < dims.size(); ++d) {
      std::vector<std::string> missing;
      if (!dims[d].is_static()) {
        for (const std::string& s : dims[d].expr().symbols()) {
          if (!bindings.count(s)) missing.push_back(s);
        }
      }
      KILN_CHECK_VALUE(missing.empty(), input_label(graph, i), " dim ", d, " is ", dims[d],
                       ", but no input dim is ", missing.empty() ? "" : missing[0],
                       " by itself, so its value is unknown");
      int64_t want =
          dims[d].is_static() ? dims[d].static_value() : dims[d].expr().evaluate(bindings);
      KILN_CHECK_VALUE(want == input_shapes[i][d], input_label(graph, i), " dim ", d, ": expected ",
                       dims[d], dims[d].is_static() ? "" : str(" = ", want), ", got ",
                       input_shapes[i][d], " (shape ", input_shapes[i], ", expected ",
                       to_string(dims), ")");
    }
  }
  for (const auto& [symbol, value] : bindings) {
    KILN_CHECK_VALUE(value >= 0, "size ", symbol, " is ", value);
  }
  for (const ShapeGuard& guard : graph.guards()) {
    // A guard on a size a node binds when it runs (nonzero's count) is
    // checked then (exec/interpreter.cpp), not from the inputs.
    std::vector<std::string> symbols = symbols_of({Dim(guard.lhs), Dim(guard.rhs)});
    bool bound = std::all_of(symbols.begin(), symbols.end(),
                             [&](const std::string& s) { return bindings.count(s) > 0; });
    if (!bound || guard.holds(bindings)) continue;
    throw_error(ErrorKind::Value, str("the graph was built under the guard ", guard.to_string(),
                                      guard.reason.empty() ? "" : str(" (", guard.reason, ")"),
                                      ", which these sizes break: ", broken(guard, bindings)));
  }
  return bindings;
}

namespace {

// A control-flow node rebuilt over its rewritten blocks: its inputs' types
// change as the enclosing graph's do, so the blocks' inputs take the same
// rewrite (a block's inputs are its node's inputs, or slices of them).
Node* rewrite_control_flow(Graph& out, const Node& node, std::vector<Value*> inputs,
                           const TypeRewrite& rewrite) {
  KILN_CHECK(rewrite.value_type, node.op().name,
             ": this rewrite of the graph's types does not reach into control flow");
  std::vector<std::unique_ptr<Graph>> blocks;
  for (size_t b = 0; b < node.num_blocks(); ++b) {
    std::shared_ptr<Graph> block = rewrite_types(node.block(b), rewrite);
    blocks.push_back(block->clone());
  }
  std::vector<TensorMeta> types;
  for (const Value* output : node.outputs())
    types.push_back(rewrite.value_type(*output));
  Node* copy = out.append_with_blocks(node.op(), std::move(inputs), rewrite.attrs(node),
                                      std::move(types), std::move(blocks));
  infer_control_flow(*copy);
  return copy;
}

}  // namespace

std::shared_ptr<Graph> rewrite_types(const Graph& graph, const TypeRewrite& rewrite) {
  auto out = std::make_shared<Graph>();
  std::unordered_map<const Value*, Value*> mapped;  // lookups only, never iterated
  for (const Value* input : graph.inputs())
    mapped[input] = out->add_input(rewrite.input_type(*input), input->name());
  for (const Value* param : graph.params())
    mapped[param] = out->add_param(param->name(), param->type(), param->data());
  for (const Value* constant : graph.constants())
    mapped[constant] = out->add_constant(constant->data(), constant->type().wrapped_number);
  for (const ShapeGuard& guard : graph.guards())
    out->add_guard(guard);

  ValueNames names(graph);
  for (const Node* node : graph.nodes()) {
    std::vector<Value*> inputs;
    for (const Value* input : node->inputs())
      inputs.push_back(input ? mapped.at(input) : nullptr);
    Node* copy = nullptr;
    try {
      copy = node->num_blocks() ? rewrite_control_flow(*out, *node, std::move(inputs), rewrite)
                                : out->append(node->op(), std::move(inputs), rewrite.attrs(*node));
    } catch (const Error& e) {
      throw Error(e.kind(), str(rewrite.explain(names(node->output()), *node), e.what()));
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      rewrite.check(names(node->output(i)), *node, *node->output(i), *copy->output(i));
      mapped[node->output(i)] = copy->output(i);
    }
  }
  std::vector<Value*> outputs;
  for (const Value* output : graph.outputs())
    outputs.push_back(mapped.at(output));
  out->set_outputs(std::move(outputs));
  return out;
}

std::shared_ptr<Graph> specialize(const Graph& graph, const SymbolBindings& bindings) {
  TypeRewrite rewrite;
  rewrite.input_type = [&](const Value& input) {
    TensorMeta type = input.type();
    type.shape = to_dims(evaluate(type.shape, bindings));
    return type;
  };
  rewrite.value_type = rewrite.input_type;
  rewrite.attrs = [&](const Node& node) { return node.attrs().evaluated(bindings); };
  rewrite.explain = [](const std::string& name, const Node& node) {
    return str(name, " = ", node.op().name, "(...) at these sizes: ");
  };
  // The symbolic type, evaluated, is what the static inference says.
  rewrite.check = [&](const std::string& name, const Node& node, const Value& before,
                      const Value& now) {
    IntList want = evaluate(before.shape(), bindings);
    KILN_CHECK(to_static(now.shape()) == want, name, " = ", node.op().name, "(...) is ",
               type_to_text(before.type()), ", which these sizes make ", want,
               ", but the op infers ", type_to_text(now.type()));
  };
  return rewrite_types(graph, rewrite);
}

}  // namespace kiln::jit
