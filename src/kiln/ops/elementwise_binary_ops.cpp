// Elementwise math on two tensors (or a tensor and a wrapped Python number)
// with broadcasting and PyTorch's type promotion: add, sub, mul, div, pow,
// maximum, minimum, the comparisons, where, add_scaled (add and sub with
// alpha) and the three-operand addcmul and addcdiv. Kernels in
// kernels/cpu/binary.cpp and ternary.cpp.
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/binary.h"
#include "kiln/kernels/cpu/ternary.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/reduction.h"
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
  DimList shape =
      broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where"), b.shape, "where");
  return InferResult{{TensorMeta{common, shape}}, {DType::Bool, common, common}};
}

void where_kernel(const KernelArgs& args) {
  cpu::where(args.outputs[0], args.inputs[0], args.inputs[1], args.inputs[2]);
}

// addcmul / addcdiv (input, tensor1, tensor2; value): the three promote
// together; `value` is converted to their dtype, as PyTorch converts it.
InferResult infer_addcmul(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  KILN_CHECK_TYPE(r.outputs[0].dtype != DType::Bool, args.op.name,
                  ": not supported for bool tensors (shapes ", args.inputs[0].shape, ", ",
                  args.inputs[1].shape, " and ", args.inputs[2].shape, ")");
  return r;
}

// PyTorch refuses an integer tensor1 / tensor2, whose old meaning was a
// truncating division.
InferResult infer_addcdiv(const InferArgs& args) {
  const TensorMeta &t1 = args.inputs[1], &t2 = args.inputs[2];
  KILN_CHECK(is_floating(t1.dtype) || is_floating(t2.dtype),
             "addcdiv: integer division with addcdiv is not supported (tensor1 ", t1.dtype,
             ", tensor2 ", t2.dtype,
             "); write input + value * tensor1 / tensor2 for a true division, or use "
             "floor_divide / trunc for an integer one");
  return infer_addcmul(args);
}

// Note [Add with alpha]
// torch.add(a, b, alpha=s) and sub (alpha -s) round once: ATen's kernel is
// fma(b, s, a) in its vector loop (checked: torch.add(a, b, alpha=0.1)
// differs from a + b * 0.1 in 9% of a million float32 elements and equals
// the float64 result rounded in all of them). kiln wrote it as mul then add,
// two roundings, so `p.add_(g, alpha=-lr)`, the SGD step, was an ulp off
// PyTorch's in 2% of elements, and two kernels where one does. add_scaled is
// that fused form for floating results (integers are exact either way):
// alpha is the attribute, or a 0-d third input, which the type promotion
// casts to the result's dtype as PyTorch casts the number (a compiled
// training step passes its learning rate so).
InferResult infer_add_scaled(const InferArgs& args) {
  KILN_CHECK_VALUE(args.inputs.size() < 3 || args.inputs[2].shape.empty(),
                   "add_scaled: alpha as a tensor must be 0-d, got shape ", args.inputs[2].shape);
  InferResult r = infer_broadcast(args);
  KILN_CHECK_TYPE(is_floating(r.outputs[0].dtype), "add_scaled: computes in a floating dtype, got ",
                  r.outputs[0].dtype, " (shapes ", args.inputs[0].shape, " and ",
                  args.inputs[1].shape,
                  "); integral add with alpha is exact as add(a, mul(b, alpha))");
  return r;
}

void add_scaled_kernel(const KernelArgs& args) {
  double alpha = args.attrs.get_float("alpha");
  if (args.inputs.size() == 3) {
    visit_floating(args.inputs[2].dtype, [&](auto tag) {
      alpha = double(*args.inputs[2].template ptr<const decltype(tag)>());
    });
  }
  cpu::map2_floating(args.outputs[0], args.inputs[0], args.inputs[1], [alpha](auto x, auto y) {
    using T = decltype(x);
    return std::fma(y, T(alpha), x);
  });
}

void addcmul_kernel(const KernelArgs& args) {
  cpu::addcmul(args.outputs[0], args.inputs[0], args.inputs[1], args.inputs[2],
               args.attrs.get_float("value"));
}

void addcdiv_kernel(const KernelArgs& args) {
  cpu::addcdiv(args.outputs[0], args.inputs[0], args.inputs[1], args.inputs[2],
               args.attrs.get_float("value"));
}

// ---- backward rules: gradients are summed back over broadcast dims ----

Tensor reduce_to_input(const GradContext& ctx, size_t i, const Tensor& grad) {
  return ctx.needs_input_grad(i) ? sum_to(grad, ctx.input_shape(i)) : Tensor();
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

std::vector<Tensor> sub_grad(const GradContext& ctx) {  // d(a - b) = da - db
  const Tensor& g = ctx.grad_output(0);
  Tensor gb = ctx.needs_input_grad(1) ? neg(g) : Tensor();
  return {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, gb)};
}

