// Graph -> Plan. Walks the nodes in order once: view nodes become slots over
// their input's memory, every other node a step; graph outputs computed by a
// kernel are written straight into the caller's result tensor, and any other
// output (an input, a parameter, a view, a repeat) gets a copy step at the
// end, so results never alias the workspace or the model's weights. Outputs
// written into a parameter (OutputIntoParam) are the exception, by request.
#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "kiln/jit/exec/concurrency.h"
#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/exec/plan.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/op_threads.h"

namespace kiln::jit {
namespace {

// What prepare() sees as data: non-null marks a present argument.
alignas(64) char kPlaceholder[64] = {};

std::string label(const Value* v) {
  return str("%", v->id());
}

// The executor runs concrete sizes only, for now (issue 21): a value with a
// symbolic dim is an error naming it.
IntList static_shape(const Value* v) {
  return to_static(v->shape(), str("lower: ", label(v)));
}

cpu::StridedView contiguous_view(const Value* v) {
  const IntList shape = static_shape(v);
  KILN_CHECK(shape.size() <= size_t(cpu::kMaxDims), label(v), ": values of more than ",
             cpu::kMaxDims, " dims are not supported (shape ", shape, ")");
  cpu::StridedView view;
  view.dtype = v->dtype();
  view.ndim = int(shape.size());
  IntList strides = contiguous_strides(shape);
  std::copy(shape.begin(), shape.end(), view.shape);
  std::copy(strides.begin(), strides.end(), view.strides);
  return view;
}

// A tensor with the slot's geometry for a view op's rule to look at: over
// the real storage for a Fixed slot, else over no memory at all.
Tensor geometry_tensor(const Slot& slot, const std::vector<Tensor>& held) {
  static const Storage no_memory = std::make_shared<StorageImpl>(nullptr, 0, [] {});
  const cpu::StridedView& v = slot.view;
  const int64_t itemsize = int64_t(element_size(v.dtype));
  Storage storage = slot.root == RootKind::Fixed ? held[slot.root_index].storage() : no_memory;
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), IntList(v.shape, v.shape + v.ndim),
                                             IntList(v.strides, v.strides + v.ndim),
                                             slot.byte_offset / itemsize, v.dtype));
}

// A read of a parameter by a graph output, which is copied after every step.
constexpr size_t kReadAtEnd = std::numeric_limits<size_t>::max();

class Lowering {
 public:
  Lowering(const Graph& graph, std::span<const OutputIntoParam> into, const BufferPlacer& place)
      : graph_(graph), into_(into), place_(place) {}

  Plan run() {
    plan_.num_inputs = graph_.inputs().size();
    plan_.num_outputs = graph_.outputs().size();
    for (size_t i = 0; i < graph_.inputs().size(); ++i)
      add_input(graph_.inputs()[i], i);
    for (const Value* v : graph_.params())
      add_held(v);
    for (const Value* v : graph_.constants())
      add_held(v);
    mark_outputs_into_params();
    find_direct_outputs();
    for (const Node* node : graph_.nodes()) {
      check_types(*node);
      if (node->op().kind == OpKind::View) {
        lower_view(*node);
      } else if (is_control_flow(node->op())) {
        lower_control_flow(*node);
      } else {
        lower_kernel(*node);
      }
    }
    add_output_copies();
    choose_packed_weights();
    if (!place_) order_by_waves(plan_);  // before placement: reuse must not order them
    place_buffers();
    check_waves(plan_);
    return std::move(plan_);
  }

 private:
  int32_t new_slot(const Value* v, Slot slot) {
    slot.value_id = v->id();
    plan_.slots.push_back(slot);
    return int32_t(plan_.slots.size() - 1);
  }

  void add_input(const Value* v, size_t index) {
    Slot slot{.root = RootKind::Input, .root_index = uint32_t(index), .view = contiguous_view(v)};
    int32_t id = new_slot(v, slot);
    plan_.input_slots.push_back(id);
    slots_[v] = id;
  }

