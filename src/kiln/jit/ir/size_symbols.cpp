#include "kiln/jit/ir/size_symbols.h"

#include <set>

#include "kiln/ops/data_dependent.h"
#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

const Graph& root_of(const Graph& graph) {
  const Graph* g = &graph;
  while (g->owner() != nullptr)
    g = &g->owner()->graph();
  return *g;
}

void add_symbols(std::set<std::string>& used, const DimList& dims) {
  for (const std::string& s : symbols_of(dims))
    used.insert(s);
}

void add_symbols(std::set<std::string>& used, const SizeExpr& e) {
  for (const std::string& s : e.symbols())
    used.insert(s);
}

// Every symbol a graph and its blocks mention: types, attributes, guards,
// and the symbols their data-dependent nodes bind.
void collect_symbols(const Graph& graph, std::set<std::string>& used) {
  for_each_graph(graph, [&](const Graph& g) {
    for (const auto* list : {&g.inputs(), &g.params(), &g.constants()}) {
      for (const Value* v : *list)
        add_symbols(used, v->shape());
    }
    for (const ShapeGuard& guard : g.guards()) {
      add_symbols(used, guard.lhs);
      add_symbols(used, guard.rhs);
    }
    for (const Node* node : g.nodes()) {
      for (const Value* v : node->outputs())
        add_symbols(used, v->shape());
      for (const auto& [name, value] : node->attrs().items()) {
        if (const auto* dim = std::get_if<Dim>(&value)) add_symbols(used, {*dim});
        if (const auto* dims = std::get_if<DimList>(&value)) add_symbols(used, *dims);
      }
      if (std::string s = bound_symbol(*node); !s.empty()) used.insert(s);
    }
  });
}

}  // namespace

std::set<std::string> symbols_in(const Graph& graph) {
  std::set<std::string> used;
  collect_symbols(graph, used);
  return used;
}

Attrs with_size_symbol(const Graph& graph, const OpDef& op, Attrs attrs,
                       const std::set<std::string>& also_used) {
  const std::string stem = size_symbol_stem(op);
  if (stem.empty()) return attrs;
  if (attrs.has(kSizeSymbolAttr) && !attrs.get_string(kSizeSymbolAttr).empty()) return attrs;
  std::set<std::string> used = also_used;
  collect_symbols(root_of(graph), used);
  collect_symbols(graph, used);  // a block not yet attached to its node
  for (int64_t k = 0;; ++k) {
    std::string name = stem + std::to_string(k);
    if (used.count(name)) continue;
    attrs.set(kSizeSymbolAttr, name);
    return attrs;
  }
}

std::string bound_symbol(const Node& node) {
  if (size_symbol_stem(node.op()).empty()) return "";
  return node.attrs().get_string(kSizeSymbolAttr);
}

bool size_symbol_read_elsewhere(const Node& node) {
  const std::string symbol = bound_symbol(node);
  if (symbol.empty()) return false;
  const Graph& root = root_of(node.graph());
  bool read = false;
  for_each_graph(root, [&](const Graph& g) {
    for (const Node* other : g.nodes()) {
      if (read || other == &node) continue;
      std::set<std::string> used;
      for (const Value* v : other->outputs())
        add_symbols(used, v->shape());
      for (const auto& [name, value] : other->attrs().items()) {
        if (const auto* dim = std::get_if<Dim>(&value)) add_symbols(used, {*dim});
        if (const auto* dims = std::get_if<DimList>(&value)) add_symbols(used, *dims);
      }
      read = used.count(symbol) > 0;
    }
  });
  for (const ShapeGuard& guard : root.guards()) {
    std::set<std::string> used;
    add_symbols(used, guard.lhs);
    add_symbols(used, guard.rhs);
    read = read || used.count(symbol) > 0;
  }
  return read;
}

bool binds_size_symbols(const Graph& graph) {
  bool found = false;
  for_each_graph(graph, [&](const Graph& g) {
    for (const Node* node : g.nodes())
      found = found || !bound_symbol(*node).empty();
  });
  return found;
}

int64_t bound_value(const Node& node, std::span<const Tensor> outputs,
                    const std::map<std::string, int64_t>& known) {
  const std::string symbol = bound_symbol(node);
  KILN_ASSERT(!symbol.empty() && outputs.size() == node.outputs().size(), node.op().name,
              ": binds no size symbol, or ran with another number of outputs");
  std::optional<int64_t> value;
  std::map<std::string, int64_t> bindings = known;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const DimList& dims = node.output(i)->shape();
    const IntList& shape = outputs[i].shape();
    KILN_CHECK(shape.size() == dims.size(), node.op().name, ": output ", i, " has shape ", shape,
               ", the graph types it ", to_string(dims));
    for (size_t d = 0; d < dims.size(); ++d) {
      if (lone_symbol(dims[d]) != symbol) continue;
      KILN_CHECK(!value || *value == shape[d], node.op().name, ": ", symbol, " is ", *value,
                 " in one output and ", shape[d], " in another");
      value = shape[d];
    }
  }
  KILN_CHECK(value.has_value(), node.op().name, ": no output dim is its size symbol ", symbol);
  bindings[symbol] = *value;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK(evaluate(node.output(i)->shape(), bindings) == outputs[i].shape(), node.op().name,
               ": output ", i, " has shape ", outputs[i].shape(), ", the graph types it ",
               to_string(node.output(i)->shape()), " with ", symbol, " = ", *value);
  }
  std::vector<TensorMeta> inputs;
  for (const Value* v : node.inputs())
    inputs.push_back(v ? v->type() : TensorMeta{DType::Float32, {}, false, false});
  if (std::optional<Dim> bound = size_symbol_bound(node.op(), inputs, node.attrs())) {
    const int64_t most = evaluate({*bound}, bindings)[0];
    KILN_CHECK(*value <= most, node.op().name, ": ", symbol, " = ", *value, " exceeds its bound ",
               *bound, " = ", most);
  }
  return *value;
}

void check_guards_on(const Graph& graph, const std::string& symbol,
                     const std::map<std::string, int64_t>& known) {
  for (const ShapeGuard& guard : root_of(graph).guards()) {
    std::vector<std::string> symbols = symbols_of({Dim(guard.lhs), Dim(guard.rhs)});
    if (std::find(symbols.begin(), symbols.end(), symbol) == symbols.end()) continue;
    bool all_known = std::all_of(symbols.begin(), symbols.end(),
                                 [&](const std::string& s) { return known.count(s) > 0; });
    if (!all_known || guard.holds(known)) continue;
    std::string values;
    for (const std::string& s : symbols)
      values += str(values.empty() ? "" : ", ", s, " = ", known.at(s));
    throw_error(ErrorKind::Value,
                str("the graph was built under the guard ", guard.to_string(),
                    guard.reason.empty() ? "" : str(" (", guard.reason, ")"),
                    ", which this run breaks once ", symbol, " is known: ", values));
  }
}

}  // namespace kiln::jit