// d(a / b) = da / b - a db / b², the latter as -(a / b) / b as PyTorch does
// (so division by zero gives the same infinities).
std::vector<Tensor> div_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor b = ctx.input(1);
  Tensor ga = ctx.needs_input_grad(0) ? g / b : Tensor();
  Tensor gb = ctx.needs_input_grad(1) ? neg(g) * ((ctx.input(0) / b) / b) : Tensor();
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

// d a^b = b a^(b-1) da + a^b log(a) db, with PyTorch's conventions: no
// gradient to a where b == 0 (even at a == 0), none to b where a == 0 and
// b >= 0 (where log(a) would give 0 * -inf).
std::vector<Tensor> pow_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor ga, gb;
  if (ctx.needs_input_grad(0)) {
    // b - 1 against a 0-d tensor of b's dtype: a wrapped number b (x ** 0.5)
    // minus the number 1.0 would be computed in float32, as two Python
    // numbers are, and lose the exponent's float64 digits.
    Tensor b_minus_one = b - full({}, 1.0, b.dtype());
    ga = where(b == 0.0, 0.0, g * (b * pow(a, b_minus_one)));
  }
  if (ctx.needs_input_grad(1)) {
    Tensor base_zero = (a == 0.0) * (b >= 0.0);
    gb = g * where(base_zero, 0.0, ctx.output(0) * log(a));
  }
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

// maximum/minimum: the gradient goes to the operand that was picked and is
// split in half on ties; where either is NaN (no order) both get all of it,
// as in PyTorch. `a_loses` is a < b for maximum, a > b for minimum.
std::vector<Tensor> select_grad(const GradContext& ctx, const Tensor& a_loses,
                                const Tensor& b_loses) {
  const Tensor& g = ctx.grad_output(0);
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor tie = a == b;
  Tensor half = g * 0.5;
  Tensor ga, gb;
  if (ctx.needs_input_grad(0)) ga = where(tie, half, where(a_loses, 0.0, g));
  if (ctx.needs_input_grad(1)) gb = where(tie, half, where(b_loses, 0.0, g));
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

std::vector<Tensor> maximum_grad(const GradContext& ctx) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  return select_grad(ctx, a<b, a> b);
}

std::vector<Tensor> minimum_grad(const GradContext& ctx) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  return select_grad(ctx, a > b, a < b);
}

// d where(c, a, b) = c ? da : db; the bool condition gets none.
std::vector<Tensor> where_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor cond = ctx.input(0);
  Tensor ga = ctx.needs_input_grad(1) ? where(cond, g, 0.0) : Tensor();
  Tensor gb = ctx.needs_input_grad(2) ? where(cond, 0.0, g) : Tensor();
  return {Tensor(), reduce_to_input(ctx, 1, ga), reduce_to_input(ctx, 2, gb)};
}

// d(a + s b) = da + s db (+ b ds when alpha is a tensor input)
std::vector<Tensor> add_scaled_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const bool alpha_input = ctx.num_inputs() == 3;
  Tensor gb;
  if (ctx.needs_input_grad(1))
    gb = alpha_input ? g * ctx.input(2) : g * ctx.attrs().get_float("alpha");
  std::vector<Tensor> grads = {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, gb)};
  if (alpha_input) grads.push_back(ctx.needs_input_grad(2) ? sum(g * ctx.input(1)) : Tensor());
  return grads;
}

// d(in + v t1 t2) = d in + v t2 d t1 + v t1 d t2
std::vector<Tensor> addcmul_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const double value = ctx.attrs().get_float("value");
  Tensor g1 = ctx.needs_input_grad(1) ? g * (ctx.input(2) * value) : Tensor();
  Tensor g2 = ctx.needs_input_grad(2) ? g * (ctx.input(1) * value) : Tensor();
  return {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, g1), reduce_to_input(ctx, 2, g2)};
}

// d(in + v t1 / t2) = d in + v / t2 d t1 - v t1 / t2² d t2 (PyTorch's forms)
std::vector<Tensor> addcdiv_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const double value = ctx.attrs().get_float("value");
  Tensor t2 = ctx.input(2);
  Tensor g1 = ctx.needs_input_grad(1) ? g * (value / t2) : Tensor();
  Tensor g2 = ctx.needs_input_grad(2) ? neg(g) * ((ctx.input(1) * value) / (t2 * t2)) : Tensor();
  return {reduce_to_input(ctx, 0, g), reduce_to_input(ctx, 1, g1), reduce_to_input(ctx, 2, g2)};
}

OpDef with_grad(OpDef def, GradFn grad) {
  def.grad = grad;
  return def;
}