  void add_held(const Value* v) {
    const Tensor& t = v->data();
    KILN_CHECK_VALUE(t.defined(), "parameter '", v->name(), "' (", label(v),
                     ") has no tensor bound; bind the weights before compiling");
    Slot slot{.root = RootKind::Fixed,
              .root_index = uint32_t(plan_.held.size()),
              .byte_offset = t.offset() * int64_t(t.itemsize()),
              .view = view_of(t)};
    held_index_[v] = uint32_t(plan_.held.size());
    plan_.held.push_back(t);
    slots_[v] = new_slot(v, slot);
  }

  void mark_outputs_into_params() {
    plan_.output_held.assign(graph_.outputs().size(), -1);
    std::unordered_map<const Value*, int> times_named;
    for (const OutputIntoParam& entry : into_)
      ++times_named[entry.param];
    for (const OutputIntoParam& entry : into_) {
      auto held = held_index_.find(entry.param);
      KILN_CHECK(entry.output < graph_.outputs().size() && held != held_index_.end(),
                 "compiled graph: an output to write into a parameter names no output (",
                 entry.output, ") or parameter of the graph");
      const Value* out = graph_.outputs()[entry.output];
      const Tensor& target = plan_.held[held->second];
      bool fits = out->dtype() == target.dtype() && matches_shape(target.shape(), out->shape()) &&
                  target.is_contiguous() && times_named[entry.param] == 1 && out != entry.param &&
                  held->second < graph_.params().size();
      if (!fits) continue;
      plan_.output_held[entry.output] = int32_t(held->second);
      plan_.mutations.push_back(Mutation{RootKind::Fixed, held->second});
    }
    if (!into_.empty()) find_last_reads();
  }

  // For every parameter, the last node that reads it or a view of it (its
  // position in the graph), or kReadAtEnd when a graph output is a view of it.
  void find_last_reads() {
    for (const Value* p : graph_.params())
      viewed_param_[p] = p;
    const std::vector<Node*>& nodes = graph_.nodes();
    for (size_t position = 0; position < nodes.size(); ++position) {
      const Node& node = *nodes[position];
      node_position_[&node] = position;
      for (const Value* in : node.inputs()) {
        auto it = in ? viewed_param_.find(in) : viewed_param_.end();
        if (it == viewed_param_.end()) continue;
        if (node.op().kind != OpKind::View) {
          last_read_[it->second] = position;
          continue;
        }
        for (const Value* out : node.outputs())
          viewed_param_[out] = it->second;
      }
    }
    for (const Value* out : graph_.outputs()) {
      auto it = viewed_param_.find(out);
      if (it != viewed_param_.end()) last_read_[it->second] = kReadAtEnd;
    }
  }

  // Whether `producer` may write output j straight into the parameter it
  // goes into: every read of the parameter's old value comes before it, or
  // is its own elementwise read of the same element.
  bool may_write_into_param(size_t j, const Node& producer) const {
    const Value* param = graph_.params().at(size_t(plan_.output_held[j]));
    auto read = last_read_.find(param);
    if (read == last_read_.end()) return true;
    if (read->second == kReadAtEnd) return false;
    const size_t position = node_position_.at(&producer);
    if (read->second != position) return read->second < position;
    if (!producer.op().may_run_inplace) return false;
    // A view of the parameter would be read in another order than written.
    return std::none_of(producer.inputs().begin(), producer.inputs().end(), [&](const Value* in) {
      auto it = in ? viewed_param_.find(in) : viewed_param_.end();
      return in != param && it != viewed_param_.end() && it->second == param;
    });
  }

  void find_direct_outputs() {
    const std::vector<Value*>& outputs = graph_.outputs();
    for (size_t j = 0; j < outputs.size(); ++j) {
      const Value* v = outputs[j];
      bool computed =
          v->kind() == ValueKind::NodeOutput && v->producer()->op().kind != OpKind::View;
      if (!computed || direct_outputs_.count(v)) continue;
      if (plan_.output_held[j] >= 0 && !may_write_into_param(j, *v->producer())) continue;
      direct_outputs_[v] = uint32_t(j);
    }
  }

