// Elementwise math on two tensors (or a tensor and a wrapped Python number)
// with broadcasting and PyTorch's type promotion: add, sub, mul, div, pow,
// maximum, minimum, the comparisons, and where. Kernels in
// kernels/cpu/binary.cpp.
#include "kiln/kernels/cpu/binary.h"
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

InferResult infer_arithmetic(const InferArgs& args) {
  return infer_broadcast(args);
}

// PyTorch rejects `-` with any bool operand rather than guess between xor
// and logical_not.
InferResult infer_sub(const InferArgs& args) {
  const TensorMeta &a = args.inputs[0], &b = args.inputs[1];
  KILN_CHECK_TYPE(a.dtype != DType::Bool || b.dtype != DType::Bool,
                  "sub: subtraction, the `-` operator, with two bool tensors is not supported "
                  "(shapes ",
                  a.shape, " and ", b.shape, "); use logical_xor() instead");
  KILN_CHECK_TYPE(a.dtype != DType::Bool && b.dtype != DType::Bool,
                  "sub: subtraction, the `-` operator, with a bool tensor is not supported "
                  "(shapes ",
                  a.shape, " and ", b.shape, "); to invert a mask use logical_not()");
  return infer_broadcast(args);
}

InferResult infer_pow(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  KILN_CHECK_TYPE(r.outputs[0].dtype != DType::Bool, "pow: not supported for bool inputs (shapes ",
                  args.inputs[0].shape, " and ", args.inputs[1].shape, ")");
  return r;
}

InferResult infer_comparison(const InferArgs& args) {
  return infer_broadcast(args, DType::Bool);
}

InferResult infer_where(const InferArgs& args) {
  const TensorMeta &cond = args.inputs[0], &a = args.inputs[1], &b = args.inputs[2];
  KILN_CHECK_TYPE(cond.dtype == DType::Bool,
                  "where: expected condition to be a bool tensor, but got a tensor with dtype ",
                  cond.dtype, " (shape ", cond.shape, ")");
  DType common = result_type(args.inputs.subspan(1));
  IntList shape =
      broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where"), b.shape, "where");
  return InferResult{{TensorMeta{common, shape}}, {DType::Bool, common, common}};
}

void where_kernel(const KernelArgs& args) {
  cpu::where(args.outputs[0], args.inputs[0], args.inputs[1], args.inputs[2]);
}

// ---- backward rules: gradients are summed back over broadcast dims ----

Tensor reduce_to_input(const GradContext& ctx, size_t i, const Tensor& grad) {
  return ctx.needs_input_grad(i) ? sum_to(grad, ctx.input_meta(i).shape) : Tensor();
}

std::vector<Tensor> add_grad(const GradContext& ctx) {  // d(a + b) = da + db
  const Tensor& g = ctx.grad_output(0);
  return {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, g)};
}

std::vector<Tensor> mul_grad(const GradContext& ctx) {  // d(a * b) = b da + a db
  const Tensor& g = ctx.grad_output(0);
  Tensor ga = ctx.needs_input_grad(0) ? g * ctx.input(1) : Tensor();
  Tensor gb = ctx.needs_input_grad(1) ? g * ctx.input(0) : Tensor();
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

OpDef with_grad(OpDef def, GradFn grad) {
  def.grad = grad;
  return def;
}

OpDef binary(std::string name, InferFn infer, KernelFn cpu, std::string onnx_op,
             bool may_run_inplace = true) {
  return OpDef{.name = std::move(name),
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs = {},
               .infer = infer,
               .cpu = cpu,
               .kind = OpKind::Elementwise,
               .may_run_inplace = may_run_inplace,
               .onnx = {std::move(onnx_op)}};
}

// Comparisons write bool, so their output never fits in a float input's buffer.
OpDef comparison(std::string name, KernelFn cpu, std::string onnx_op) {
  return binary(std::move(name), infer_comparison, cpu, std::move(onnx_op), false);
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& registry) {
  registry.add(
      with_grad(binary("add", infer_arithmetic, binary_kernel<BinaryOp::Add>, "Add"), add_grad));
  registry.add(binary("sub", infer_sub, binary_kernel<BinaryOp::Sub>, "Sub"));
  registry.add(
      with_grad(binary("mul", infer_arithmetic, binary_kernel<BinaryOp::Mul>, "Mul"), mul_grad));
  // True division: integer and bool operands compute in float32.
  registry.add(binary("div", infer_broadcast_float, binary_kernel<BinaryOp::Div>, "Div"));
  registry.add(binary("pow", infer_pow, binary_kernel<BinaryOp::Pow>, "Pow"));
  registry.add(binary("maximum", infer_arithmetic, binary_kernel<BinaryOp::Maximum>, "Max"));
  registry.add(binary("minimum", infer_arithmetic, binary_kernel<BinaryOp::Minimum>, "Min"));
  registry.add(comparison("eq", binary_kernel<BinaryOp::Eq>, "Equal"));
  // ONNX has no NotEqual; the exporter writes Not(Equal(a, b)).
  registry.add(comparison("ne", binary_kernel<BinaryOp::Ne>, ""));
  registry.add(comparison("lt", binary_kernel<BinaryOp::Lt>, "Less"));
  registry.add(comparison("le", binary_kernel<BinaryOp::Le>, "LessOrEqual"));
  registry.add(comparison("gt", binary_kernel<BinaryOp::Gt>, "Greater"));
  registry.add(comparison("ge", binary_kernel<BinaryOp::Ge>, "GreaterOrEqual"));
  // where(cond, a, b): the output shares a's dtype, not cond's, so it is not
  // marked as able to reuse input 0's buffer.
  registry.add(OpDef{.name = "where",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {},
                     .infer = infer_where,
                     .cpu = where_kernel,
                     .kind = OpKind::Elementwise,
                     .onnx = {"Where"}});
}

}  // namespace kiln
