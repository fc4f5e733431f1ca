#include "kiln/jit/compile/autodiff.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/control_flow_grad.h"
#include "kiln/jit/exec/interpreter.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/ops/copy.h"

namespace kiln::jit {
namespace {

// Puts the default generator back where it was: replaying a forward with
// dropout must not consume random numbers the caller would see.
class GeneratorPositionGuard {
 public:
  GeneratorPositionGuard() : offset_(default_generator().offset()) {}
  ~GeneratorPositionGuard() { default_generator().set_offset(offset_); }
  GeneratorPositionGuard(const GeneratorPositionGuard&) = delete;
  GeneratorPositionGuard& operator=(const GeneratorPositionGuard&) = delete;

 private:
  uint64_t offset_;
};

Tensor fresh_copy(const Tensor& t, bool requires_grad) {
  Tensor copy;
  {
    NoGradGuard no_grad;
    copy = clone(detach(t));
  }
  if (requires_grad) requires_grad_(copy);
  return copy;
}

// The values of `graph` that depend on any of `sources`.
std::unordered_set<const Value*> reachable_from(const Graph& graph,
                                                const std::unordered_set<const Value*>& sources) {
  std::unordered_set<const Value*> reached(sources.begin(), sources.end());
  for (const Node* node : graph.nodes()) {
    bool hit = false;
    for (const Value* in : node->inputs())
      hit = hit || (in && reached.count(in));
    if (!hit) continue;
    for (const Value* out : node->outputs())
      reached.insert(out);
  }
  return reached;
}

// Nodes the values `roots` need, found walking producers backwards.
std::unordered_set<const Node*> needed_by(const std::vector<const Value*>& roots) {
  std::unordered_set<const Node*> needed;
  std::vector<const Node*> work;
  auto visit = [&](const Value* v) {
    if (v == nullptr || v->producer() == nullptr) return;
    if (needed.insert(v->producer()).second) work.push_back(v->producer());
  };
  for (const Value* v : roots)
    visit(v);
  while (!work.empty()) {
    const Node* node = work.back();
    work.pop_back();
    for (const Value* in : node->inputs())
      visit(in);
  }
  return needed;
}

// Copies values and nodes of the joint graph into a new graph, parameters
// bound to the original graph's tensors (the joint graph ran on copies).
class GraphCopier {
 public:
  GraphCopier(const Graph& original) : original_(original), graph_(std::make_shared<Graph>()) {}

  void map(const Value* from, Value* to) { values_[from] = to; }
  Value* add_input(const Value* from, std::string name = "") {
    Value* v = graph_->add_input(from->type(), name.empty() ? from->name() : std::move(name));
    map(from, v);
    return v;
  }
  Value* get(const Value* from) {
    if (from == nullptr) return nullptr;
    auto found = values_.find(from);
    if (found != values_.end()) return found->second;
    Value* to = nullptr;
    if (from->kind() == ValueKind::Param) {
      const Value* bound = original_.find_param(from->name());
      KILN_ASSERT(bound != nullptr, "differentiate: unknown parameter ", from->name());
      to = graph_->add_param(from->name(), from->type(), bound->data());
    } else {
      KILN_ASSERT(from->kind() == ValueKind::Constant, "differentiate: value ", from->id(),
                  " crosses the cut without being saved");
      to = graph_->add_constant(from->data(), from->type().wrapped_number);
    }
    map(from, to);
    return to;
  }
  void copy(const Node* node) {
    std::vector<Value*> inputs;
    for (const Value* in : node->inputs())
      inputs.push_back(get(in));
    std::vector<TensorMeta> types;
    for (const Value* out : node->outputs())
      types.push_back(out->type());
    std::vector<std::unique_ptr<Graph>> blocks;
    for (size_t b = 0; b < node->num_blocks(); ++b)
      blocks.push_back(node->block(b).clone());
    Node* copied = graph_->append_with_blocks(node->op(), std::move(inputs), node->attrs(), types,
                                              std::move(blocks));
    for (size_t i = 0; i < node->outputs().size(); ++i)
      map(node->output(i), copied->output(i));
  }
  std::shared_ptr<Graph> graph() const { return graph_; }

