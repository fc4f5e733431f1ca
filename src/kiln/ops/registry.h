// The op table. register_builtin_ops() fills it explicitly, one family at a
// time; there are no static registrars.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/ops/op.h"

namespace kiln {

// The version of the op table's schema (op names, their inputs, attributes
// and meaning) that saved models record. Adding an op or an attribute with a
// default keeps it; changing what an existing op or attribute means bumps it,
// so a model file written against a newer table is refused, not misread.
inline constexpr int kOpSchemaVersion = 1;

class OpRegistry {
 public:
  void add(OpDef def);  // checks the entry is complete
  const OpDef* find(const std::string& name) const;
  const OpDef& get(const std::string& name) const;  // throws naming the op
  // In registration order, so every walk is deterministic.
  const std::vector<const OpDef*>& all() const { return order_; }

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
  std::vector<const OpDef*> order_;
  std::unordered_map<std::string, const OpDef*> by_name_;  // lookups only, never iterated
};

// The process-wide table, filled on first use.
OpRegistry& op_registry();
inline const OpDef& op(const std::string& name) {
  return op_registry().get(name);
}

void register_builtin_ops(OpRegistry& registry);

// One function per op family, each in its own file under ops/.
void register_elementwise_unary_ops(OpRegistry& registry);
void register_elementwise_binary_ops(OpRegistry& registry);
void register_elementwise_integer_ops(OpRegistry& registry);  // remainder, fmod, bitwise_*
void register_elementwise_shift_ops(OpRegistry& registry);    // bitwise_left/right_shift
void register_elementwise_math_ops(OpRegistry& registry);     // log1p, erf, atan2, ...
void register_scatter_ops(OpRegistry& registry);              // scatter
void register_reduction_ops(OpRegistry& registry);
void register_copy_ops(OpRegistry& registry);  // cast, clone, contiguous, fill
void register_view_ops(OpRegistry& registry);
void register_grid_sample_ops(OpRegistry& registry);
void register_roi_pool_ops(OpRegistry& registry);     // max_roi_pool
void register_deform_conv_ops(OpRegistry& registry);  // deform_conv2d, deform_im2col
void register_scatter_reduce_ops(OpRegistry& registry);
void register_shape_ops(OpRegistry& registry);      // cat, stack, gather, embedding, one_hot, ...
void register_linalg_ops(OpRegistry& registry);     // matmul, linear, addmm
void register_fused_ops(OpRegistry& registry);      // linear_act, conv2d_act, fused_elementwise
void register_conv_pool_ops(OpRegistry& registry);  // conv2d, conv_transpose2d, pooling
void register_resample_ops(OpRegistry& registry);   // upsample_nearest2d, upsample_bilinear2d
void register_pad_ops(OpRegistry& registry);        // pad
void register_nn_ops(OpRegistry& registry);         // dropout, batch_norm, layer_norm
void register_random_ops(OpRegistry& registry);     // uniform, normal, randint, *_like
void register_random_sample_ops(OpRegistry& registry);    // bernoulli, multinomial, randperm
void register_rnn_ops(OpRegistry& registry);              // lstm/gru_cell_pointwise(_backward)
void register_control_flow_ops(OpRegistry& registry);     // cond, while_loop, scan
void register_sort_ops(OpRegistry& registry);             // sort, argsort, topk
void register_scan_ops(OpRegistry& registry);             // cumsum, cumprod, flip, roll
void register_mask_ops(OpRegistry& registry);             // triu, tril, masked_fill
void register_custom_function_ops(OpRegistry& registry);  // custom_function (autograd.Function)

}  // namespace kiln