  int32_t slot_of(const Value* v, const Node& user) const {
    auto it = slots_.find(v);
    KILN_CHECK(it != slots_.end(), user.op().name, ": input ", label(v),
               " is used before it is defined (the graph's nodes are out of order, or the value "
               "belongs to another graph)");
    return it->second;
  }

  // Arena sizes and view geometry come from the value types, so they must be
  // what the op table infers (a hand-typed or edited graph could disagree).
  void check_types(const Node& node) const {
    std::vector<TensorMeta> inferred = infer_node_types(node);
    KILN_CHECK(inferred.size() == node.outputs().size(), node.op().name, ": the node has ",
               node.outputs().size(), " outputs but the op infers ", inferred.size());
    for (size_t i = 0; i < inferred.size(); ++i) {
      const Value* out = node.output(i);
      KILN_CHECK(inferred[i].dtype == out->dtype() && same_dims(inferred[i].shape, out->shape()),
                 node.op().name, ": output ", label(out), " is typed ", out->dtype(), out->shape(),
                 " but the op infers ", inferred[i].dtype, inferred[i].shape);
    }
  }

  void lower_view(const Node& node) {
    const int32_t base_id = slot_of(node.input(0), node);
    const Slot base = plan_.slots[size_t(base_id)];
    const Attrs* attrs = &plan_.attrs.emplace_back(node.attrs());
    std::vector<ViewMeta> views =
        node.op().view(ViewArgs{geometry_tensor(base, plan_.held), *attrs});
    KILN_CHECK(views.size() == node.outputs().size(), node.op().name, ": the node has ",
               node.outputs().size(), " outputs but the view gives ", views.size());
    const int64_t itemsize = int64_t(element_size(base.view.dtype));
    for (size_t k = 0; k < node.outputs().size(); ++k) {
      const Value* out = node.output(k);
      Slot slot = base;
      slot.byte_offset = views[k].offset * itemsize;
      slot.view = contiguous_view(out);
      std::copy(views[k].strides.begin(), views[k].strides.end(), slot.view.strides);
      if (base.root == RootKind::Fixed) {
        char* start = static_cast<char*>(plan_.held[base.root_index].storage()->data());
        slot.view.data = start + slot.byte_offset;
      }
      slot.view_base = base_id;
      slot.view_op = &node.op();
      slot.view_attrs = attrs;
      slot.view_output = k;
      slots_[out] = new_slot(out, slot);
    }
  }

  void lower_kernel(const Node& node) {
    KILN_CHECK(node.op().cpu != nullptr, node.op().name, ": the op has no CPU kernel");
    std::vector<int32_t> ins, outs;
    for (const Value* v : node.inputs())
      ins.push_back(v ? slot_of(v, node) : -1);
    for (const Value* v : node.outputs())
      outs.push_back(output_slot(node, v));
    const Attrs* attrs = &plan_.attrs.emplace_back(node.attrs());
    add_step(node.op(), attrs, ins, outs, /*prepare=*/true);
  }

  // Where output `v` of `node` lives: the caller's result, an input buffer
  // it may overwrite, or a new arena buffer.
  int32_t output_slot(const Node& node, const Value* v) {
    Slot slot{.view = contiguous_view(v)};
    auto direct = direct_outputs_.find(v);
    if (direct != direct_outputs_.end()) {
      slot.root = RootKind::Output;
      slot.root_index = direct->second;
    } else if (int32_t reused = buffer_to_overwrite(node, v); reused >= 0) {
      slot.root_index = uint32_t(reused);
    } else {
      slot.root_index = new_buffer(v->type());
    }
    int32_t id = new_slot(v, slot);
    slots_[v] = id;
    return id;
  }

  uint32_t new_buffer(const TensorMeta& type) {
    const int64_t nbytes =
        int64_t(element_size(type.dtype)) * numel_of(to_static(type.shape, "lower"));
    plan_.buffers.push_back(BufferRequest{nbytes, plan_.steps.size(), plan_.steps.size()});
    return uint32_t(plan_.buffers.size() - 1);
  }

