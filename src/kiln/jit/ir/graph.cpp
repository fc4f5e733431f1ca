#include "kiln/jit/ir/graph.h"

#include <algorithm>
#include <exception>
#include <unordered_map>

#include "kiln/jit/ir/size_symbols.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {

std::string to_string(ValueKind kind) {
  switch (kind) {
    case ValueKind::Input:
      return "input";
    case ValueKind::Param:
      return "param";
    case ValueKind::Constant:
      return "const";
    case ValueKind::NodeOutput:
      return "node output";
  }
  return "?";
}

bool matches_shape(const IntList& shape, const DimList& dims) {
  return shape.size() == dims.size() &&
         std::equal(shape.begin(), shape.end(), dims.begin(), [](int64_t size, const Dim& d) {
           return d.is_static() && d.static_value() == size;
         });
}

// ---------------------------------------------------------------- Value

void Value::set_data(Tensor data) {
  KILN_CHECK(kind_ == ValueKind::Param || kind_ == ValueKind::Constant,
             "only a parameter or a constant holds a tensor (", to_string(kind_), " %", id_, ")");
  KILN_CHECK_VALUE(
      !data.defined() || (data.dtype() == type_.dtype && matches_shape(data.shape(), type_.shape)),
      "value '", name_, "' is ", type_.dtype, type_.shape, ", the tensor given is ", data.dtype(),
      data.shape());
  data_ = std::move(data);
}

void Value::replace_all_uses_with(Value* other) {
  KILN_CHECK(other != this, "replace_all_uses_with: a value cannot replace itself");
  KILN_CHECK(other->graph_ == graph_, "replace_all_uses_with: %", other->id_,
             " belongs to another graph than %", id_);
  KILN_CHECK(other->type_.dtype == type_.dtype && same_dims(other->type_.shape, type_.shape),
             "replace_all_uses_with: %", id_, " is ", type_.dtype, type_.shape, " but %",
             other->id_, " is ", other->type_.dtype, other->type_.shape);
  for (const Use& use : std::vector<Use>(uses_))
    use.user->set_input(use.index, other);
  std::vector<Value*> outputs = graph_->outputs();
  std::replace(outputs.begin(), outputs.end(), this, other);
  graph_->set_outputs(std::move(outputs));
}

// ---------------------------------------------------------------- Node

void Node::set_input(size_t i, Value* value) {
  KILN_CHECK(i < inputs_.size(), op_->name, ": input ", i, " out of range (", inputs_.size(),
             " inputs)");
  KILN_CHECK(value || op_->input_may_be_absent(i), op_->name, ": input ", i,
             " is required and cannot be absent");
  KILN_CHECK(!value || value->graph_ == graph_, op_->name, ": input ", i, " (%", value->id_,
             ") is a value of another graph");
  if (Value* old = inputs_[i]) {
    auto& uses = old->uses_;
    uses.erase(std::find(uses.begin(), uses.end(), Use{this, i}));
  }
  inputs_[i] = value;
  if (value) value->uses_.push_back(Use{this, i});
}

void Node::set_block(size_t i, std::unique_ptr<Graph> block) {
  KILN_CHECK(i < blocks_.size(), op_->name, ": block ", i, " out of range (", blocks_.size(),
             " blocks)");
  KILN_CHECK(block != nullptr && block->owner_ == nullptr, op_->name,
             ": a block must be a graph of its own, owned by no other node");
  block->owner_ = this;
  blocks_[i] = std::move(block);
}

void Node::append_input(Value* value) {
  KILN_CHECK(value != nullptr && value->graph_ == graph_, op_->name,
             ": an appended input must be a value of the node's graph");
  inputs_.push_back(value);
  value->uses_.push_back(Use{this, inputs_.size() - 1});
}

void Node::erase_input(size_t i) {
  KILN_CHECK(i < inputs_.size(), op_->name, ": input ", i, " out of range (", inputs_.size(),
             " inputs)");
  set_input_unchecked_absent(i);
  inputs_.erase(inputs_.begin() + std::ptrdiff_t(i));
  for (size_t j = i; j < inputs_.size(); ++j) {
    if (!inputs_[j]) continue;
    auto& uses = inputs_[j]->uses_;
    *std::find(uses.begin(), uses.end(), Use{this, j + 1}) = Use{this, j};
  }
}

void Node::set_input_unchecked_absent(size_t i) {
  if (Value* old = inputs_[i]) {
    auto& uses = old->uses_;
    uses.erase(std::find(uses.begin(), uses.end(), Use{this, i}));
  }
  inputs_[i] = nullptr;
}

