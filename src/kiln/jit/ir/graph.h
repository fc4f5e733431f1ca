// The graph IR: SSA values typed by dtype + shape, nodes that each name one
// OpDef of the table, kept in topological order in a vector so every walk is
// deterministic. Graph inputs, named parameters (the module's weights, by
// their state_dict names) and constants are values without a producer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/op.h"

namespace kiln::jit {

class Graph;
class Node;

enum class ValueKind { Input, Param, Constant, NodeOutput };
std::string to_string(ValueKind kind);

struct Use {
  Node* user;
  size_t index;  // which input of `user`
  bool operator==(const Use&) const = default;
};

class Value {
 public:
  ValueKind kind() const { return kind_; }
  // dtype + shape (+ wrapped_number for a Python number captured as a 0-d
  // constant, which changes type promotion). `defined` is always true. The
  // dims may be symbolic (core/dim.h) in a graph traced with dynamic shapes.
  const TensorMeta& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const DimList& shape() const { return type_.shape; }
  // A parameter's state_dict name, an input's name if it has one, or "".
  const std::string& name() const { return name_; }
  // The node computing this value; null for inputs, parameters, constants.
  Node* producer() const { return producer_; }
  size_t output_index() const { return output_index_; }
  const std::vector<Use>& uses() const { return uses_; }
  // The tensor of a constant, or a parameter's weight (undefined for a
  // parameter of a graph parsed from text without its weights).
  const Tensor& data() const { return data_; }
  void set_data(Tensor data);  // a parameter's weight; shape and dtype must match
  // A number unique within the graph, in creation order (never reused).
  size_t id() const { return id_; }
  Graph& graph() const { return *graph_; }

  // Points every use of this value at `other` (same type) instead.
  void replace_all_uses_with(Value* other);

 private:
  friend class Graph;
  friend class Node;
  Value(Graph* graph, ValueKind kind, TensorMeta type, size_t id)
      : graph_(graph), kind_(kind), type_(std::move(type)), id_(id) {}

  Graph* graph_;
  ValueKind kind_;
  TensorMeta type_;
  size_t id_;
  std::string name_;
  Node* producer_ = nullptr;
  size_t output_index_ = 0;
  std::vector<Use> uses_;
  Tensor data_;
};

class Node {
 public:
  const OpDef& op() const { return *op_; }
  // Complete (normalize_attrs'ed): every attribute of the op, in its order.
  const Attrs& attrs() const { return attrs_; }
  // nullptr marks an absent optional input (linear without a bias).
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return inputs_.at(i); }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  Graph& graph() const { return *graph_; }
  // A number unique within the graph, in creation order (never reused).
  size_t id() const { return id_; }

  // The sub-graphs this node owns, one per name in op().blocks (a cond's
  // branches, a loop's condition and body, a scan's step). Each is closed:
  // it reads nothing of an enclosing graph except through its own inputs,
  // which the node's inputs feed (jit/ir/control_flow.h says how per op).
  size_t num_blocks() const { return blocks_.size(); }
  Graph& block(size_t i) const { return *blocks_.at(i); }
  // Replaces block i; the verifier checks that it fits the node.
  void set_block(size_t i, std::unique_ptr<Graph> block);

  void set_input(size_t i, Value* value);
  // Adds an input at the end / removes input i (a control-flow node's
  // captures; the verifier checks the node still fits its blocks).
  void append_input(Value* value);
  void erase_input(size_t i);
  // Re-checks the attributes against the op (normalize_attrs); output types
  // are not re-inferred (the verifier does that).
  void set_attrs(const Attrs& attrs);

 private:
  friend class Graph;
  Node(Graph* graph, const OpDef* op, Attrs attrs, size_t id)
      : graph_(graph), op_(op), attrs_(std::move(attrs)), id_(id) {}
  void set_input_unchecked_absent(size_t i);  // drops input i's use, leaving it null

  Graph* graph_;
  const OpDef* op_;
  Attrs attrs_;
  size_t id_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<std::unique_ptr<Graph>> blocks_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // A deep copy (parameter and constant tensors are shared, not copied).
  std::unique_ptr<Graph> clone() const;

  // ---- values without a producer ----
  Value* add_input(TensorMeta type, std::string name = "");
  // Names are unique among parameters (they are state_dict keys).
  Value* add_param(std::string name, TensorMeta type, Tensor data = {});
  Value* add_constant(Tensor data, bool wrapped_number = false);
  // Puts the inputs in this order (the same values, permuted).
  void reorder_inputs(std::vector<Value*> order);
  // Drops an input/parameter/constant of this graph that has no uses left.
  void remove_unused(Value* value);

  // ---- nodes ----
  // Checks the inputs and attributes against the op and infers the output
  // types from the op table (errors name the op and shapes, as in eager).
  // Every input must be a value of this graph.
  Node* append(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs = {});
  Node* insert_before(Node* position, const OpDef& op, std::vector<Value*> inputs,
                      const Attrs& attrs = {});
  // As append, with the output types given rather than inferred (the parser
  // and the tracer use it; the verifier checks them against inference).
  Node* append_typed(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs,
                     std::vector<TensorMeta> output_types);
  // A control-flow node: as append_typed, owning `blocks` (one per name in
  // op.blocks).
  Node* append_with_blocks(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs,
                           std::vector<TensorMeta> output_types,
                           std::vector<std::unique_ptr<Graph>> blocks);
  // A copy of `node` (attributes, output types, blocks cloned) over these
  // inputs, before `position`: moving nodes between graphs (inlining a
  // branch, hoisting out of a loop body).
  Node* insert_copy_before(Node* position, const Node& node, std::vector<Value*> inputs);
  // Removes a node whose outputs have no uses.
  void erase(Node* node);

