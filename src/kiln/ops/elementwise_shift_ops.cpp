// bitwise_left_shift and bitwise_right_shift (a << b, a >> b): integer
// operands that broadcast and promote as in PyTorch; a count below 0 or at
// least the type's width gives what PyTorch gives (kernels/cpu/shift.cpp).
// ONNX's BitShift (unsigned types only) picks the direction by an attribute,
// so one ONNX op type stands for both: hand-written translations
// (onnx/import_math.cpp, onnx/export_math.cpp).
#include "kiln/kernels/cpu/shift.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

// The promoted dtype must be an integer type: PyTorch has no shift of floats
// or of bools (true << true).
InferResult infer_shift(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  KILN_CHECK_TYPE(is_integral(r.outputs[0].dtype), args.op.name,
                  ": only integer tensors are supported, got ", r.outputs[0].dtype,
                  " (input shapes ", args.inputs[0].shape, " and ", args.inputs[1].shape, ")");
  return r;
}

template <bool kLeft>
void shift_kernel(const KernelArgs& args) {
  cpu::shift(kLeft, args.outputs[0], args.inputs[0], args.inputs[1]);
}

// No backward rule: integer outputs carry no gradient.
OpDef shift_op(std::string name, KernelFn cpu) {
  return OpDef{.name = std::move(name),
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs = {},
               .infer = infer_shift,
               .cpu = cpu,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = {"BitShift"}};
}

}  // namespace

void register_elementwise_shift_ops(OpRegistry& registry) {
  registry.add(shift_op("bitwise_left_shift", shift_kernel<true>));
  registry.add(shift_op("bitwise_right_shift", shift_kernel<false>));
}

}  // namespace kiln
