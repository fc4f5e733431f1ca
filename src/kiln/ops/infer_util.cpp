#include "kiln/ops/infer_util.h"

namespace kiln {

DType result_type(std::span<const TensorMeta> inputs) {
  ResultTypeState state;
  for (const TensorMeta& m : inputs) {
    if (!m.defined) continue;
    if (m.wrapped_number) {
      state.add_wrapped_number(m.dtype);
    } else {
      state.add_tensor(m.dtype, m.shape.empty());
    }
  }
  return state.result();
}

InferResult infer_same(const InferArgs& args) {
  return InferResult{{TensorMeta{args.inputs[0].dtype, args.inputs[0].shape}}, {}};
}

InferResult infer_unary_float(const InferArgs& args) {
  DType in = args.inputs[0].dtype;
  DType compute = is_floating(in) ? in : kDefaultFloat;
  return InferResult{{TensorMeta{compute, args.inputs[0].shape}}, {compute}};
}

InferResult infer_broadcast(const InferArgs& args, std::optional<DType> out_dtype) {
  DType common = result_type(args.inputs);
  DimList shape;
  bool first = true;
  for (const TensorMeta& m : args.inputs) {
    if (!m.defined) continue;
    shape = first ? m.shape : broadcast_shapes(shape, m.shape, args.op.name);
    first = false;
  }
  std::vector<DType> input_dtypes(args.inputs.size(), common);
  return InferResult{{TensorMeta{out_dtype.value_or(common), shape}}, std::move(input_dtypes)};
}

InferResult infer_broadcast_float(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  DType common = r.outputs[0].dtype;
  if (is_floating(common)) return r;
  r.outputs[0].dtype = kDefaultFloat;
  for (DType& d : r.input_dtypes)
    d = kDefaultFloat;
  return r;
}

void check_not_bool(const InferArgs& args, size_t input) {
  KILN_CHECK_TYPE(args.inputs[input].dtype != DType::Bool, args.op.name,
                  ": not supported for bool input (input ", input, ", shape ",
                  args.inputs[input].shape, ")");
}

void check_floating(const InferArgs& args, size_t input) {
  KILN_CHECK_TYPE(is_floating(args.inputs[input].dtype), args.op.name,
                  ": expected a floating input, got ", args.inputs[input].dtype, " (input ", input,
                  ", shape ", args.inputs[input].shape, ")");
}

}  // namespace kiln