  void set_outputs(std::vector<Value*> outputs);

  // ---- symbolic sizes ----
  // Facts about the size symbols a trace relied on (`seq > 128` for a
  // branch taken, `batch != 1` for a broadcast): a call must satisfy them,
  // and re-inferring the graph (verifier, passes) decides as the trace did.
  const std::vector<ShapeGuard>& guards() const { return guards_; }
  void add_guard(ShapeGuard guard);
  // The symbols the inputs' types mention, sorted.
  std::vector<std::string> symbols() const;
  bool is_symbolic() const { return !symbols().empty(); }
  // Symbols a guard fixes to one value (`features == 512`: a trace met a
  // symbolic width where a weight has a fixed one).
  std::map<std::string, int64_t> fixed_symbols() const;

  // ---- reading ----
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& params() const { return params_; }
  const std::vector<Value*>& constants() const { return constants_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Topological order.
  std::vector<Node*> nodes() const;
  // The node owning this graph as one of its blocks; null for a top graph.
  Node* owner() const { return owner_; }
  size_t num_nodes() const { return nodes_.size(); }
  Value* find_param(const std::string& name) const;  // null when absent
  // Whether `node` / `value` is (still) part of this graph: handles held by a
  // front end may outlive an erase.
  bool contains(const Node* node) const;
  bool contains(const Value* value) const;
  // How many graph outputs `value` is (outputs count as uses too).
  size_t output_uses(const Value* value) const;

 private:
  Value* new_value(ValueKind kind, TensorMeta type);
  Node* insert_at(size_t position, const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs,
                  std::vector<TensorMeta> output_types,
                  std::vector<std::unique_ptr<Graph>> blocks = {});
  size_t position_of(const Node* node) const;
  static void erase_value(std::vector<Value*>& list, const Value* value);

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, params_, constants_, outputs_;
  std::vector<ShapeGuard> guards_;
  size_t next_value_id_ = 0;
  size_t next_node_id_ = 0;
  Node* owner_ = nullptr;
  friend class Node;
};

// The one walk into sub-graphs: calls fn on `graph`, then on every block of
// its nodes and, depth first, on theirs. Printers, passes, lowering,
// autodiff and the file and ONNX writers reach nested graphs through it.
void for_each_graph(const Graph& graph, const std::function<void(const Graph&)>& fn);
void for_each_graph(Graph& graph, const std::function<void(Graph&)>& fn);

// Whether a tensor of `shape` has exactly these dims: every dim static and
// equal (a symbolic dim matches no concrete size). Allocates nothing, for
// the per-call input checks.
bool matches_shape(const IntList& shape, const DimList& dims);

// Where a graph first has a symbolic size, for writers that take only static
// graphs: an input or node output whose shape is symbolic (`value`), or an
// attribute of `node` named `attr`.
struct SymbolicSite {
  const Value* value = nullptr;
  const Node* node = nullptr;
  std::string attr;
};
std::optional<SymbolicSite> first_symbolic(const Graph& graph);

// A ShapeEnv holding a graph's guards as facts, for inferring its nodes
// again: in scope for its lifetime. Inside a GraphAssumptions scope it
// assumes as that one does and hands its assumptions on to it.
class GraphShapeScope {
 public:
  explicit GraphShapeScope(const Graph& graph);
  ~GraphShapeScope();
  GraphShapeScope(const GraphShapeScope&) = delete;
  GraphShapeScope& operator=(const GraphShapeScope&) = delete;

 private:
  ShapeEnv* outer_;  // the ShapeEnv in scope before
  int exceptions_;   // in flight at construction: none new, the assumptions stand
  ShapeEnv env_;
  ShapeEnvScope scope_;
};

// Building `graph` without example values (an ONNX import): in scope, a
// ShapeEnv holding the graph's guards as facts, in which an equality of
// sizes that shape inference needs and nothing decides is assumed
// (ShapeEnv::set_assume_undecided). commit() adds those assumptions to the
// graph's guards, `reason` naming where they were taken, for every call to
// check: `(h - 1) // 16 + 1 == 2*((h - 1) // 32) + 2` after two resizes of
// a model that takes h a multiple of 32.
class GraphAssumptions {
 public:
  GraphAssumptions(Graph& graph, std::string reason);
  GraphAssumptions(const GraphAssumptions&) = delete;
  GraphAssumptions& operator=(const GraphAssumptions&) = delete;
  void commit();

 private:
  Graph& graph_;
  ShapeEnv env_;
  ShapeEnvScope scope_;
};

// Inferred output types of `op` over these input values (absent = null).
std::vector<TensorMeta> infer_types(const OpDef& op, const std::vector<Value*>& inputs,
                                    const Attrs& attrs);

}  // namespace kiln::jit