  // A control-flow node is one step whose prepared kernel runs its blocks'
  // plans (control_flow_exec.h) over contiguous inputs, its outputs, and the
  // scratch buffers a loop keeps its second set of carried values in.
  void lower_control_flow(const Node& node) {
    static const OpDef& clone_op = op("clone");
    std::vector<int32_t> ins, outs;
    for (const Value* v : node.inputs()) {
      int32_t id = slot_of(v, node);
      const cpu::StridedView& view = plan_.slots[size_t(id)].view;
      const cpu::StridedView dense = contiguous_view(v);
      if (!std::equal(view.strides, view.strides + view.ndim, dense.strides)) {
        const int32_t copy = new_slot(v, Slot{.root_index = new_buffer(v->type()), .view = dense});
        add_step(clone_op, &plan_.attrs.emplace_back(), {id}, {copy}, /*prepare=*/false);
        id = copy;
      }
      ins.push_back(id);
    }
    for (const Value* v : node.outputs())
      outs.push_back(output_slot(node, v));
    for (const Value* like : control_flow_scratch(node)) {
      outs.push_back(new_slot(
          like, Slot{.root_index = new_buffer(like->type()), .view = contiguous_view(like)}));
    }
    std::unique_ptr<ControlFlowKernel> kernel = prepare_control_flow(node);
    Step& step = plan_.steps.emplace_back(Step{.op = &node.op(),
                                               .attrs = &plan_.attrs.emplace_back(node.attrs()),
                                               .first_arg = uint32_t(plan_.args.size()),
                                               .num_inputs = uint32_t(ins.size()),
                                               .num_outputs = uint32_t(outs.size())});
    for (const std::vector<int32_t>* list : {&ins, &outs}) {
      for (int32_t id : *list)
        add_arg(id, step, plan_.steps.size() - 1);
    }
    step.prepared = step.control_flow = kernel.get();
    step.first_key_source = uint32_t(plan_.key_sources.size());
    for (int32_t id : ins) {
      const Slot& slot = plan_.slots[size_t(id)];
      const bool keyed = slot.root == RootKind::Fixed || slot.root == RootKind::Input;
      plan_.key_sources.push_back(keyed ? KeySource{slot.root, slot.root_index} : KeySource{});
    }
    // What a block writes in place, the enclosing plan writes.
    for (size_t input : kernel->mutated_inputs())
      note_mutation(ins[input]);
    plan_.prepared.push_back(std::move(kernel));
  }

  // The arena buffer of input 0 when `out` may be written over it: the op
  // may run in place, and input 0 is a whole arena buffer of the same type
  // and shape that nothing reads after this node (its only use is this
  // node, so no view of it exists either). -1 otherwise.
  int32_t buffer_to_overwrite(const Node& node, const Value* out) const {
    if (!node.op().may_run_inplace || node.outputs().size() != 1 || node.inputs().empty()) {
      return -1;
    }
    const Value* in = node.input(0);
    if (!in || in->kind() != ValueKind::NodeOutput || in->uses().size() != 1 ||
        graph_.output_uses(in) != 0) {
      return -1;
    }
    if (in->dtype() != out->dtype() || !same_dims(in->shape(), out->shape())) return -1;
    const Slot& slot = plan_.slots[size_t(slots_.at(in))];
    if (slot.root != RootKind::Arena || slot.view_base >= 0 || slot.byte_offset != 0) return -1;
    return int32_t(slot.root_index);
  }

  // Outputs that no kernel writes straight into the caller's tensor.
  void add_output_copies() {
    static const OpDef& clone_op = op("clone");
    const Attrs* no_attrs = &plan_.attrs.emplace_back();
    const std::vector<Value*>& outputs = graph_.outputs();
    for (size_t j = 0; j < outputs.size(); ++j) {
      KILN_CHECK(slots_.count(outputs[j]), "graph output ", j, " (", label(outputs[j]),
                 ") is not a value of this graph");
    }
    // Copies into parameters last: the others may read a parameter's old value.
    for (bool into_param : {false, true}) {
      for (size_t j = 0; j < outputs.size(); ++j) {
        const Value* v = outputs[j];
        auto direct = direct_outputs_.find(v);
        if (direct != direct_outputs_.end() && direct->second == j) continue;
        if ((plan_.output_held[j] >= 0) != into_param) continue;
        const int32_t source = slots_.at(v);
        Slot target{
            .root = RootKind::Output, .root_index = uint32_t(j), .view = contiguous_view(v)};
        add_step(clone_op, no_attrs, {source}, {new_slot(v, target)}, /*prepare=*/false);
      }
    }
  }

