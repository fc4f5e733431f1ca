// kiln._C.jit.Graph / Node / Value: the graph IR as Python objects, for
// looking at a compiled graph and rewriting a copy of it (in the spirit of
// torch.fx). Each handle holds the graph it belongs to, so a Python object
// never outlives its graph; a handle to a node or value that was erased
// since raises instead of reaching freed memory.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "jit.h"
#include "kiln/autograd/autograd.h"
#include "kiln/jit/ir/dot.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/registry.h"

namespace kiln::python {
namespace {

using jit::Graph;
using jit::Node;
using jit::Value;

struct NodeRef {
  GraphRef owner;
  Node* node;
  size_t id;  // a node's id is never reused: tells a stale handle from a new node
};

struct ValueRef {
  GraphRef owner;
  Value* value;
  size_t id;  // a value's id is never reused: tells a stale handle from a new value
};

Graph& mutable_graph(const GraphRef& ref) {
  KILN_CHECK(!ref.read_only,
             "this graph belongs to a compiled function and cannot change; rewrite a copy: "
             "g = compiled.graph.clone()");
  return *ref.graph;
}

NodeRef node_ref(const GraphRef& owner, Node* node) {
  return NodeRef{owner, node, node->id()};
}

Node* live(const NodeRef& ref) {
  KILN_CHECK(ref.owner.graph->contains(ref.node) && ref.node->id() == ref.id,
             "this node was erased from its graph");
  return ref.node;
}

Value* live(const ValueRef& ref) {
  KILN_CHECK(ref.owner.graph->contains(ref.value) && ref.value->id() == ref.id,
             "this value was removed from its graph");
  return ref.value;
}

ValueRef value_ref(const GraphRef& owner, Value* value) {
  return ValueRef{owner, value, value->id()};
}

std::optional<ValueRef> maybe_value(const GraphRef& owner, Value* value) {
  if (!value) return std::nullopt;
  return value_ref(owner, value);
}

std::vector<ValueRef> value_refs(const GraphRef& owner, const std::vector<Value*>& values) {
  std::vector<ValueRef> out;
  for (Value* v : values)
    out.push_back(value_ref(owner, v));
  return out;
}

// A value given by Python for `graph`: a handle of this very graph, or None.
Value* value_in(const GraphRef& graph, const std::optional<ValueRef>& ref, const char* what) {
  if (!ref) return nullptr;
  KILN_CHECK_VALUE(ref->owner.graph == graph.graph, what, ": %", ref->id,
                   " is a value of another graph");
  return live(*ref);
}

nb::object attr_to_python(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> nb::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return nb::none();
        else if constexpr (std::is_same_v<T, IntList>)
          return nb::cast(std::vector<int64_t>(v.begin(), v.end()));
        else if constexpr (std::is_same_v<T, Dim>)
          return dim_to_python(v);
        else if constexpr (std::is_same_v<T, DimList>)
          return nb::list(dims_to_python(v));
        else
          return nb::cast(v);
      },
      value);
}

nb::dict attrs_of(const NodeRef& ref) {
  nb::dict out;
  for (const auto& [name, value] : live(ref)->attrs().items())
    out[name.c_str()] = attr_to_python(value);
  return out;
}

std::string describe(const ValueRef& ref) {
  const Value* v = live(ref);
  std::string label = v->name().empty() ? std::to_string(v->id()) : v->name();
  return "%" + label + " : " + jit::type_to_text(v->type());
}

std::string describe(const NodeRef& ref) {
  const Node* n = live(ref);
  std::string text = "<Node ";
  for (size_t i = 0; i < n->outputs().size(); ++i)
    text += (i ? ", " : "") + describe(value_ref(ref.owner, n->output(i)));
  text += " = " + n->op().name + "(";
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    const Value* in = n->input(i);
    text += (i ? ", " : "") +
            (in ? "%" + (in->name().empty() ? std::to_string(in->id()) : in->name()) : "none");
  }
  return text + ")>";
}