 private:
  const Graph& original_;
  std::shared_ptr<Graph> graph_;
  std::unordered_map<const Value*, Value*> values_;
};

struct JointRun {
  Capture capture;
  std::vector<size_t> grad_outputs;
  std::vector<GradTarget> targets;  // one per gradient output of the capture
};

// Records the forward replayed with autograd on, then kiln::grad of the
// differentiable outputs, into one graph: inputs (forward inputs, one
// gradient per differentiable output), outputs (forward outputs, gradients).
JointRun record_joint(const Graph& graph, size_t num_outputs, std::span<const Tensor> example,
                      const std::vector<bool>& input_needs_grad,
                      const std::vector<bool>& param_needs_grad) {
  std::shared_ptr<Graph> replayed = graph.clone();
  std::vector<Tensor> wrt;
  std::vector<GradTarget> wrt_targets;
  nn::NamedTensors params;
  for (size_t i = 0; i < replayed->params().size(); ++i) {
    Value* p = replayed->params()[i];
    if (!p->data().defined()) continue;
    p->set_data(fresh_copy(p->data(), param_needs_grad[i]));
    params.emplace_back(p->name(), p->data());
    if (!param_needs_grad[i]) continue;
    wrt.push_back(p->data());
    wrt_targets.push_back(GradTarget{ValueKind::Param, 0, p->name()});
  }
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  for (size_t i = 0; i < example.size(); ++i) {
    inputs.push_back(fresh_copy(example[i], input_needs_grad[i]));
    names.push_back(graph.inputs()[i]->name());
    if (!input_needs_grad[i]) continue;
    wrt.push_back(inputs.back());
    wrt_targets.push_back(GradTarget{ValueKind::Input, i, ""});
  }

  // Outputs that depend on something differentiated get a gradient input.
  std::unordered_set<const Value*> sources;
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    if (input_needs_grad[i]) sources.insert(graph.inputs()[i]);
  for (size_t i = 0; i < graph.params().size(); ++i)
    if (param_needs_grad[i]) sources.insert(graph.params()[i]);
  std::unordered_set<const Value*> depends = reachable_from(graph, sources);
  JointRun joint;
  std::vector<Tensor> output_grads;
  for (size_t i = 0; i < num_outputs; ++i) {
    const Value* out = graph.outputs()[i];
    if (!is_floating(out->dtype()) || !depends.count(out)) continue;
    joint.grad_outputs.push_back(i);
    output_grads.push_back(ones(to_static(out->shape(), "autodiff"), out->dtype()));
    inputs.push_back(output_grads.back());
    names.push_back(str("grad_out", i));
  }

  GeneratorPositionGuard keep_random_stream;
  EnableGradGuard grad_on;
  Recorder recorder(RecordOptions{.quiet = true, .input_names = names});
  recorder.begin(inputs, params);
  std::vector<Tensor> recorded;
  try {
    std::span<const Tensor> forward_inputs(inputs.data(), example.size());
    recorded = Interpreter(replayed, run_control_flow_with_grad).run_unchecked(forward_inputs);
    std::vector<Tensor> differentiable;
    for (size_t i : joint.grad_outputs)
      differentiable.push_back(recorded[i]);
    std::vector<Tensor> grads = kiln::grad(differentiable, wrt, output_grads,
                                           /*retain_graph=*/false, /*create_graph=*/false,
                                           /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;  // the outputs do not depend on it
      recorded.push_back(grads[i]);
      joint.targets.push_back(wrt_targets[i]);
    }
  } catch (...) {
    recorder.abort();
    throw;
  }
  joint.capture = recorder.end(recorded);
  KILN_CHECK(joint.capture.state_updates.empty(),
             "differentiate: the graph's forward writes its inputs or parameters in place "
             "outside its declared state updates; it cannot be differentiated as a graph");
  return joint;
}

}  // namespace

std::string why_not_differentiable(const Graph& graph, const std::vector<bool>& input_needs_grad,
                                   const std::vector<bool>& param_needs_grad) {
  // A compiled backward is planned before it runs; these sizes are not known then.
  if (binds_size_symbols(graph))
    return "a node's output size is bound only when it runs (Note [Data-dependent output "
           "shapes])";
  std::unordered_set<const Value*> sources;
  for (size_t i = 0; i < graph.inputs().size() && i < input_needs_grad.size(); ++i)
    if (input_needs_grad[i]) sources.insert(graph.inputs()[i]);
  for (size_t i = 0; i < graph.params().size() && i < param_needs_grad.size(); ++i)
    if (param_needs_grad[i]) sources.insert(graph.params()[i]);
  std::unordered_set<const Value*> depends = reachable_from(graph, sources);
  for (const Node* node : graph.nodes()) {
    if (node->op().grad || !node->op().differentiable) continue;
    if (node->num_blocks() && control_flow_has_grad(*node)) continue;  // control_flow_grad.h
    bool reads_grad = std::any_of(node->inputs().begin(), node->inputs().end(),
                                  [&](const Value* v) { return v && depends.count(v); });
    // Integer and bool results (indices, masks) carry no gradient anyway.
    bool floating = std::any_of(node->outputs().begin(), node->outputs().end(),
                                [](const Value* v) { return is_floating(v->dtype()); });
    if (reads_grad && floating) return str("op '", node->op().name, "' has no grad rule");
  }
  return "";
}

DifferentiatedGraph differentiate(const Graph& graph, size_t num_outputs,
                                  std::span<const Tensor> example_inputs,
                                  const std::vector<bool>& input_needs_grad,
                                  const std::vector<bool>& param_needs_grad) {
  KILN_CHECK_VALUE(example_inputs.size() == graph.inputs().size() &&
                       input_needs_grad.size() == graph.inputs().size() &&
                       param_needs_grad.size() == graph.params().size() &&
                       num_outputs <= graph.outputs().size(),
                   "differentiate: the inputs, flags and outputs do not match the graph");
  JointRun run =
      record_joint(graph, num_outputs, example_inputs, input_needs_grad, param_needs_grad);
  const Graph& joint = *run.capture.graph;
  size_t num_forward_outputs = graph.outputs().size();
  const auto& joint_outputs = joint.outputs();
  std::vector<const Value*> forward_roots(joint_outputs.begin(),
                                          joint_outputs.begin() + num_forward_outputs);
  std::vector<const Value*> grad_roots(joint_outputs.begin() + num_forward_outputs,
                                       joint_outputs.end());
  // Ops with side effects run forward, once, even when only a gradient reads them.
  for (const Node* node : joint.nodes())
    if (node->op().has_side_effects || node->op().is_random)
      forward_roots.push_back(node->output());
  std::unordered_set<const Node*> in_forward = needed_by(forward_roots);
  std::unordered_set<const Node*> in_backward = needed_by(grad_roots);

  size_t num_forward_inputs = example_inputs.size();
  // Parameters and constants are bound in both graphs; inputs and values the
  // forward computes cross from one to the other.
  auto crosses_cut = [&](const Value* v) {
    if (v == nullptr) return false;
    if (v->kind() == ValueKind::Input) return true;
    return v->kind() == ValueKind::NodeOutput && in_forward.count(v->producer()) > 0;
  };
  auto is_output_grad_input = [&](const Value* v) {
    if (v->kind() != ValueKind::Input) return false;
    for (size_t i = num_forward_inputs; i < joint.inputs().size(); ++i)
      if (joint.inputs()[i] == v) return true;
    return false;
  };

  // Saved values, in the joint graph's order: forward values the backward reads.
  std::vector<const Value*> saved;
  std::unordered_set<const Value*> saved_set;
  auto save = [&](const Value* v) {
    if (!crosses_cut(v) || is_output_grad_input(v) || !saved_set.insert(v).second) return;
    saved.push_back(v);
  };
  for (const Node* node : joint.nodes()) {
    if (!in_backward.count(node) || in_forward.count(node)) continue;
    for (const Value* in : node->inputs())
      save(in);
  }
  for (const Value* v : grad_roots)
    save(v);

  DifferentiatedGraph result;
  result.num_outputs = num_outputs;
  result.grad_outputs = run.grad_outputs;
  result.targets = run.targets;
  result.warnings = std::move(run.capture.warnings);

  GraphCopier forward(graph);
  for (size_t i = 0; i < num_forward_inputs; ++i)
    forward.add_input(joint.inputs()[i]);
  for (const Node* node : joint.nodes())
    if (in_forward.count(node)) forward.copy(node);
  std::vector<Value*> forward_outputs;
  for (size_t i = 0; i < num_forward_outputs; ++i)
    forward_outputs.push_back(forward.get(joint_outputs[i]));
  // Saved inputs are the caller's tensors; the rest are extra forward outputs.
  for (const Value* v : saved) {
    if (v->kind() == ValueKind::Input) {
      size_t index =
          std::find(joint.inputs().begin(), joint.inputs().end(), v) - joint.inputs().begin();
      result.saved.push_back(SavedValue{true, index});
      continue;
    }
    result.saved.push_back(SavedValue{false, forward_outputs.size()});
    forward_outputs.push_back(forward.get(v));
  }
  forward.graph()->set_outputs(std::move(forward_outputs));

  GraphCopier backward(graph);
  for (size_t i = 0; i < saved.size(); ++i)
    backward.add_input(saved[i], str("saved", i));
  for (size_t i = num_forward_inputs; i < joint.inputs().size(); ++i)
    backward.add_input(joint.inputs()[i]);
  for (const Node* node : joint.nodes())
    if (in_backward.count(node) && !in_forward.count(node)) backward.copy(node);
  std::vector<Value*> backward_outputs;
  for (const Value* v : grad_roots)
    backward_outputs.push_back(backward.get(v));
  backward.graph()->set_outputs(std::move(backward_outputs));

  result.forward = forward.graph();
  result.backward = backward.graph();
  return result;
}

}  // namespace kiln::jit
