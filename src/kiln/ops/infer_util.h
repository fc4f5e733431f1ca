// Shape and dtype inference shared by op families.
#pragma once

#include "kiln/ops/op.h"

namespace kiln {

// Output = input 0's meta.
InferResult infer_same(const InferArgs& args);
// Integer and bool inputs give float32 (exp, sin, sqrt, ...).
InferResult infer_unary_float(const InferArgs& args);
// All inputs promoted to their result type (PyTorch's rules) and broadcast;
// `out_dtype` overrides the output dtype (comparisons give bool).
InferResult infer_broadcast(const InferArgs& args, std::optional<DType> out_dtype = {});
// Like infer_broadcast, but integer and bool results are computed in float32 (div).
InferResult infer_broadcast_float(const InferArgs& args);

// The promoted dtype of the given (defined) inputs.
DType result_type(std::span<const TensorMeta> inputs);

// "add: expected a floating or integer input, got bool": for ops that reject a dtype.
void check_not_bool(const InferArgs& args, size_t input);
void check_floating(const InferArgs& args, size_t input);

}  // namespace kiln