  void add_step(const OpDef& op, const Attrs* attrs, const std::vector<int32_t>& ins,
                const std::vector<int32_t>& outs, bool prepare) {
    Step step{.op = &op,
              .kernel = op.cpu,
              .attrs = attrs,
              .first_arg = uint32_t(plan_.args.size()),
              .num_inputs = uint32_t(ins.size()),
              .num_outputs = uint32_t(outs.size())};
    for (const std::vector<int32_t>* list : {&ins, &outs}) {
      for (int32_t id : *list)
        add_arg(id, step, plan_.steps.size());
    }
    decide_threads(step, prepare && op.prepare);
    note_mutations(step);
    plan_.steps.push_back(step);
  }

  // `position`: the index the step has (or will have) in plan_.steps.
  void add_arg(int32_t id, Step& step, size_t position) {
    plan_.arg_slots.push_back(id);
    if (id < 0) {
      plan_.args.emplace_back();  // data == nullptr: an absent optional input
      return;
    }
    const Slot& slot = plan_.slots[size_t(id)];
    plan_.args.push_back(slot.view);
    if (slot.root == RootKind::Input) step.touches_inputs = true;
    if (slot.root == RootKind::Arena) {
      BufferRequest& buffer = plan_.buffers[slot.root_index];
      buffer.last_step = std::max(buffer.last_step, position);
    }
  }

  // Note [Threads per step] (ops/op_threads.h); a one-thread step's kernel
  // is prepared under OneThread too, as oneDNN fixes a primitive's threads
  // when creating it.
  void decide_threads(Step& step, bool prepare) {
    std::vector<cpu::StridedView> views(plan_.args.begin() + step.first_arg, plan_.args.end());
    for (size_t i = 0; i < views.size(); ++i) {
      if (plan_.arg_slots[step.first_arg + i] >= 0 && !views[i].data) views[i].data = kPlaceholder;
    }
    std::span<const cpu::StridedView> all(views);
    const KernelArgs args{all.first(step.num_inputs), all.subspan(step.num_inputs), *step.attrs};
    step.one_thread = runs_on_one_thread(*step.op, args.inputs, args.outputs);
    if (!prepare) return;
    std::optional<cpu::OneThread> one_thread;
    if (step.one_thread) one_thread.emplace();
    std::unique_ptr<PreparedKernel> prepared = step.op->prepare(args);
    if (!prepared) return;
    step.prepared = prepared.get();
    plan_.prepared.push_back(std::move(prepared));
  }

  void note_mutations(const Step& step) {
    if (!step.op->has_side_effects || !step.op->mutated_inputs) return;
    for (int input : step.op->mutated_inputs(*step.attrs)) {
      if (size_t(input) >= step.num_inputs) continue;
      note_mutation(plan_.arg_slots[step.first_arg + size_t(input)]);
    }
  }

  void note_mutation(int32_t id) {
    if (id < 0) return;
    const Slot& slot = plan_.slots[size_t(id)];
    // Arena and output memory is the plan's own or fresh: nobody else sees it.
    if (slot.root != RootKind::Fixed && slot.root != RootKind::Input) return;
    const Mutation m{slot.root, slot.root_index};
    const bool known =
        std::any_of(plan_.mutations.begin(), plan_.mutations.end(),
                    [&](const Mutation& o) { return o.root == m.root && o.index == m.index; });
    if (!known) plan_.mutations.push_back(m);
  }