void Node::set_attrs(const Attrs& attrs) {
  attrs_ = normalize_attrs(*op_, attrs);
}

// ---------------------------------------------------------------- Graph

std::vector<TensorMeta> infer_types(const OpDef& op, const std::vector<Value*>& inputs,
                                    const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i] || op.input_may_be_absent(i), op.name, ": input ", i,
                     " is required but was not given");
    metas.push_back(inputs[i] ? inputs[i]->type() : TensorMeta{DType::Float32, {}, false, false});
  }
  InferResult inferred = infer_meta(op, metas, attrs);
  for (size_t i = 0; i < inferred.input_dtypes.size(); ++i) {
    KILN_CHECK_TYPE(!inputs[i] || inputs[i]->dtype() == inferred.input_dtypes[i], op.name,
                    ": input ", i, " is ", inputs[i]->dtype(), " but the kernel takes ",
                    inferred.input_dtypes[i], " (a graph needs an explicit cast node)");
  }
  for (TensorMeta& m : inferred.outputs) {
    m.wrapped_number = false;
    m.defined = true;
  }
  return inferred.outputs;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> map;
  auto copy_value = [&](const Value* v) {
    Value* c = copy->new_value(v->kind_, v->type_);
    c->name_ = v->name_;
    c->data_ = v->data_;
    map[v] = c;
    return c;
  };
  for (const Value* v : inputs_)
    copy->inputs_.push_back(copy_value(v));
  for (const Value* v : params_)
    copy->params_.push_back(copy_value(v));
  for (const Value* v : constants_)
    copy->constants_.push_back(copy_value(v));
  for (const auto& node : nodes_) {
    std::vector<Value*> ins;
    for (const Value* v : node->inputs_)
      ins.push_back(v ? map.at(v) : nullptr);
    std::vector<TensorMeta> types;
    for (const Value* v : node->outputs_)
      types.push_back(v->type_);
    std::vector<std::unique_ptr<Graph>> blocks;
    for (const auto& block : node->blocks_)
      blocks.push_back(block->clone());
    Node* n = copy->insert_at(copy->nodes_.size(), *node->op_, std::move(ins), node->attrs_,
                              std::move(types), std::move(blocks));
    for (size_t i = 0; i < n->outputs_.size(); ++i)
      map[node->outputs_[i]] = n->outputs_[i];
  }
  std::vector<Value*> outs;
  for (const Value* v : outputs_)
    outs.push_back(map.at(v));
  copy->outputs_ = std::move(outs);
  copy->guards_ = guards_;
  return copy;
}

void Graph::add_guard(ShapeGuard guard) {
  if (std::find(guards_.begin(), guards_.end(), guard) != guards_.end()) return;
  guards_.push_back(std::move(guard));
}

std::vector<std::string> Graph::symbols() const {
  DimList all;
  for (const Value* v : inputs_)
    all.insert(all.end(), v->shape().begin(), v->shape().end());
  return symbols_of(all);
}

std::optional<SymbolicSite> first_symbolic(const Graph& graph) {
  for (const Value* input : graph.inputs()) {
    if (!is_static(input->shape())) return SymbolicSite{input, nullptr, ""};
  }
  for (const Node* node : graph.nodes()) {
    for (const Value* output : node->outputs()) {
      if (!is_static(output->shape())) return SymbolicSite{output, nullptr, ""};
    }
    for (const auto& [name, value] : node->attrs().items()) {
      if (attr_is_symbolic(value)) return SymbolicSite{nullptr, node, name};
    }
  }
  return std::nullopt;
}

std::map<std::string, int64_t> Graph::fixed_symbols() const {
  std::map<std::string, int64_t> fixed;
  for (const ShapeGuard& g : guards_) {
    if (g.relation != ShapeGuard::Relation::Eq) continue;
    if (std::string s = lone_symbol(Dim(g.lhs)); !s.empty() && g.rhs.is_constant())
      fixed.emplace(s, g.rhs.constant());
    if (std::string s = lone_symbol(Dim(g.rhs)); !s.empty() && g.lhs.is_constant())
      fixed.emplace(s, g.lhs.constant());
  }
  return fixed;
}

GraphShapeScope::GraphShapeScope(const Graph& graph)
    : outer_(current_shape_env()), exceptions_(std::uncaught_exceptions()), scope_(&env_) {
  for (const ShapeGuard& g : graph.guards())
    env_.add_guard(g);
  if (!outer_ || !outer_->assumes_undecided()) return;
  for (const ShapeGuard& g : outer_->guards())
    env_.add_guard(g);
  env_.set_assume_undecided(true);
  env_.set_context(outer_->context());
}

