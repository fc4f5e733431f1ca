#include "kiln/jit/exec/workspace.h"

#include "kiln/core/allocator.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {

Workspace::Workspace(const Plan& plan)
    : plan_(plan),
      args_(plan.args),
      keys_(plan.key_sources.size()),
      bases_(1 + plan.num_inputs + plan.num_outputs, nullptr),
      stand_ins_(plan.num_outputs) {
  const size_t arena_bytes = size_t(plan.memory.arena_bytes);
  if (arena_bytes > 0) arena_ = cpu_allocate(arena_bytes);
  bases_[0] = static_cast<char*>(arena_);
  for (const Patch& p : plan.arena_patches)
    args_[p.arg].data = bases_[0] + p.byte_offset;
}

Workspace::~Workspace() {
  if (arena_) cpu_free(arena_, size_t(plan_.memory.arena_bytes));
}

void Workspace::bind(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                     bool inputs_strided) {
  char** input_bases = bases_.data() + 1;
  char** output_bases = input_bases + plan_.num_inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    input_bases[i] = static_cast<char*>(inputs[i].data_ptr());
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Tensor& out = outputs[j];
    stand_ins_[j] = out.is_contiguous() ? Tensor() : make_tensor(out.shape(), out.dtype());
    const Tensor& target = out.is_contiguous() ? out : stand_ins_[j];
    output_bases[j] = static_cast<char*>(target.data_ptr());
  }
  patch_call_args();
  if (inputs_strided) derive_input_views(inputs);
}

// Points the arguments over inputs and outputs at this call's bases (after
// a strided call, first back to the plan's own views over the inputs).
void Workspace::patch_call_args() {
  if (input_args_derived_) {
    for (uint32_t a : plan_.input_rooted_args)
      args_[a] = plan_.args[a];
    input_args_derived_ = false;
  }
  for (const Patch& p : plan_.call_patches)
    args_[p.arg].data = bases_[p.base] + p.byte_offset;
}

void Workspace::bind_views(std::span<const cpu::StridedView> inputs,
                           std::span<const cpu::StridedView> outputs) {
  char** input_bases = bases_.data() + 1;
  char** output_bases = input_bases + plan_.num_inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    input_bases[i] = static_cast<char*>(inputs[i].data);
  for (size_t j = 0; j < outputs.size(); ++j)
    output_bases[j] = static_cast<char*>(outputs[j].data);
  patch_call_args();
}

// The slow path: what eager would see, view op by view op (this allocates).
void Workspace::derive_input_views(std::span<const Tensor> inputs) {
  input_args_derived_ = true;
  std::vector<Tensor> tensors(plan_.slots.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    tensors[size_t(plan_.input_slots[i])] = inputs[i];
  for (size_t s = 0; s < plan_.slots.size(); ++s) {
    const Slot& slot = plan_.slots[s];
    if (slot.root != RootKind::Input || slot.view_base < 0) continue;
    tensors[s] = derive_view(slot, tensors[size_t(slot.view_base)]);
  }
  for (uint32_t a : plan_.input_rooted_args)
    args_[a] = view_of(tensors[size_t(plan_.arg_slots[a])]);
}

void Workspace::finish(std::span<const Tensor> outputs) {
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!stand_ins_[j].defined()) continue;
    cpu::copy_convert(view_of(outputs[j]), view_of(stand_ins_[j]));
    stand_ins_[j] = Tensor();
  }
}

}  // namespace kiln::jit
