// The recorder's side of kiln::cond, while_loop and scan: one node owning
// blocks. Each block is recorded by running its function once, on the
// operands (a loop's body on the initial values, a scan's step on the first
// slice), with the recording switched to a fresh graph; a tensor of an
// enclosing graph that the function reads becomes an input of the block (a
// capture) and an input of the node. The eager values the traced code goes
// on with are what plain code would compute: the branch the predicate
// takes, the whole loop run with recording paused.
#include <algorithm>
#include <optional>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/control_flow_grad.h"
#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

// Stops recording on this thread for its lifetime (the eager run of a loop
// whose body was recorded once).
class PausedRecording {
 public:
  PausedRecording()
      : observer_(dispatch_observer()), hook_(trace_hook()), tracer_(control_flow_tracer()) {
    set_dispatch_observer(nullptr);
    set_trace_hook(nullptr);
    set_control_flow_tracer(nullptr);
  }
  ~PausedRecording() {
    set_dispatch_observer(observer_);
    set_trace_hook(hook_);
    set_control_flow_tracer(tracer_);
  }
  PausedRecording(const PausedRecording&) = delete;
  PausedRecording& operator=(const PausedRecording&) = delete;

 private:
  DispatchObserver* observer_;
  TraceHook* hook_;
  ControlFlowTracer* tracer_;
};

// A one-element bool tensor's value, read without reporting a host read:
// the recording keeps the decision in the graph.
bool truth(const Tensor& pred) {
  return *static_cast<const bool*>(pred.data_ptr());
}

std::string at(const std::source_location& where) {
  std::string site = control_flow::site(where);
  return site.empty() ? "" : " (at " + site + ")";
}

void check_branch_types(const Graph& then_graph, const Graph& else_graph,
                        const std::source_location& where) {
  const auto& a = then_graph.outputs();
  const auto& b = else_graph.outputs();
  KILN_CHECK_TYPE(a.size() == b.size(), "cond: true_fn returns ", a.size(),
                  " tensors but false_fn returns ", b.size(), at(where));
  for (size_t i = 0; i < a.size(); ++i) {
    KILN_CHECK_TYPE(a[i]->dtype() == b[i]->dtype() && same_dims(a[i]->shape(), b[i]->shape()),
                    "cond: result ", i, " is ", a[i]->dtype(), a[i]->shape(), " from true_fn but ",
                    b[i]->dtype(), b[i]->shape(), " from false_fn", at(where));
  }
}

// What a loop body or scan step returns keeps the carried types.
void check_carried_types(const std::vector<TensorMeta>& carried, const Graph& block, size_t count,
                         const char* op, const char* what, const std::source_location& where) {
  const auto& out = block.outputs();
  KILN_CHECK_TYPE(out.size() >= count, op, ": ", what, " returns ", out.size(), " tensors for ",
                  count, " carried", at(where));
  for (size_t i = 0; i < count; ++i) {
    KILN_CHECK_TYPE(
        out[i]->dtype() == carried[i].dtype && same_dims(out[i]->shape(), carried[i].shape), op,
        ": ", what, " changes carried value ", i, " from ", carried[i].dtype, carried[i].shape,
        " to ", out[i]->dtype(), out[i]->shape(), at(where));
  }
}

// With recording paused, collects the storage of every tensor made (a
// loop's intermediates, which its eager run's autograd history holds).
class CollectCreated final : public TraceHook {
 public:
  explicit CollectCreated(std::vector<Storage>& made) : made_(made), previous_(trace_hook()) {
    set_trace_hook(this);
  }
  ~CollectCreated() override { set_trace_hook(previous_); }
  void on_host_read(const Tensor&, const char*, const std::source_location&) override {}
  void on_random_draw(const char*, const std::source_location&) override {}
  void on_tensor_created(const Tensor& t) override { made_.push_back(t.storage()); }
  std::optional<DimList> symbolic_shape(const Tensor&) override { return std::nullopt; }
  void on_size_specialized(const Dim&, int64_t, const char*, const std::source_location&) override {
  }

 private:
  std::vector<Storage>& made_;
  TraceHook* previous_;
};