GraphShapeScope::~GraphShapeScope() {
  if (!env_.assumes_undecided() || std::uncaught_exceptions() > exceptions_) return;
  for (const ShapeGuard& g : env_.guards())
    outer_->add_guard(g);
}

GraphAssumptions::GraphAssumptions(Graph& graph, std::string reason)
    : graph_(graph), scope_(&env_) {
  for (const ShapeGuard& g : graph.guards())
    env_.add_guard(g);
  env_.set_assume_undecided(true);
  env_.set_context(std::move(reason));
}

void GraphAssumptions::commit() {
  for (const ShapeGuard& g : env_.guards())
    graph_.add_guard(g);
}

Value* Graph::new_value(ValueKind kind, TensorMeta type) {
  type.defined = true;
  values_.push_back(
      std::unique_ptr<Value>(new Value(this, kind, std::move(type), next_value_id_++)));
  return values_.back().get();
}

Value* Graph::add_input(TensorMeta type, std::string name) {
  type.wrapped_number = false;
  Value* v = new_value(ValueKind::Input, std::move(type));
  v->name_ = std::move(name);
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_param(std::string name, TensorMeta type, Tensor data) {
  KILN_CHECK_VALUE(!name.empty(), "a graph parameter needs a name");
  KILN_CHECK_VALUE(find_param(name) == nullptr, "graph parameter '", name, "' already exists");
  type.wrapped_number = false;
  Value* v = new_value(ValueKind::Param, std::move(type));
  v->name_ = std::move(name);
  v->set_data(std::move(data));
  params_.push_back(v);
  return v;
}

Value* Graph::add_constant(Tensor data, bool wrapped_number) {
  KILN_CHECK_VALUE(data.defined(), "a graph constant needs a tensor");
  Value* v = new_value(ValueKind::Constant,
                       TensorMeta{data.dtype(), to_dims(data.shape()), wrapped_number});
  v->data_ = std::move(data);
  constants_.push_back(v);
  return v;
}

void Graph::reorder_inputs(std::vector<Value*> order) {
  std::vector<Value*> sorted = order, current = inputs_;
  std::sort(sorted.begin(), sorted.end());
  std::sort(current.begin(), current.end());
  KILN_CHECK(sorted == current, "reorder_inputs: the order must list each input once");
  inputs_ = std::move(order);
}

void Graph::erase_value(std::vector<Value*>& list, const Value* value) {
  list.erase(std::remove(list.begin(), list.end(), value), list.end());
}

void Graph::remove_unused(Value* value) {
  KILN_CHECK(value->graph_ == this, "remove_unused: %", value->id_, " is not in this graph");
  KILN_CHECK(value->kind_ != ValueKind::NodeOutput, "remove_unused: %", value->id_,
             " is a node output; erase its node instead");
  KILN_CHECK(value->uses_.empty() && output_uses(value) == 0, "remove_unused: %", value->id_,
             " still has uses");
  erase_value(inputs_, value);
  erase_value(params_, value);
  erase_value(constants_, value);
  values_.erase(std::find_if(values_.begin(), values_.end(),
                             [&](const auto& p) { return p.get() == value; }));
}

Node* Graph::insert_at(size_t position, const OpDef& op, std::vector<Value*> inputs,
                       const Attrs& attrs, std::vector<TensorMeta> output_types,
                       std::vector<std::unique_ptr<Graph>> blocks) {
  // Checked before any use is recorded, so a refused node leaves no trace.
  KILN_CHECK(blocks.size() == op.blocks.size(), op.name, ": the op owns ", op.blocks.size(),
             " sub-graphs, ", blocks.size(), " were given");
  for (const auto& block : blocks) {
    KILN_CHECK(block != nullptr && block->owner_ == nullptr && block.get() != this, op.name,
               ": a block must be a graph of its own, owned by no other node");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(!inputs[i] || inputs[i]->graph_ == this, op.name, ": input ", i, " (%",
               inputs[i]->id_, ") is a value of another graph");
  }
  auto node = std::unique_ptr<Node>(new Node(this, &op, attrs, next_node_id_++));
  Node* n = node.get();
  n->inputs_.resize(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]) n->set_input(i, inputs[i]);
  }
  for (size_t i = 0; i < output_types.size(); ++i) {
    Value* out = new_value(ValueKind::NodeOutput, std::move(output_types[i]));
    out->producer_ = n;
    out->output_index_ = i;
    n->outputs_.push_back(out);
  }
  for (auto& block : blocks) {
    block->owner_ = n;
    n->blocks_.push_back(std::move(block));
  }
  nodes_.insert(nodes_.begin() + std::ptrdiff_t(position), std::move(node));
  return n;
}

