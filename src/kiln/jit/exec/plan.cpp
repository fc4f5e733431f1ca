#include "kiln/jit/exec/plan.h"

#include <sstream>

namespace kiln::jit {
namespace {

std::string root_text(const Plan& plan, const Slot& slot) {
  switch (slot.root) {
    case RootKind::Fixed:
      return str("fixed ", slot.root_index, " +", slot.byte_offset);
    case RootKind::Input:
      return str("input ", slot.root_index, " +", slot.byte_offset);
    case RootKind::Output:
      return str("output ", slot.root_index, " +", slot.byte_offset);
    case RootKind::Arena: {
      const BufferRequest& buffer = plan.buffers[slot.root_index];
      const int64_t start = plan.memory.offsets[slot.root_index];
      return str("arena buffer ", slot.root_index, " +", slot.byte_offset, " (bytes [", start, ", ",
                 start + buffer.nbytes, "), steps ", buffer.first_step, "..", buffer.last_step,
                 ")");
    }
  }
  return "?";
}

std::string arg_text(const Plan& plan, size_t arg) {
  const int32_t slot = plan.arg_slots[arg];
  return slot < 0 ? "-" : str("s", slot);
}

}  // namespace

Tensor derive_view(const Slot& slot, const Tensor& base) {
  KILN_ASSERT(slot.view_op != nullptr, "derive_view on a slot that is no view");
  std::vector<ViewMeta> views = slot.view_op->view(ViewArgs{base, *slot.view_attrs});
  ViewMeta& v = views.at(slot.view_output);
  return make_view(base, std::move(v.shape), std::move(v.strides), v.offset);
}

std::string Plan::to_string() const {
  std::ostringstream out;
  out << "slots:\n";
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& slot = slots[i];
    const cpu::StridedView& v = slot.view;
    out << "  s" << i << " %" << slot.value_id << " "
        << str(v.dtype, IntList(v.shape, v.shape + v.ndim));
    if (slot.view_base >= 0) out << " = " << slot.view_op->name << "(s" << slot.view_base << ")";
    out << ": " << root_text(*this, slot) << "\n";
  }
  out << "steps:\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    out << "  " << i << " " << step.op->name << "(";
    for (uint32_t k = 0; k < step.num_inputs; ++k)
      out << (k ? ", " : "") << arg_text(*this, step.first_arg + k);
    out << ") ->";
    for (uint32_t k = 0; k < step.num_outputs; ++k)
      out << " " << arg_text(*this, step.first_arg + step.num_inputs + k);
    if (step.prepared) out << " [prepared]";
    if (step.packed_held >= 0) out << " [packs fixed " << step.packed_held << "]";
    if (step.packed_input >= 0) out << " [packs keyed input " << step.packed_input << "]";
    out << "\n";
  }
  for (size_t w = 0; w < waves.size(); ++w) {
    if (waves[w].count < 2) continue;
    out << "wave " << w << ": steps";
    out << " " << waves[w].first << ".." << waves[w].first + waves[w].count - 1;
    out << (waves[w].concurrent ? " (side by side)" : " (in order: small)") << "\n";
  }
  out << "arena: " << memory.arena_bytes << " bytes (unshared: " << memory.unshared_bytes
      << " bytes)\n";
  return out.str();
}

}  // namespace kiln::jit