// Fresh copies of `tensors`, one per slot even where a tensor repeats (two
// carried values that start as one tensor evolve apart), made with
// recording paused.
Tensors copies(const Tensors& tensors, std::vector<Storage>& made) {
  PausedRecording paused;
  CollectCreated collect(made);
  Tensors out;
  for (const Tensor& t : tensors)
    out.push_back(clone(t));
  return out;
}

Tensors concat(Tensors a, const Tensors& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A recorded block as a function, for the node's backward: a copy of the
// block graph (the recording's own may change before backward runs) run
// through dispatch, so a recorded backward records what it runs.
TensorsFn replay(const Graph& block) {
  std::shared_ptr<const Graph> copy = block.clone();
  return [copy](const Tensors& inputs) { return evaluate(*copy, inputs); };
}

}  // namespace

std::vector<TensorMeta> Recorder::types_of(const Tensors& tensors) {
  std::vector<TensorMeta> types;
  for (const Tensor& t : tensors) {
    KILN_CHECK_VALUE(t.defined(), "control flow: an operand is an undefined tensor");
    types.push_back(value_of(t, /*check_stale=*/true)->type());
  }
  return types;
}

void Recorder::note_internal(const std::vector<Storage>& made, size_t depth) {
  for (const Storage& storage : made) {
    if (internal_.emplace(storage.get(), depth).second) internal_refs_.push_back(storage);
  }
}

const Value* Recorder::outside_value(const Tensor& t) const {
  for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
    auto found = frame->entries.find(t.impl());
    if (found != frame->entries.end()) return found->second.value;
    auto [first, last] = frame->by_storage.equal_range(t.storage().get());
    for (auto it = first; it != last; ++it) {
      const TensorImpl& other = *it->second;
      if (other.dtype() == t.dtype() && other.offset() == t.offset() &&
          other.shape() == t.shape() && other.strides() == t.strides())
        return frame->entries.at(it->second).value;
    }
  }
  return nullptr;
}

bool Recorder::known_outside_block(const Tensor& t) const {
  return outside_value(t) != nullptr;
}

Value* Recorder::add_block_input(TensorMeta type, const Value* outer) {
  // The enclosing graph's name for it, where it has one and the block has
  // not used it yet: %fc.weight reads better than %in3.
  std::string name;
  if (outer && (outer->kind() == ValueKind::Input || outer->kind() == ValueKind::Param)) {
    name = outer->name();
    for (const Value* input : graph_->inputs()) {
      if (input->name() == name) name.clear();
    }
  }
  Value* v = graph_->add_input(std::move(type), std::move(name));
  dynamic_.insert(v);
  return v;
}

// The block reads `t` from an enclosing graph: an input of its own, which
// the node feeds with the enclosing graph's value once the block ends.
Value* Recorder::capture(const Tensor& t) {
  const Value* outer = outside_value(t);  // null: state to bind at the top
  Value* v =
      add_block_input(outer ? outer->type() : TensorMeta{t.dtype(), to_dims(t.shape())}, outer);
  frames_.back().captured.push_back(t);
  bind(t, v);
  return v;
}

