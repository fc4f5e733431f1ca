// Elementwise math on one tensor: neg, abs, exp, log, sqrt, rsqrt, sin, cos,
// tanh, sigmoid, the activations (relu, leaky_relu, gelu, elu, softplus),
// logical_not and clamp. The kernels are in kernels/cpu/unary.cpp.
#include <cmath>

#include "kiln/kernels/cpu/unary.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

using cpu::UnaryOp;

template <UnaryOp Op>
void unary_kernel(const KernelArgs& args) {
  cpu::unary(Op, args.outputs[0], args.inputs[0]);
}

// Integer inputs keep their dtype (neg, abs, relu); bool is rejected.
InferResult infer_numeric(const InferArgs& args) {
  check_not_bool(args, 0);
  return infer_same(args);
}

InferResult infer_neg(const InferArgs& args) {
  KILN_CHECK_TYPE(args.inputs[0].dtype != DType::Bool,
                  "neg: negation, the `-` operator, on a bool tensor is not supported (shape ",
                  args.inputs[0].shape, "); to invert a mask use logical_not()");
  return infer_same(args);
}

// The activations are defined on floating inputs only, as in PyTorch.
InferResult infer_floating(const InferArgs& args) {
  check_floating(args, 0);
  return infer_same(args);
}

InferResult infer_gelu(const InferArgs& args) {
  const std::string& approximate = args.attrs.get_string("approximate");
  KILN_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                   "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return infer_floating(args);
}

InferResult infer_logical_not(const InferArgs& args) {
  return InferResult{{TensorMeta{DType::Bool, args.inputs[0].shape}}, {}};
}

void leaky_relu_kernel(const KernelArgs& args) {
  cpu::unary(UnaryOp::LeakyRelu, args.outputs[0], args.inputs[0],
             args.attrs.get_float("negative_slope"));
}

void gelu_kernel(const KernelArgs& args) {
  bool tanh = args.attrs.get_string("approximate") == "tanh";
  cpu::unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, args.outputs[0], args.inputs[0]);
}

void elu_kernel(const KernelArgs& args) {
  cpu::unary(UnaryOp::Elu, args.outputs[0], args.inputs[0], args.attrs.get_float("alpha"));
}

void softplus_kernel(const KernelArgs& args) {
  cpu::unary(UnaryOp::Softplus, args.outputs[0], args.inputs[0], args.attrs.get_float("beta"),
             args.attrs.get_float("threshold"));
}

// A bound takes part in type promotion like the Python number it stands for.
// The attribute is a float, so a whole-valued bound counts as an int: an
// int64 tensor clamped to [0, 5] stays int64 (as torch.clamp(x, 0, 5) does),
// one clamped to 0.5 becomes float32. Unlike PyTorch, clamp(x, 1.0) on an
// integer tensor therefore stays integer.
TensorMeta bound_meta(double bound) {
  bool whole = std::isfinite(bound) && bound == std::trunc(bound);
  return TensorMeta{whole ? DType::Int64 : DType::Float64, {}, true, true};
}

InferResult infer_clamp(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  bool has_min = args.attrs.has("min"), has_max = args.attrs.has("max");
  KILN_CHECK_VALUE(has_min || has_max,
                   "clamp: at least one of 'min' or 'max' must not be None (input shape ", x.shape,
                   ")");
  std::vector<TensorMeta> operands = {x};
  if (has_min) operands.push_back(bound_meta(args.attrs.get_float("min")));
  if (has_max) operands.push_back(bound_meta(args.attrs.get_float("max")));
  DType dtype = result_type(operands);
  return InferResult{{TensorMeta{dtype, x.shape}}, {dtype}};
}

void clamp_kernel(const KernelArgs& args) {
  const Attrs& a = args.attrs;
  const cpu::StridedView &out = args.outputs[0], &in = args.inputs[0];
  if (!a.has("max")) return cpu::unary(UnaryOp::ClampMin, out, in, a.get_float("min"));
  if (!a.has("min")) return cpu::unary(UnaryOp::ClampMax, out, in, a.get_float("max"));
  cpu::unary(UnaryOp::Clamp, out, in, a.get_float("min"), a.get_float("max"));
}

OpDef elementwise(std::string name, InferFn infer, KernelFn cpu, std::string onnx_op,
                  std::vector<AttrSpec> attrs = {}) {
  return OpDef{.name = std::move(name),
               .attrs = std::move(attrs),
               .infer = infer,
               .cpu = cpu,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = {std::move(onnx_op)}};
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& registry) {
  registry.add(elementwise("neg", infer_neg, unary_kernel<UnaryOp::Neg>, "Neg"));
  registry.add(elementwise("abs", infer_numeric, unary_kernel<UnaryOp::Abs>, "Abs"));
  // Integer and bool inputs compute in float32, as in PyTorch.
  registry.add(elementwise("exp", infer_unary_float, unary_kernel<UnaryOp::Exp>, "Exp"));
  registry.add(elementwise("log", infer_unary_float, unary_kernel<UnaryOp::Log>, "Log"));
  registry.add(elementwise("sqrt", infer_unary_float, unary_kernel<UnaryOp::Sqrt>, "Sqrt"));
  // ONNX has no rsqrt; the exporter writes Reciprocal(Sqrt(x)).
  registry.add(elementwise("rsqrt", infer_unary_float, unary_kernel<UnaryOp::Rsqrt>, ""));
  registry.add(elementwise("sin", infer_unary_float, unary_kernel<UnaryOp::Sin>, "Sin"));
  registry.add(elementwise("cos", infer_unary_float, unary_kernel<UnaryOp::Cos>, "Cos"));
  registry.add(elementwise("tanh", infer_unary_float, unary_kernel<UnaryOp::Tanh>, "Tanh"));
  registry.add(
      elementwise("sigmoid", infer_unary_float, unary_kernel<UnaryOp::Sigmoid>, "Sigmoid"));
  registry.add(elementwise("relu", infer_numeric, unary_kernel<UnaryOp::Relu>, "Relu"));
  registry.add(elementwise("leaky_relu", infer_floating, leaky_relu_kernel, "LeakyRelu",
                           {{"negative_slope", AttrKind::Float, 0.01}}));
  registry.add(elementwise("gelu", infer_gelu, gelu_kernel, "Gelu",
                           {{"approximate", AttrKind::String, std::string("none")}}));
  registry.add(
      elementwise("elu", infer_floating, elu_kernel, "Elu", {{"alpha", AttrKind::Float, 1.0}}));
  registry.add(elementwise("softplus", infer_floating, softplus_kernel, "Softplus",
                           {{"beta", AttrKind::Float, 1.0}, {"threshold", AttrKind::Float, 20.0}}));
  OpDef logical_not =
      elementwise("logical_not", infer_logical_not, unary_kernel<UnaryOp::LogicalNot>, "Not");
  logical_not.may_run_inplace = false;  // the output is bool whatever the input is
  registry.add(std::move(logical_not));
  registry.add(
      elementwise("clamp", infer_clamp, clamp_kernel, "Clip",
                  {{"min", AttrKind::Float, {}, true}, {"max", AttrKind::Float, {}, true}}));
}

}  // namespace kiln
