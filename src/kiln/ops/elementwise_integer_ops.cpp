// Elementwise ops with integer semantics: the divisions with a rounding
// (remainder, fmod, floor_divide) and the bitwise ops (bitwise_and, _or,
// _xor, _not). Operands broadcast and promote as in PyTorch. Kernels in
// kernels/cpu/binary.cpp (math in kernels/cpu/division.h) and unary.h.
#include <limits>

#include "kiln/kernels/cpu/binary.h"
#include "kiln/kernels/cpu/unary.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

using cpu::BinaryOp;

template <BinaryOp Op>
void binary_kernel(const KernelArgs& args) {
  cpu::binary(Op, args.outputs[0], args.inputs[0], args.inputs[1]);
}

// remainder, fmod and floor_divide: numbers of any kind but bool (PyTorch
// has no kernel for bool, where 0 and 1 would only divide by 1 or fail).
InferResult infer_division(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  KILN_CHECK_TYPE(r.outputs[0].dtype != DType::Bool, args.op.name,
                  ": not supported for bool tensors (shapes ", args.inputs[0].shape, " and ",
                  args.inputs[1].shape, ")");
  return r;
}

void check_bitwise_dtype(const InferArgs& args, DType dtype) {
  KILN_CHECK_TYPE(!is_floating(dtype), args.op.name,
                  ": only integer and bool tensors are supported, got ", dtype,
                  " (bitwise ops have no meaning for floating values; input shape ",
                  args.inputs[0].shape, ")");
}

// The promoted dtype must be integer or bool: int & 2.5 is an error, as in
// PyTorch, not a silent float.
InferResult infer_bitwise(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  check_bitwise_dtype(args, r.outputs[0].dtype);
  return r;
}

InferResult infer_bitwise_not(const InferArgs& args) {
  check_bitwise_dtype(args, args.inputs[0].dtype);
  return infer_same(args);
}

// ~x: logical not for bool, two's complement not for integers.
struct BitwiseNot {
  explicit BitwiseNot(const Attrs&) {}
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else if constexpr (std::is_integral_v<T>) {
      return T(~x);
    } else {
      return x;  // never reached: inference rejects floating inputs
    }
  }
};

void bitwise_not_kernel(const KernelArgs& args) {
  const cpu::StridedView &out = args.outputs[0], &in = args.inputs[0];
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::unary_loop<T, T>(out, in, BitwiseNot(args.attrs));
  });
}

// ---- backward rules (floating operands; integers carry no gradient) ----

Tensor reduce_to_input(const GradContext& ctx, size_t i, const Tensor& grad) {
  return ctx.needs_input_grad(i) ? sum_to(grad, ctx.input_shape(i)) : Tensor();
}

// a - q b with q = floor(a / b) (remainder) or trunc(a / b) (fmod), a step
// function of a and b: d/da = 1, d/db = -q, PyTorch's formulas. q is built
// from floor / trunc, whose zero gradients let the rule be differentiated
// again (floor_divide has no rule); it can differ from PyTorch's quotient
// only where a / b rounds onto an integer.
template <Tensor (*Quotient)(const Tensor&, const Tensor&)>
std::vector<Tensor> rounded_rest_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor gb;
  if (ctx.needs_input_grad(1)) gb = neg(g) * Quotient(ctx.input(0), ctx.input(1));
  return {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, gb)};
}

// PyTorch's floor division goes through fmod, so where floor(a / b) is
// exact it still differs at infinities: an infinite a gives NaN, and a
// finite nonzero a over an infinite b of the other sign gives -1, not -0.
Tensor floor_quotient(const Tensor& a, const Tensor& b) {
  Tensor q = floor(a / b);
  Tensor below_zero = isinf(b) & (a != 0.0) & ((a < 0.0) != (b < 0.0));
  q = where(below_zero, Scalar(-1.0), q);
  return where(isinf(a), Scalar(std::numeric_limits<double>::quiet_NaN()), q);
}
Tensor trunc_quotient(const Tensor& a, const Tensor& b) {
  return trunc(a / b);
}

OpDef binary(std::string name, InferFn infer, KernelFn cpu, OnnxInfo onnx, GradFn grad = nullptr) {
  return OpDef{.name = std::move(name),
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs = {},
               .infer = infer,
               .cpu = cpu,
               .grad = grad,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = std::move(onnx)};
}

// ONNX has BitwiseAnd & co. from opset 18; kiln writes opsets 13 to 17, where
// its exporter writes bools as And, Or, Xor, Not by hand (onnx/export_math.cpp).
OnnxInfo onnx_bitwise(std::string op_type) {
  OnnxInfo info = onnx_op(std::move(op_type), {}, {}, OnnxDirection::ImportOnly);
  info.min_opset = 18;
  return info;
}

}  // namespace

void register_elementwise_integer_ops(OpRegistry& registry) {
  // ONNX's Mod with fmod=1 is C's fmod; its fmod=0 (Python's sign rule) is
  // for integers only, so remainder has no one-op translation.
  registry.add(binary("remainder", infer_division, binary_kernel<BinaryOp::Remainder>, {},
                      rounded_rest_grad<floor_quotient>));
  registry.add(binary("fmod", infer_division, binary_kernel<BinaryOp::Fmod>, {"Mod"},
                      rounded_rest_grad<trunc_quotient>));
  // No backward rule: PyTorch has none either (a step function whose
  // derivative is zero almost everywhere, which PyTorch refuses to pretend).
  registry.add(binary("floor_divide", infer_division, binary_kernel<BinaryOp::FloorDivide>, {}));
  registry.add(binary("bitwise_and", infer_bitwise, binary_kernel<BinaryOp::BitwiseAnd>,
                      onnx_bitwise("BitwiseAnd")));
  registry.add(binary("bitwise_or", infer_bitwise, binary_kernel<BinaryOp::BitwiseOr>,
                      onnx_bitwise("BitwiseOr")));
  registry.add(binary("bitwise_xor", infer_bitwise, binary_kernel<BinaryOp::BitwiseXor>,
                      onnx_bitwise("BitwiseXor")));
  registry.add(OpDef{.name = "bitwise_not",
                     .attrs = {},
                     .infer = infer_bitwise_not,
                     .cpu = bitwise_not_kernel,
                     .kind = OpKind::Elementwise,
                     .may_run_inplace = true,
                     .onnx = onnx_bitwise("BitwiseNot")});
}

}  // namespace kiln