Recorder::Block Recorder::record_block(const Tensors& inputs, const std::vector<TensorMeta>& types,
                                       const TensorsFn& fn, const std::string& what) {
  accept_state_writes();
  std::vector<const Value*> outer;
  for (const Tensor& t : inputs) {
    Entry* entry = find(t);
    outer.push_back(entry ? entry->value : nullptr);
  }
  auto block = std::make_unique<Graph>();
  frames_.push_back(Frame{
      std::move(graph_), std::move(entries_), std::move(by_storage_), std::move(dynamic_), {}});
  graph_ = std::shared_ptr<Graph>(block.get(), [](Graph*) {});  // `block` owns it
  entries_.clear();
  by_storage_.clear();
  dynamic_.clear();
  auto restore = [&] {
    Frame& outer = frames_.back();
    graph_ = std::move(outer.graph);
    entries_ = std::move(outer.entries);
    by_storage_ = std::move(outer.by_storage);
    dynamic_ = std::move(outer.dynamic);
  };
  Tensors results;
  try {
    // The function gets copies: an in-place write to a carried value or an
    // operand is then a write inside the block, never into the caller's tensor.
    std::vector<Storage> made;
    Tensors working = copies(inputs, made);
    note_internal(made, frames_.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      bind(working[i], add_block_input(types[i], outer[i]));
    results = fn(working);
    std::vector<Value*> outputs;
    for (size_t i = 0; i < results.size(); ++i) {
      KILN_CHECK_VALUE(results[i].defined(), what, " returned an undefined tensor at position ", i);
      outputs.push_back(value_of(results[i], /*check_stale=*/true));
    }
    accept_state_writes();
    graph_->set_outputs(std::move(outputs));
  } catch (...) {
    restore();
    frames_.pop_back();
    throw;
  }
  restore();
  Tensors captured = std::move(frames_.back().captured);
  frames_.pop_back();
  // Constants the block no longer uses (an input replaced by a later write).
  for (Value* v : std::vector<Value*>(block->constants())) {
    if (v->uses().empty() && block->output_uses(v) == 0) block->remove_unused(v);
  }
  return Block{std::move(block), std::move(results), std::move(captured)};
}

// Blocks of one node take the same inputs: the operands, then every capture
// of any of them (an input a block does not read is just unused).
Tensors Recorder::unify_captures(std::vector<Block*> blocks, size_t num_operands) {
  Tensors all;
  for (Block* block : blocks) {
    for (const Tensor& t : block->captured) {
      bool seen = std::any_of(all.begin(), all.end(),
                              [&](const Tensor& other) { return other.impl() == t.impl(); });
      if (!seen) all.push_back(t);
    }
  }
  for (Block* block : blocks) {
    Graph& g = *block->graph;
    // The block's own captures, by tensor, in the order it made them.
    std::vector<Value*> own(g.inputs().begin() + std::ptrdiff_t(num_operands), g.inputs().end());
    std::vector<Value*> ordered(g.inputs().begin(),
                                g.inputs().begin() + std::ptrdiff_t(num_operands));
    for (const Tensor& t : all) {
      auto it = std::find_if(block->captured.begin(), block->captured.end(),
                             [&](const Tensor& c) { return c.impl() == t.impl(); });
      if (it != block->captured.end()) {
        ordered.push_back(own[size_t(it - block->captured.begin())]);
      } else {
        ordered.push_back(g.add_input(TensorMeta{t.dtype(), to_dims(t.shape())}));
      }
    }
    g.reorder_inputs(std::move(ordered));
  }
  return all;
}

Tensors Recorder::bind_results(Node* node, Tensors results) {
  KILN_ASSERT(results.size() == node->outputs().size(), node->op().name, ": ", results.size(),
              " results for ", node->outputs().size(), " outputs");
  for (size_t i = 0; i < results.size(); ++i) {
    // A result that is a tensor the recording knows (a branch returning its
    // operand, a loop that ran no iteration) is copied: binding that tensor
    // to the node's output would change what its other uses read.
    if (find(results[i]) || known_outside_block(results[i])) {
      PausedRecording paused;
      results[i] = clone(results[i]);
    }
    // Tensors the eager run made with recording paused are the code's own.
    if (born_.insert(results[i].storage().get()).second) born_refs_.push_back(results[i].storage());
    bind(results[i], node->output(i));
    dynamic_.insert(node->output(i));
  }
  return results;
}

// ---------------------------------------------------------------- cond

Tensors Recorder::cond(const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
                       const Tensors& operands, const std::source_location& where) {
  Value* pred_value = value_of(pred, /*check_stale=*/true);
  // A predicate that does not depend on the inputs is decided now, as a
  // Python `if` on it would be: the taken branch records inline.
  if (!is_dynamic(pred_value)) return truth(pred) ? true_fn(operands) : false_fn(operands);
  std::vector<TensorMeta> types = types_of(operands);
  Block then_block = record_block(operands, types, true_fn, "cond's true_fn");
  Block else_block = record_block(operands, types, false_fn, "cond's false_fn");
  check_branch_types(*then_block.graph, *else_block.graph, where);
  const Tensors captured = unify_captures({&then_block, &else_block}, operands.size());
  std::vector<Value*> inputs{pred_value};
  for (const Tensors* list : {&operands, &captured}) {
    for (const Tensor& t : *list)
      inputs.push_back(value_of(t, /*check_stale=*/true));
  }
  std::vector<TensorMeta> out_types;
  for (const Value* v : then_block.graph->outputs())
    out_types.push_back(v->type());
  const Tensors operands_and_captures = concat(operands, captured);
  const bool differentiable = control_flow_requires_grad(operands_and_captures);
  std::vector<TensorsFn> replays;
  if (differentiable) replays = {replay(*then_block.graph), replay(*else_block.graph)};
  std::vector<std::unique_ptr<Graph>> blocks;
  blocks.push_back(std::move(then_block.graph));
  blocks.push_back(std::move(else_block.graph));
  Node* node = graph_->append_with_blocks(op("cond"), std::move(inputs), {}, std::move(out_types),
                                          std::move(blocks));
  infer_control_flow(*node);  // the branches agree in symbolic types too
  Tensors results = truth(pred) ? then_block.results : else_block.results;
  if (differentiable) {
    for (Tensor& r : results)
      r = detach(r);  // the branch's own history reads the block's copies
    results = with_control_flow_history({.kind = ControlFlowKind::cond,
                                         .blocks = std::move(replays),
                                         .inputs = concat({pred}, operands_and_captures),
                                         .site = control_flow::site(where)},
                                        results);
  }
  return bind_results(node, std::move(results));
}

// ---------------------------------------------------------------- while_loop

Tensors Recorder::while_loop(const PredicateFn& cond_fn, const TensorsFn& body_fn,
                             const Tensors& carried, std::optional<int64_t> max_iterations,
                             const std::source_location& where) {
  std::vector<TensorMeta> types = types_of(carried);
  Block cond_block = record_block(
      carried, types, [&](const Tensors& values) { return Tensors{cond_fn(values)}; },
      "while_loop's cond_fn");
  control_flow::check_predicate(cond_block.results.at(0), "while_loop", where);
  Block body_block = record_block(carried, types, body_fn, "while_loop's body_fn");
  check_carried_types(types, *body_block.graph, carried.size(), "while_loop", "the body", where);
  KILN_CHECK_TYPE(body_block.graph->outputs().size() == carried.size(),
                  "while_loop: the body returns ", body_block.graph->outputs().size(),
                  " tensors for ", carried.size(), " carried", at(where));
  const Tensors captured = unify_captures({&cond_block, &body_block}, carried.size());
  const bool differentiable = control_flow_requires_grad(concat(carried, captured));
  Tensors results;
  {
    PausedRecording paused;              // the eager values: the whole loop, as plain code runs it
    std::optional<NoGradGuard> no_grad;  // the node's backward replaces the loop's history
    if (differentiable) no_grad.emplace();
    std::vector<Storage> made;
    CollectCreated collect(made);
    results = kiln::while_loop(cond_fn, body_fn, copies(carried, made), max_iterations, where);
    note_internal(made, frames_.size() + 1);
  }
  std::vector<Value*> inputs;
  for (const Tensors* list : {&carried, &captured}) {
    for (const Tensor& t : *list)
      inputs.push_back(value_of(t, /*check_stale=*/true));
  }
  std::vector<TensorsFn> replays;
  if (differentiable) replays = {replay(*cond_block.graph), replay(*body_block.graph)};
  std::vector<std::unique_ptr<Graph>> blocks;
  blocks.push_back(std::move(cond_block.graph));
  blocks.push_back(std::move(body_block.graph));
  Node* node = graph_->append_with_blocks(
      op("while_loop"), std::move(inputs),
      {{"num_carried", int64_t(carried.size())}, {"max_iterations", max_iterations.value_or(-1)}},
      types, std::move(blocks));
  infer_control_flow(*node);
  if (differentiable) {
    results = with_control_flow_history({.kind = ControlFlowKind::while_loop,
                                         .blocks = std::move(replays),
                                         .inputs = concat(carried, captured),
                                         .num_carry = carried.size(),
                                         .max_iterations = max_iterations.value_or(-1),
                                         .site = control_flow::site(where)},
                                        results);
  }
  return bind_results(node, results);
}

// ---------------------------------------------------------------- scan

ScanResult Recorder::scan(const ScanStepFn& fn, const Tensors& init, const Tensors& xs,
                          bool reverse, int64_t length, const std::source_location& where) {
  std::vector<TensorMeta> types = types_of(init);
  std::vector<TensorMeta> xs_types = types_of(xs);
  Dim steps = xs_types.empty() ? Dim(length) : xs_types[0].shape.at(0);
  // The step is recorded on one slice of each xs: the first one it takes.
  Tensors step_inputs = init;
  {
    PausedRecording paused;
    for (size_t k = 0; k < xs.size(); ++k) {
      IntList shape(xs[k].shape().begin() + 1, xs[k].shape().end());
      step_inputs.push_back(length > 0 ? select(xs[k], 0, reverse ? length - 1 : 0)
                                       : zeros(shape, xs[k].dtype()));
    }
  }
  std::vector<TensorMeta> step_types = types;
  for (TensorMeta x : xs_types) {
    x.shape.erase(x.shape.begin());
    step_types.push_back(std::move(x));
  }
  Block step = record_block(
      step_inputs, step_types,
      [&](const Tensors& values) {
        Tensors carry(values.begin(), values.begin() + std::ptrdiff_t(init.size()));
        Tensors slices(values.begin() + std::ptrdiff_t(init.size()), values.end());
        auto [next, ys] = fn(carry, slices);
        next.insert(next.end(), ys.begin(), ys.end());
        return next;
      },
      "scan's fn");
  check_carried_types(types, *step.graph, init.size(), "scan", "the step", where);
  const Tensors captured = unify_captures({&step}, step_inputs.size());
  const bool differentiable = control_flow_requires_grad(concat(concat(init, xs), captured));
  ScanResult result;
  {
    PausedRecording paused;
    std::optional<NoGradGuard> no_grad;  // the node's backward replaces the loop's history
    if (differentiable) no_grad.emplace();
    std::vector<Storage> made;
    CollectCreated collect(made);
    result = kiln::scan(fn, copies(init, made), xs, reverse, length, where);
    note_internal(made, frames_.size() + 1);
  }
  std::vector<Value*> inputs;
  for (const Tensors* list : {&init, &xs, &captured}) {
    for (const Tensor& t : *list)
      inputs.push_back(value_of(t, /*check_stale=*/true));
  }
  std::vector<TensorMeta> out_types = types;
  const auto& step_out = step.graph->outputs();
  for (size_t j = init.size(); j < step_out.size(); ++j) {
    TensorMeta y = step_out[j]->type();
    y.shape.insert(y.shape.begin(), steps);
    out_types.push_back(std::move(y));
  }
  std::vector<TensorsFn> replays;
  if (differentiable) replays = {replay(*step.graph)};
  std::vector<std::unique_ptr<Graph>> blocks;
  blocks.push_back(std::move(step.graph));
  Node* node = graph_->append_with_blocks(op("scan"), std::move(inputs),
                                          {{"num_carry", int64_t(init.size())},
                                           {"num_xs", int64_t(xs.size())},
                                           {"reverse", reverse},
                                           {"length", canonical_attr(steps)}},
                                          std::move(out_types), std::move(blocks));
  infer_control_flow(*node);
  Tensors results = result.carry;
  results.insert(results.end(), result.ys.begin(), result.ys.end());
  if (length == 0) {  // no step ran: the ys are empty, of the types the step gives
    for (size_t j = init.size(); j < step.results.size(); ++j) {
      IntList shape = step.results[j].shape();
      shape.insert(shape.begin(), 0);
      result.ys.push_back(zeros(shape, step.results[j].dtype()));
      results.push_back(result.ys.back());
    }
  }
  if (differentiable) {
    results = with_control_flow_history({.kind = ControlFlowKind::scan,
                                         .blocks = std::move(replays),
                                         .inputs = concat(concat(init, xs), captured),
                                         .num_carry = init.size(),
                                         .num_xs = xs.size(),
                                         .reverse = reverse,
                                         .length = length,
                                         .site = control_flow::site(where)},
                                        results);
  }
  results = bind_results(node, results);
  result.carry.assign(results.begin(), results.begin() + std::ptrdiff_t(init.size()));
  result.ys.assign(results.begin() + std::ptrdiff_t(init.size()), results.end());
  return result;
}

}  // namespace kiln::jit
