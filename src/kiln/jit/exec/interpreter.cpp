#include "kiln/jit/exec/interpreter.h"

#include <optional>
#include <unordered_map>

#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/ops/dispatch.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::jit {
namespace {

// The sizes bound so far by the binding run in progress on this thread, for
// the blocks it runs: their attributes and types may mention them.
thread_local const std::map<std::string, int64_t>* t_run_sizes = nullptr;

class RunSizesScope {
 public:
  explicit RunSizesScope(const std::map<std::string, int64_t>* sizes) : previous_(t_run_sizes) {
    t_run_sizes = sizes;
  }
  ~RunSizesScope() { t_run_sizes = previous_; }
  RunSizesScope(const RunSizesScope&) = delete;
  RunSizesScope& operator=(const RunSizesScope&) = delete;

 private:
  const std::map<std::string, int64_t>* previous_;
};

}  // namespace

Interpreter::Interpreter(std::shared_ptr<const Graph> graph, ControlFlowRunner control_flow)
    : graph_(std::move(graph)), control_flow_(std::move(control_flow)) {
  KILN_CHECK_VALUE(graph_ != nullptr, "Interpreter: no graph");
  if (!control_flow_) {
    control_flow_ = [](const Node& node, std::span<const Tensor> inputs,
                       const std::vector<std::shared_ptr<const GraphRunner>>& blocks) {
      return run_control_flow(node, inputs, [&](size_t b, const std::vector<Tensor>& in) {
        return blocks[b]->run_unchecked(in);
      });
    };
  }
  std::unordered_map<const Value*, int> slot_of;  // lookups only
  auto slot = [&](const Value* v) {
    return slot_of.try_emplace(v, int(slot_of.size())).first->second;
  };
  for (const Value* v : graph_->inputs())
    input_slots_.push_back(slot(v));
  for (const Value* v : graph_->params())
    bound_.emplace_back(slot(v), v);
  for (const Value* v : graph_->constants())
    bound_.emplace_back(slot(v), v);
  for (const Node* node : graph_->nodes()) {
    Step step{&node->op(), node->attrs(), {}, {}, {}, node, {}, bound_symbol(*node)};
    for (size_t b = 0; b < node->num_blocks(); ++b) {
      // The block lives as long as its node, which the graph held here keeps.
      step.blocks.push_back(std::make_shared<Interpreter>(
          std::shared_ptr<const Graph>(&node->block(b), [](const Graph*) {}), control_flow_));
    }
    for (const Value* v : node->inputs())
      step.inputs.push_back(v ? slot(v) : -1);
    for (const Value* v : node->outputs())
      step.outputs.push_back(slot(v));
    steps_.push_back(std::move(step));
  }
  for (const Value* v : graph_->outputs())
    output_slots_.push_back(slot(v));
  num_slots_ = slot_of.size();
  plan_releases();
  binds_sizes_ = binds_size_symbols(*graph_);
}

// Dropping an intermediate after its last use (an unused output such as
// dropout's mask right away) keeps peak memory near eager's, where a
// temporary goes when its last handle does. Graph inputs, parameters,
// constants and outputs are never dropped.
void Interpreter::plan_releases() {
  constexpr size_t kKeep = ~size_t(0);
  std::vector<size_t> last_use(num_slots_, kKeep);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].outputs)
      last_use[size_t(s)] = i;
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].inputs) {
      if (s >= 0 && last_use[size_t(s)] != kKeep) last_use[size_t(s)] = i;
    }
  }
  for (int s : output_slots_)
    last_use[size_t(s)] = kKeep;
  for (size_t s = 0; s < num_slots_; ++s) {
    if (last_use[s] != kKeep) steps_[last_use[s]].release.push_back(int(s));
  }
}

// The sizes an enclosing run bound, then the symbols of this graph's inputs.
std::map<std::string, int64_t> Interpreter::input_sizes(std::span<const Tensor> inputs) const {
  std::map<std::string, int64_t> sizes;
  if (t_run_sizes) sizes = *t_run_sizes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DimList& dims = graph_->inputs()[i]->shape();
    for (size_t d = 0; d < dims.size() && d < inputs[i].shape().size(); ++d) {
      if (std::string s = lone_symbol(dims[d]); !s.empty()) sizes[s] = inputs[i].shape()[d];
    }
  }
  return sizes;
}

// One node; with `sizes` (a graph that binds sizes), its symbolic
// attributes take the values bound so far, and the symbol it binds joins them.
std::vector<Tensor> Interpreter::run_step(const Step& step, std::vector<Tensor> args,
                                          std::map<std::string, int64_t>* sizes) const {
  if (!step.blocks.empty()) return control_flow_(*step.node, args, step.blocks);
  if (sizes == nullptr) return dispatch(*step.op, std::move(args), step.attrs);
  std::vector<Tensor> results =
      dispatch(*step.op, std::move(args),
               step.attrs.any_symbolic() ? step.attrs.evaluated(*sizes) : step.attrs);
  if (step.binds.empty()) return results;
  (*sizes)[step.binds] = bound_value(*step.node, results, *sizes);
  check_guards_on(*graph_, step.binds, *sizes);
  return results;
}

std::vector<Tensor> Interpreter::run_unchecked(std::span<const Tensor> inputs) const {
  KILN_CHECK_VALUE(inputs.size() == input_slots_.size(), "graph: expected ", input_slots_.size(),
                   " inputs, got ", inputs.size());
  std::vector<Tensor> slots(num_slots_);
  for (size_t i = 0; i < inputs.size(); ++i)
    slots[size_t(input_slots_[i])] = inputs[i];
  for (const auto& [s, value] : bound_) {
    KILN_CHECK(value->data().defined(), "graph: ", to_string(value->kind()), " '", value->name(),
               "' has no tensor bound to it");
    slots[size_t(s)] = value->data();
  }
  // Sizes bound while this run goes, when a node binds one (else unused).
  std::map<std::string, int64_t> sizes;
  std::optional<RunSizesScope> scope;
  const bool binding = binds_sizes_ || t_run_sizes != nullptr;  // or a block of such a run
  if (binding) {
    sizes = input_sizes(inputs);
    scope.emplace(&sizes);
  }
  for (const Step& step : steps_) {
    std::vector<Tensor> args;
    args.reserve(step.inputs.size());
    for (int s : step.inputs)
      args.push_back(s < 0 ? Tensor() : slots[size_t(s)]);
    // dispatch records each op; a control-flow op's range holds its blocks' ops.
    profiler::Range range;
    if (!step.blocks.empty() && profiler::recording()) {
      range.open(profiler::EventKind::Op, step.op->name);
    }
    std::vector<Tensor> results = run_step(step, std::move(args), binding ? &sizes : nullptr);
    range.close();
    KILN_ASSERT(results.size() == step.outputs.size(), step.op->name, " gave ", results.size(),
                " outputs, the graph has ", step.outputs.size());
    for (size_t i = 0; i < results.size(); ++i)
      slots[size_t(step.outputs[i])] = std::move(results[i]);
    for (int s : step.release)
      slots[size_t(s)] = Tensor();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(output_slots_.size());
  for (int s : output_slots_)
    outputs.push_back(slots[size_t(s)]);
  return outputs;
}

}  // namespace kiln::jit
