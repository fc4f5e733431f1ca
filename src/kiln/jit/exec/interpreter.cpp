#include "kiln/jit/exec/interpreter.h"

#include <unordered_map>

#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/ops/dispatch.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::jit {

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
    Step step{&node->op(), node->attrs(), {}, {}, {}, node, {}};
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
    std::vector<Tensor> results = step.blocks.empty()
                                      ? dispatch(*step.op, std::move(args), step.attrs)
                                      : control_flow_(*step.node, args, step.blocks);
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
