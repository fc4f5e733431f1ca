#include "kiln/jit/compile/compiled_grad.h"

#include "kiln/autograd/node.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"

namespace kiln::jit {
namespace {

// A tensor the backward reads, with its version when the forward ran: an
// in-place write in between is PyTorch's "modified by an inplace operation".
struct VersionedTensor {
  Tensor tensor;
  uint64_t version = 0;
  std::string what;
};

// The backward of one compiled call: runs the plan's backward graph on the
// saved activations and the incoming gradients.
class CompiledBackward final : public kiln::Node {
 public:
  CompiledBackward(std::shared_ptr<const GradPlan> plan, std::vector<Tensor> saved,
                   std::vector<VersionedTensor> checked, std::vector<TensorMeta> output_metas)
      : plan_(std::move(plan)),
        saved_(std::move(saved)),
        checked_(std::move(checked)),
        output_metas_(std::move(output_metas)) {}

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    KILN_CHECK(!released_,
               "trying to backward through the graph a second time: the compiled function's "
               "saved activations were freed by the previous backward; pass retain_graph=true "
               "if you need to backward twice");
    KILN_CHECK(!grad_mode_enabled(),
               "a compiled function's backward is itself compiled and cannot be differentiated "
               "again (create_graph=True); call the model eagerly for higher-order gradients");
    for (const VersionedTensor& t : checked_) {
      KILN_CHECK(t.tensor.version() == t.version,
                 "one of the variables needed for gradient computation has been modified by an "
                 "inplace operation: ",
                 t.what, " of a compiled function is at version ", t.tensor.version(),
                 "; expected version ", t.version, " instead");
    }
    std::vector<Tensor> inputs = saved_;
    for (size_t i = 0; i < grad_outputs.size(); ++i) {
      const Tensor& g = grad_outputs[i];
      if (g.defined()) {
        inputs.push_back(g);
        continue;
      }
      const TensorMeta& meta = output_metas_[i];
      inputs.push_back(zeros(to_static(meta.shape, "compiled backward"), meta.dtype));
    }
    return plan_->backward->run(inputs);
  }
  std::string name() const override { return "CompiledFunctionBackward"; }
  size_t num_outputs() const override { return output_metas_.size(); }
  void release() override {
    saved_.clear();
    checked_.clear();
    released_ = true;
  }

 private:
  std::shared_ptr<const GradPlan> plan_;
  std::vector<Tensor> saved_;
  std::vector<VersionedTensor> checked_;
  std::vector<TensorMeta> output_metas_;
  bool released_ = false;
};

PassReport optimized(Graph& graph, const std::optional<PassOptions>& passes) {
  if (!passes) return {};
  return optimize(graph, *passes);
}

}  // namespace

std::shared_ptr<const GradPlan> build_grad_plan(const Graph& graph, size_t num_outputs,
                                                std::span<const Tensor> example_inputs,
                                                const std::vector<bool>& input_needs_grad,
                                                const std::vector<bool>& param_needs_grad,
                                                const std::optional<PassOptions>& passes) {
  auto plan = std::make_shared<GradPlan>();
  plan->graphs =
      differentiate(graph, num_outputs, example_inputs, input_needs_grad, param_needs_grad);
  plan->forward_report = optimized(*plan->graphs.forward, passes);
  plan->backward_report = optimized(*plan->graphs.backward, passes);
  plan->forward = std::make_unique<Executable>(plan->graphs.forward);
  plan->backward = std::make_unique<Executable>(plan->graphs.backward);
  return plan;
}

std::vector<Tensor> run_with_grad(const std::shared_ptr<const GradPlan>& plan,
                                  std::span<const Tensor> inputs, const Graph& original) {
  const DifferentiatedGraph& graphs = plan->graphs;
  // Both graphs were recorded from contiguous copies of the example inputs:
  // a view they recorded may not exist over other strides.
  std::vector<Tensor> dense;
  for (const Tensor& t : inputs)
    dense.push_back(contiguous(t));
  std::vector<Tensor> results = plan->forward->run(dense);
  if (graphs.targets.empty() || graphs.grad_outputs.empty()) {
    results.resize(original.outputs().size());
    return results;
  }

  std::vector<Tensor> saved;
  std::vector<VersionedTensor> checked;
  for (const SavedValue& s : graphs.saved) {
    if (!s.is_input) {
      saved.push_back(results[s.index]);
      continue;
    }
    saved.push_back(dense[s.index]);
    checked.push_back({inputs[s.index], inputs[s.index].version(), str("input ", s.index)});
  }
  // The backward reads parameters as they are when it runs: they must be
  // as the forward saw them.
  for (const Value* p : graphs.backward->params()) {
    checked.push_back({p->data(), p->data().version(), str("parameter '", p->name(), "'")});
  }
  std::vector<TensorMeta> output_metas;
  for (size_t i : graphs.grad_outputs)
    output_metas.push_back(original.outputs()[i]->type());
  auto node = std::make_shared<CompiledBackward>(plan, std::move(saved), std::move(checked),
                                                 std::move(output_metas));
  for (const GradTarget& target : graphs.targets) {
    const Tensor& t = target.kind == ValueKind::Input ? inputs[target.input]
                                                      : original.find_param(target.param)->data();
    node->next_edges.push_back(gradient_edge(t));
  }
  for (size_t k = 0; k < graphs.grad_outputs.size(); ++k)
    set_history(results[graphs.grad_outputs[k]], node, int(k));
  results.resize(original.outputs().size());
  return results;
}

}  // namespace kiln::jit
