#include "kiln/ops/registry.h"

#include <memory>

#include "kiln/ops/collective_ops.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/spectral.h"

namespace kiln {

void OpRegistry::add(OpDef def) {
  KILN_ASSERT(find(def.name) == nullptr, "op '", def.name, "' registered twice");
  KILN_ASSERT(def.infer != nullptr, "op '", def.name, "' has no infer function");
  if (def.kind == OpKind::View) {
    KILN_ASSERT(def.view != nullptr, "view op '", def.name, "' has no view function");
  } else if (def.blocks.empty()) {  // control flow runs its blocks, not a kernel
    KILN_ASSERT(def.cpu != nullptr, "op '", def.name, "' has no cpu kernel");
  }
  defs_.push_back(std::make_unique<OpDef>(std::move(def)));
  order_.push_back(defs_.back().get());
  by_name_.emplace(defs_.back()->name, defs_.back().get());
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  const OpDef* def = find(name);
  KILN_CHECK_VALUE(def != nullptr, "unknown op '", name, "'");
  return *def;
}

OpRegistry& op_registry() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_builtin_ops(*r);
    return r;
  }();
  return *registry;
}

void register_builtin_ops(OpRegistry& registry) {
  register_copy_ops(registry);
  register_elementwise_unary_ops(registry);
  register_elementwise_math_ops(registry);
  register_elementwise_binary_ops(registry);
  register_elementwise_integer_ops(registry);
  register_elementwise_shift_ops(registry);
  register_scatter_ops(registry);
  register_reduction_ops(registry);
  register_view_ops(registry);
  register_shape_ops(registry);
  register_linalg_ops(registry);
  register_conv_pool_ops(registry);
  register_resample_ops(registry);
  register_grid_sample_ops(registry);
  register_roi_pool_ops(registry);
  register_deform_conv_ops(registry);
  register_scatter_reduce_ops(registry);
  register_pad_ops(registry);
  register_nn_ops(registry);
  register_random_ops(registry);
  register_random_sample_ops(registry);
  register_rnn_ops(registry);
  register_sort_ops(registry);
  register_scan_ops(registry);
  register_mask_ops(registry);
  register_det_ops(registry);             // det, det_cofactor
  register_spectral_ops(registry);        // dft
  register_data_dependent_ops(registry);  // nonzero, unique, non_max_suppression
  register_fused_ops(registry);           // after the ops they fuse
  register_control_flow_ops(registry);
  register_custom_function_ops(registry);
  register_collective_ops(registry);  // all_reduce_start, all_reduce_wait
}

}  // namespace kiln
