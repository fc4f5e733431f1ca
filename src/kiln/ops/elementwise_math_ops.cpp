// More elementwise math, the functions of libm that PyTorch programs call:
// log1p, expm1, log2, log10, reciprocal, erf, erfc, the trigonometric and
// hyperbolic functions and their inverses (tan, asin, acos, atan, sinh,
// cosh, asinh, acosh, atanh) on one tensor, and atan2, hypot and logaddexp
// on two. Each op's math is a functor beside its OpDef (as in
// elementwise_unary_ops.cpp); the loops are kernels/cpu/unary.h and binary.h.
// Integer and bool inputs compute in float32, as in PyTorch, except where
// PyTorch refuses them (hypot, logaddexp).
#include <cmath>
#include <numbers>

#include "kiln/kernels/cpu/binary.h"
#include "kiln/kernels/cpu/unary.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

// ---- the math of each op, on one element (float or double) ----

template <auto kMath>
struct Math {
  explicit Math(const Attrs&) {}
  template <typename T>
  T operator()(T x) const {
    return T(kMath(x));
  }
};

using Log1p = Math<[](auto x) { return std::log1p(x); }>;
using Expm1 = Math<[](auto x) { return std::expm1(x); }>;
using Log2 = Math<[](auto x) { return std::log2(x); }>;
using Log10 = Math<[](auto x) { return std::log10(x); }>;
using Reciprocal = Math<[](auto x) { return decltype(x)(1) / x; }>;
using Erf = Math<[](auto x) { return std::erf(x); }>;
using Erfc = Math<[](auto x) { return std::erfc(x); }>;
using Tan = Math<[](auto x) { return std::tan(x); }>;
using Asin = Math<[](auto x) { return std::asin(x); }>;
using Acos = Math<[](auto x) { return std::acos(x); }>;
using Atan = Math<[](auto x) { return std::atan(x); }>;
using Sinh = Math<[](auto x) { return std::sinh(x); }>;
using Cosh = Math<[](auto x) { return std::cosh(x); }>;
using Asinh = Math<[](auto x) { return std::asinh(x); }>;
using Acosh = Math<[](auto x) { return std::acosh(x); }>;
using Atanh = Math<[](auto x) { return std::atanh(x); }>;

template <typename Fn>
void unary_kernel(const KernelArgs& args) {
  cpu::map_floating(args.outputs[0], args.inputs[0], Fn(args.attrs));
}

// log(e^a + e^b) without overflow: the larger plus log1p(e^-|a-b|). Equal
// infinities give themselves (their difference would be NaN), as PyTorch.
template <typename T>
T logaddexp_of(T a, T b) {
  if (std::isinf(a) && a == b) return a;
  T larger = std::max(a, b);
  return larger + std::log1p(std::exp(-std::fabs(a - b)));
}

template <auto kMath>
void binary_kernel(const KernelArgs& args) {
  cpu::map2_floating(args.outputs[0], args.inputs[0], args.inputs[1],
                     [](auto a, auto b) { return kMath(a, b); });
}

constexpr auto kAtan2 = [](auto a, auto b) { return std::atan2(a, b); };
constexpr auto kHypot = [](auto a, auto b) { return std::hypot(a, b); };
constexpr auto kLogaddexp = [](auto a, auto b) { return logaddexp_of(a, b); };

// hypot and logaddexp have no integer kernels in PyTorch ("not implemented
// for 'Long'"); neither here.
InferResult infer_broadcast_floating_only(const InferArgs& args) {
  InferResult r = infer_broadcast(args);
  KILN_CHECK(is_floating(r.outputs[0].dtype), args.op.name,
             ": not implemented for integer or bool inputs (dtypes ", args.inputs[0].dtype, " and ",
             args.inputs[1].dtype, ", shapes ", args.inputs[0].shape, " and ", args.inputs[1].shape,
             "); convert them to a floating dtype first");
  return r;
}

// ---- backward rules, written with kiln ops (so they differentiate again);
// the formulas follow PyTorch's derivatives.yaml, so the values at poles and
// outside the domain (inf, NaN) match too.