Node* Graph::append(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs) {
  Attrs full = with_size_symbol(*this, op, normalize_attrs(op, attrs));
  std::vector<TensorMeta> types = infer_types(op, inputs, full);
  return insert_at(nodes_.size(), op, std::move(inputs), full, std::move(types));
}

Node* Graph::insert_before(Node* position, const OpDef& op, std::vector<Value*> inputs,
                           const Attrs& attrs) {
  Attrs full = with_size_symbol(*this, op, normalize_attrs(op, attrs));
  std::vector<TensorMeta> types = infer_types(op, inputs, full);
  return insert_at(position_of(position), op, std::move(inputs), full, std::move(types));
}

Node* Graph::append_typed(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs,
                          std::vector<TensorMeta> output_types) {
  return insert_at(nodes_.size(), op, std::move(inputs), normalize_attrs(op, attrs),
                   std::move(output_types));
}

Node* Graph::append_with_blocks(const OpDef& op, std::vector<Value*> inputs, const Attrs& attrs,
                                std::vector<TensorMeta> output_types,
                                std::vector<std::unique_ptr<Graph>> blocks) {
  return insert_at(nodes_.size(), op, std::move(inputs), normalize_attrs(op, attrs),
                   std::move(output_types), std::move(blocks));
}

Node* Graph::insert_copy_before(Node* position, const Node& node, std::vector<Value*> inputs) {
  std::vector<TensorMeta> types;
  for (const Value* out : node.outputs_)
    types.push_back(out->type_);
  std::vector<std::unique_ptr<Graph>> blocks;
  for (const auto& block : node.blocks_)
    blocks.push_back(block->clone());
  return insert_at(position_of(position), *node.op_, std::move(inputs), node.attrs_,
                   std::move(types), std::move(blocks));
}

void Graph::erase(Node* node) {
  size_t position = position_of(node);  // before any change: a foreign node changes nothing
  for (Value* out : node->outputs_) {
    KILN_CHECK(out->uses_.empty() && output_uses(out) == 0, "erase: ", node->op_->name, " output %",
               out->id_, " still has uses");
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i) {
    if (Value* in = node->inputs_[i]) {
      in->uses_.erase(std::find(in->uses_.begin(), in->uses_.end(), Use{node, i}));
    }
  }
  for (Value* out : node->outputs_) {
    values_.erase(std::find_if(values_.begin(), values_.end(),
                               [&](const auto& p) { return p.get() == out; }));
  }
  nodes_.erase(nodes_.begin() + std::ptrdiff_t(position));
}

void Graph::set_outputs(std::vector<Value*> outputs) {
  for (const Value* v : outputs) {
    KILN_CHECK_VALUE(v != nullptr, "a graph output cannot be absent");
    KILN_CHECK_VALUE(v->graph_ == this, "graph output %", v->id_, " is a value of another graph");
  }
  outputs_ = std::move(outputs);
}

bool Graph::contains(const Node* node) const {
  return std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& n) { return n.get() == node; });
}

bool Graph::contains(const Value* value) const {
  return std::any_of(values_.begin(), values_.end(),
                     [&](const auto& v) { return v.get() == value; });
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_)
    out.push_back(n.get());
  return out;
}

Value* Graph::find_param(const std::string& name) const {
  for (Value* v : params_) {
    if (v->name_ == name) return v;
  }
  return nullptr;
}

size_t Graph::output_uses(const Value* value) const {
  return size_t(std::count(outputs_.begin(), outputs_.end(), value));
}

size_t Graph::position_of(const Node* node) const {
  auto it =
      std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == node; });
  KILN_CHECK(it != nodes_.end(), "node ", node->op_->name, " is not in this graph");
  return size_t(it - nodes_.begin());
}

void for_each_graph(const Graph& graph, const std::function<void(const Graph&)>& fn) {
  fn(graph);
  for (const Node* node : graph.nodes()) {
    for (size_t i = 0; i < node->num_blocks(); ++i)
      for_each_graph(static_cast<const Graph&>(node->block(i)), fn);
  }
}

void for_each_graph(Graph& graph, const std::function<void(Graph&)>& fn) {
  fn(graph);
  for (Node* node : graph.nodes()) {
    for (size_t i = 0; i < node->num_blocks(); ++i)
      for_each_graph(node->block(i), fn);
  }
}

}  // namespace kiln::jit