OpDef binary(std::string name, InferFn infer, KernelFn cpu, OnnxInfo onnx,
             bool may_run_inplace = true) {
  return OpDef{.name = std::move(name),
               .min_inputs = 2,
               .max_inputs = 2,
               .attrs = {},
               .infer = infer,
               .cpu = cpu,
               .kind = OpKind::Elementwise,
               .may_run_inplace = may_run_inplace,
               .onnx = std::move(onnx)};
}

// ONNX's binary ops take operands of one dtype, which kiln's promote to.
// Import makes kiln's op too, except for Div and Pow (onnx/import_ops.cpp:
// ONNX divides integers with truncation; Pow's exponent keeps its type).
OnnxInfo onnx_binary(std::string op_type, OnnxDirection direction = OnnxDirection::Both) {
  return onnx_op(std::move(op_type), {}, {OnnxOperand::Promoted}, direction);
}

// Comparisons write bool, so their output never fits in a float input's buffer.
OpDef comparison(std::string name, KernelFn cpu, OnnxInfo onnx) {
  return binary(std::move(name), infer_comparison, cpu, std::move(onnx), false);
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& registry) {
  registry.add(with_grad(
      binary("add", infer_arithmetic, binary_kernel<BinaryOp::Add>, onnx_binary("Add")), add_grad));
  registry.add(with_grad(binary("sub", infer_sub, binary_kernel<BinaryOp::Sub>, onnx_binary("Sub")),
                         sub_grad));
  registry.add(with_grad(
      binary("mul", infer_arithmetic, binary_kernel<BinaryOp::Mul>, onnx_binary("Mul")), mul_grad));
  // True division: integer and bool operands compute in float32.
  registry.add(with_grad(binary("div", infer_broadcast_float, binary_kernel<BinaryOp::Div>,
                                onnx_binary("Div", OnnxDirection::ExportOnly)),
                         div_grad));
  registry.add(with_grad(binary("pow", infer_pow, binary_kernel<BinaryOp::Pow>,
                                onnx_binary("Pow", OnnxDirection::ExportOnly)),
                         pow_grad));
  registry.add(with_grad(binary("maximum", infer_arithmetic, binary_kernel<BinaryOp::Maximum>,
                                onnx_binary("Max", OnnxDirection::ExportOnly)),
                         maximum_grad));
  registry.add(with_grad(binary("minimum", infer_arithmetic, binary_kernel<BinaryOp::Minimum>,
                                onnx_binary("Min", OnnxDirection::ExportOnly)),
                         minimum_grad));
  // Comparisons write bool: no gradient, so no rule.
  registry.add(comparison("eq", binary_kernel<BinaryOp::Eq>, onnx_binary("Equal")));
  // ONNX has no NotEqual; the exporter writes Not(Equal(a, b)).
  registry.add(comparison("ne", binary_kernel<BinaryOp::Ne>, {}));
  registry.add(comparison("lt", binary_kernel<BinaryOp::Lt>, onnx_binary("Less")));
  registry.add(comparison("le", binary_kernel<BinaryOp::Le>, onnx_binary("LessOrEqual")));
  registry.add(comparison("gt", binary_kernel<BinaryOp::Gt>, onnx_binary("Greater")));
  registry.add(comparison("ge", binary_kernel<BinaryOp::Ge>, onnx_binary("GreaterOrEqual")));
  // where(cond, a, b): the output shares a's dtype, not cond's, so it is not
  // marked as able to reuse input 0's buffer.
  registry.add(OpDef{.name = "where",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {},
                     .infer = infer_where,
                     .cpu = where_kernel,
                     .grad = where_grad,
                     .kind = OpKind::Elementwise,
                     .onnx = onnx_op("Where", {}, {OnnxOperand::Bool, OnnxOperand::Output})});
  registry.add(OpDef{.name = "add_scaled",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .attrs = {{"alpha", AttrKind::Float, 1.0}},
                     .infer = infer_add_scaled,
                     .cpu = add_scaled_kernel,
                     .grad = add_scaled_grad,
                     .kind = OpKind::Elementwise,
                     .may_run_inplace = true,
                     .onnx = {}});  // onnx/export_math.cpp: Mul and Add
  auto addc = [](std::string name, InferFn infer, KernelFn cpu, GradFn grad) {
    return OpDef{.name = std::move(name),
                 .min_inputs = 3,
                 .max_inputs = 3,
                 .attrs = {{"value", AttrKind::Float, 1.0}},
                 .infer = infer,
                 .cpu = cpu,
                 .grad = grad,
                 .kind = OpKind::Elementwise,
                 .may_run_inplace = true,
                 .onnx = {}};
  };
  registry.add(addc("addcmul", infer_addcmul, addcmul_kernel, addcmul_grad));
  registry.add(addc("addcdiv", infer_addcdiv, addcdiv_kernel, addcdiv_grad));
}

}  // namespace kiln