using UnaryGrad = Tensor (*)(const GradContext&, const Tensor& g);

template <UnaryGrad Rule>
std::vector<Tensor> unary_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  return {Rule(ctx, ctx.grad_output(0))};
}

constexpr double kTwoOverSqrtPi = 2.0 * std::numbers::inv_sqrtpi;

Tensor log1p_grad(const GradContext& ctx, const Tensor& g) {  // 1 / (1 + x)
  return g / (ctx.input(0) + 1.0);
}
Tensor expm1_grad(const GradContext& ctx, const Tensor& g) {  // e^x = y + 1
  return g * (ctx.output(0) + 1.0);
}
Tensor log2_grad(const GradContext& ctx, const Tensor& g) {  // 1 / (x ln 2)
  return g / (ctx.input(0) * std::numbers::ln2);
}
Tensor log10_grad(const GradContext& ctx, const Tensor& g) {  // 1 / (x ln 10)
  return g / (ctx.input(0) * std::numbers::ln10);
}
Tensor reciprocal_grad(const GradContext& ctx, const Tensor& g) {  // -1 / x² = -y²
  Tensor y = ctx.output(0);
  return neg(g) * (y * y);
}
Tensor erf_grad(const GradContext& ctx, const Tensor& g) {  // 2 / sqrt(pi) e^(-x²)
  Tensor x = ctx.input(0);
  return g * (kTwoOverSqrtPi * exp(neg(x * x)));
}
Tensor erfc_grad(const GradContext& ctx, const Tensor& g) {  // -2 / sqrt(pi) e^(-x²)
  Tensor x = ctx.input(0);
  return g * (-kTwoOverSqrtPi * exp(neg(x * x)));
}
Tensor tan_grad(const GradContext& ctx, const Tensor& g) {  // 1 + tan² x
  Tensor y = ctx.output(0);
  return g * (y * y + 1.0);
}
Tensor asin_grad(const GradContext& ctx, const Tensor& g) {  // 1 / sqrt(1 - x²)
  Tensor x = ctx.input(0);
  return g * rsqrt(1.0 - x * x);
}
Tensor acos_grad(const GradContext& ctx, const Tensor& g) {  // -1 / sqrt(1 - x²)
  Tensor x = ctx.input(0);
  return g * neg(rsqrt(1.0 - x * x));
}
Tensor atan_grad(const GradContext& ctx, const Tensor& g) {  // 1 / (1 + x²)
  Tensor x = ctx.input(0);
  return g / (x * x + 1.0);
}
Tensor sinh_grad(const GradContext& ctx, const Tensor& g) {  // cosh x
  return g * cosh(ctx.input(0));
}
Tensor cosh_grad(const GradContext& ctx, const Tensor& g) {  // sinh x
  return g * sinh(ctx.input(0));
}
Tensor asinh_grad(const GradContext& ctx, const Tensor& g) {  // 1 / sqrt(x² + 1)
  Tensor x = ctx.input(0);
  return g * rsqrt(x * x + 1.0);
}
Tensor acosh_grad(const GradContext& ctx, const Tensor& g) {  // 1 / sqrt(x² - 1)
  Tensor x = ctx.input(0);
  return g * rsqrt(x * x - 1.0);
}
Tensor atanh_grad(const GradContext& ctx, const Tensor& g) {  // 1 / (1 - x²)
  Tensor x = ctx.input(0);
  return g / (1.0 - x * x);
}

Tensor reduce_to_input(const GradContext& ctx, size_t i, const Tensor& grad) {
  return ctx.needs_input_grad(i) ? sum_to(grad, ctx.input_shape(i)) : Tensor();
}

// d atan2(a, b) = (b da - a db) / (a² + b²). Where a² + b² is 0 (at the
// origin, or where the squares underflow) the gradient is 0, as PyTorch.
std::vector<Tensor> atan2_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor squares = a * a + b * b;
  Tensor zero = squares == 0.0;
  Tensor recip = where(zero, 0.0, 1.0 / where(zero, 1.0, squares));
  Tensor ga = ctx.needs_input_grad(0) ? g * b * recip : Tensor();
  Tensor gb = ctx.needs_input_grad(1) ? g * neg(a) * recip : Tensor();
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