  // Prepared kernels that can keep a weight packed across calls do so when
  // the weight is a parameter or constant that no step of this plan writes:
  // its version counter then changes only between calls. A weight read
  // from a graph input that no step writes is packed while the caller keys
  // that input (a loop's capture, Executable::run_views). Control-flow
  // steps learn the keys of the same two kinds of inputs.
  void choose_packed_weights() {
    std::vector<const StorageImpl*> written;
    std::vector<uint32_t> written_inputs;
    for (const Mutation& m : plan_.mutations) {
      if (m.root == RootKind::Fixed) written.push_back(plan_.held[m.index].storage().get());
      if (m.root == RootKind::Input) written_inputs.push_back(m.index);
    }
    for (int32_t held : plan_.output_held) {
      if (held >= 0) written.push_back(plan_.held[size_t(held)].storage().get());
    }
    // Of a Fixed or Input root.
    auto unwritten = [&](RootKind root, uint32_t index) {
      if (root == RootKind::Input) {
        return std::find(written_inputs.begin(), written_inputs.end(), index) ==
               written_inputs.end();
      }
      const StorageImpl* storage = plan_.held[index].storage().get();
      return std::find(written.begin(), written.end(), storage) == written.end();
    };
    for (KeySource& source : plan_.key_sources) {
      if (source.root != RootKind::Arena && !unwritten(source.root, source.index)) source = {};
    }
    for (Step& step : plan_.steps) {
      if (!step.prepared || step.control_flow) continue;
      const int input = step.prepared->packable_input();
      if (input < 0 || uint32_t(input) >= step.num_inputs) continue;
      const int32_t id = plan_.arg_slots[step.first_arg + uint32_t(input)];
      if (id < 0) continue;
      const Slot& slot = plan_.slots[size_t(id)];
      if (slot.root != RootKind::Fixed && slot.root != RootKind::Input) continue;
      if (!unwritten(slot.root, slot.root_index)) continue;
      (slot.root == RootKind::Fixed ? step.packed_held : step.packed_input) =
          int32_t(slot.root_index);
    }
  }

  void place_buffers() {
    plan_.memory = place_ ? place_(plan_) : plan_memory(plan_.buffers);
    KILN_CHECK(plan_.memory.offsets.size() == plan_.buffers.size(), "lower: the placer gave ",
               plan_.memory.offsets.size(), " offsets for ", plan_.buffers.size(), " buffers");
    const uint32_t first_output_base = 1 + uint32_t(plan_.num_inputs);
    for (size_t a = 0; a < plan_.args.size(); ++a) {
      if (plan_.arg_slots[a] < 0) continue;
      const Slot& slot = plan_.slots[size_t(plan_.arg_slots[a])];
      const uint32_t arg = uint32_t(a);
      switch (slot.root) {
        case RootKind::Fixed:
          break;
        case RootKind::Arena:
          plan_.arena_patches.push_back(
              Patch{arg, 0, plan_.memory.offsets[slot.root_index] + slot.byte_offset});
          break;
        case RootKind::Input:
          plan_.call_patches.push_back(Patch{arg, 1 + slot.root_index, slot.byte_offset});
          plan_.input_rooted_args.push_back(arg);
          break;
        case RootKind::Output:
          plan_.call_patches.push_back(
              Patch{arg, first_output_base + slot.root_index, slot.byte_offset});
          break;
      }
    }
  }

  const Graph& graph_;
  std::span<const OutputIntoParam> into_;
  const BufferPlacer& place_;
  Plan plan_;
  // Compile time only: the hot path never looks anything up.
  std::unordered_map<const Value*, int32_t> slots_;
  std::unordered_map<const Value*, uint32_t> direct_outputs_;  // -> its first output index
  std::unordered_map<const Value*, uint32_t> held_index_;
  // Only when outputs go into parameters:
  std::unordered_map<const Value*, const Value*> viewed_param_;  // a view -> its parameter
  std::unordered_map<const Value*, size_t> last_read_;           // a parameter -> position
  std::unordered_map<const Node*, size_t> node_position_;
};

}  // namespace

Plan lower(const Graph& graph, std::span<const OutputIntoParam> into, const BufferPlacer& place) {
  verify(graph);  // a graph from a user rewrite or a file may be malformed
  return Lowering(graph, into, place).run();
}

}  // namespace kiln::jit