NodeRef insert_node(const GraphRef& ref, const std::string& op_name,
                    const std::vector<std::optional<ValueRef>>& inputs, nb::handle attrs,
                    const std::optional<NodeRef>& before) {
  Graph& graph = mutable_graph(ref);
  const OpDef& def = op(op_name);
  std::vector<Value*> values;
  for (const auto& in : inputs)
    values.push_back(value_in(ref, in, op_name.c_str()));
  Attrs typed = attrs.is_none() ? Attrs() : to_attrs(def, attrs);
  if (!before) return node_ref(ref, graph.append(def, values, typed));
  KILN_CHECK_VALUE(before->owner.graph == ref.graph, op_name,
                   ": `before` is a node of another graph");
  return node_ref(ref, graph.insert_before(live(*before), def, values, typed));
}

}  // namespace

void bind_jit_graph(nb::module_& m) {
  nb::class_<ValueRef>(m, "Value")
      .def_prop_ro("id", [](const ValueRef& r) { return live(r)->id(); })
      .def_prop_ro("name", [](const ValueRef& r) { return live(r)->name(); })
      .def_prop_ro("kind", [](const ValueRef& r) { return jit::to_string(live(r)->kind()); })
      .def_prop_ro("dtype", [](const ValueRef& r) { return live(r)->dtype(); })
      .def_prop_ro("shape", [](const ValueRef& r) { return dims_to_python(live(r)->shape()); })
      .def_prop_ro("producer",
                   [](const ValueRef& r) -> std::optional<NodeRef> {
                     Node* n = live(r)->producer();
                     if (!n) return std::nullopt;
                     return node_ref(r.owner, n);
                   })
      .def_prop_ro("uses",
                   [](const ValueRef& r) {
                     std::vector<std::pair<NodeRef, size_t>> out;
                     for (const jit::Use& use : live(r)->uses())
                       out.emplace_back(node_ref(r.owner, use.user), use.index);
                     return out;
                   })
      .def_prop_ro("data",
                   [](const ValueRef& r) -> std::optional<Tensor> {
                     const Tensor& t = live(r)->data();
                     if (!t.defined()) return std::nullopt;
                     return t;
                   })
      .def("replace_all_uses_with",
           [](const ValueRef& r, const ValueRef& other) {
             mutable_graph(r.owner);
             live(r)->replace_all_uses_with(value_in(r.owner, other, "replace_all_uses_with"));
           })
      .def("__eq__",
           [](const ValueRef& a, const ValueRef& b) {
             return a.owner.graph == b.owner.graph && a.id == b.id;
           })
      .def("__hash__", [](const ValueRef& r) { return r.id; })
      .def("__repr__", [](const ValueRef& r) { return describe(r); });

  nb::class_<NodeRef>(m, "Node")
      .def_prop_ro("op", [](const NodeRef& r) { return live(r)->op().name; })
      .def_prop_ro("inputs",
                   [](const NodeRef& r) {
                     std::vector<std::optional<ValueRef>> out;
                     for (Value* v : live(r)->inputs())
                       out.push_back(maybe_value(r.owner, v));
                     return out;
                   })
      .def_prop_ro("outputs",
                   [](const NodeRef& r) { return value_refs(r.owner, live(r)->outputs()); })
      .def_prop_ro("output",
                   [](const NodeRef& r) { return value_ref(r.owner, live(r)->output(0)); })
      .def_prop_ro("attrs", &attrs_of)
      .def(
          "set_input",
          [](const NodeRef& r, size_t index, const std::optional<ValueRef>& value) {
            mutable_graph(r.owner);
            live(r)->set_input(index, value_in(r.owner, value, "set_input"));
          },
          nb::arg("index"), nb::arg("value").none())
      .def("set_attrs",
           [](const NodeRef& r, nb::dict attrs) {
             mutable_graph(r.owner);
             Node* node = live(r);
             node->set_attrs(to_attrs(node->op(), attrs));
           })
      .def("__eq__",
           [](const NodeRef& a, const NodeRef& b) {
             return a.owner.graph == b.owner.graph && a.id == b.id;
           })
      .def("__hash__", [](const NodeRef& r) { return r.id; })
      .def("__repr__", [](const NodeRef& r) { return describe(r); });

  nb::class_<GraphRef>(m, "Graph")
      .def_prop_ro("read_only", [](const GraphRef& g) { return g.read_only; })
      .def_prop_ro("nodes",
                   [](const GraphRef& g) {
                     std::vector<NodeRef> out;
                     for (Node* n : g.graph->nodes())
                       out.push_back(node_ref(g, n));
                     return out;
                   })
      .def_prop_ro("inputs", [](const GraphRef& g) { return value_refs(g, g.graph->inputs()); })
      .def_prop_ro("params", [](const GraphRef& g) { return value_refs(g, g.graph->params()); })
      .def_prop_ro("constants",
                   [](const GraphRef& g) { return value_refs(g, g.graph->constants()); })
      .def_prop_ro("outputs", [](const GraphRef& g) { return value_refs(g, g.graph->outputs()); })
      .def_prop_ro("guards",
                   [](const GraphRef& g) {
                     std::vector<std::string> out;
                     for (const ShapeGuard& guard : g.graph->guards())
                       out.push_back(guard.to_string());
                     return out;
                   })
      .def_prop_ro(
          "fixed_sizes", [](const GraphRef& g) { return g.graph->fixed_symbols(); },
          "Size symbols a guard fixes to one value: {symbol: value}.")
      .def("find_param",
           [](const GraphRef& g, const std::string& name) {
             return maybe_value(g, g.graph->find_param(name));
           })
      .def("clone",
           [](const GraphRef& g) {
             return GraphRef{std::shared_ptr<Graph>(g.graph->clone()), false};
           })
      .def("verify", [](const GraphRef& g) { jit::verify(*g.graph); })
      .def(
          "to_text",
          [](const GraphRef& g, bool full) { return jit::to_text(*g.graph, {.full = full}); },
          nb::arg("full") = false)
      .def("to_dot", [](const GraphRef& g) { return jit::to_dot(*g.graph); })
      .def("__str__", [](const GraphRef& g) { return jit::to_text(*g.graph); })
      .def("__repr__", [](const GraphRef& g) { return jit::to_text(*g.graph); })
      .def("insert", &insert_node, nb::arg("op"), nb::arg("inputs"),
           nb::arg("attrs").none() = nb::none(), nb::arg("before").none() = nb::none(),
           "Adds a node running `op` on `inputs` (Values, None for an absent optional "
           "input), before node `before` or at the end; returns it.")
      .def(
          "constant",
          [](const GraphRef& g, const Tensor& data) {
            // A copy: the graph must not change when the caller's tensor does.
            return value_ref(g, mutable_graph(g).add_constant(clone(detach(data))));
          },
          nb::arg("data"))
      .def("erase",
           [](const GraphRef& g, const NodeRef& node) {
             KILN_CHECK_VALUE(node.owner.graph == g.graph, "erase: a node of another graph");
             mutable_graph(g).erase(live(node));
           })
      .def("remove_unused",
           [](const GraphRef& g, const ValueRef& value) {
             mutable_graph(g).remove_unused(value_in(g, value, "remove_unused"));
           })
      .def("set_outputs", [](const GraphRef& g, const std::vector<ValueRef>& outputs) {
        std::vector<Value*> values;
        for (const ValueRef& v : outputs)
          values.push_back(value_in(g, v, "set_outputs"));
        mutable_graph(g).set_outputs(std::move(values));
      });

  m.def(
      "parse_graph",
      [](const std::string& text) {
        return GraphRef{jit::parse_graph(text), false};
      },
      nb::arg("text"));
}

}  // namespace kiln::python