// d hypot(a, b) = (a da + b db) / y
std::vector<Tensor> hypot_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor y = ctx.output(0);
  Tensor ga = ctx.needs_input_grad(0) ? g * ctx.input(0) / y : Tensor();
  Tensor gb = ctx.needs_input_grad(1) ? g * ctx.input(1) / y : Tensor();
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

// d logaddexp(a, b) = da / (1 + e^(b - a)) + db / (1 + e^(a - b))
std::vector<Tensor> logaddexp_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor ga = ctx.needs_input_grad(0) ? g / (exp(b - a) + 1.0) : Tensor();
  Tensor gb = ctx.needs_input_grad(1) ? g / (exp(a - b) + 1.0) : Tensor();
  return {reduce_to_input(ctx, 0, ga), reduce_to_input(ctx, 1, gb)};
}

// `onnx`: the ONNX op of the same function, if any; integer inputs are
// cast to the float output first, as the kernel computes.
OpDef unary(std::string name, KernelFn cpu, GradFn grad, std::string onnx_type = "") {
  return OpDef{.name = std::move(name),
               .infer = infer_unary_float,
               .cpu = cpu,
               .grad = grad,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = onnx_type.empty()
                           ? OnnxInfo{}
                           : onnx_op(std::move(onnx_type), {}, {OnnxOperand::Output})};
}

OpDef binary(std::string name, InferFn infer, KernelFn cpu, GradFn grad) {
  return OpDef{.name = std::move(name),
               .min_inputs = 2,
               .max_inputs = 2,
               .infer = infer,
               .cpu = cpu,
               .grad = grad,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = {}};
}

}  // namespace

void register_elementwise_math_ops(OpRegistry& registry) {
  registry.add(unary("log1p", unary_kernel<Log1p>, unary_grad<log1p_grad>));
  registry.add(unary("expm1", unary_kernel<Expm1>, unary_grad<expm1_grad>));
  registry.add(unary("log2", unary_kernel<Log2>, unary_grad<log2_grad>));
  registry.add(unary("log10", unary_kernel<Log10>, unary_grad<log10_grad>));
  registry.add(
      unary("reciprocal", unary_kernel<Reciprocal>, unary_grad<reciprocal_grad>, "Reciprocal"));
  registry.add(unary("erf", unary_kernel<Erf>, unary_grad<erf_grad>, "Erf"));
  registry.add(unary("erfc", unary_kernel<Erfc>, unary_grad<erfc_grad>));
  registry.add(unary("tan", unary_kernel<Tan>, unary_grad<tan_grad>, "Tan"));
  registry.add(unary("asin", unary_kernel<Asin>, unary_grad<asin_grad>, "Asin"));
  registry.add(unary("acos", unary_kernel<Acos>, unary_grad<acos_grad>, "Acos"));
  registry.add(unary("atan", unary_kernel<Atan>, unary_grad<atan_grad>, "Atan"));
  registry.add(unary("sinh", unary_kernel<Sinh>, unary_grad<sinh_grad>, "Sinh"));
  registry.add(unary("cosh", unary_kernel<Cosh>, unary_grad<cosh_grad>, "Cosh"));
  registry.add(unary("asinh", unary_kernel<Asinh>, unary_grad<asinh_grad>, "Asinh"));
  registry.add(unary("acosh", unary_kernel<Acosh>, unary_grad<acosh_grad>, "Acosh"));
  registry.add(unary("atanh", unary_kernel<Atanh>, unary_grad<atanh_grad>, "Atanh"));
  registry.add(binary("atan2", infer_broadcast_float, binary_kernel<kAtan2>, atan2_grad));
  registry.add(binary("hypot", infer_broadcast_floating_only, binary_kernel<kHypot>, hypot_grad));
  registry.add(binary("logaddexp", infer_broadcast_floating_only, binary_kernel<kLogaddexp>,
                      logaddexp_grad));
}

}  // namespace kiln
