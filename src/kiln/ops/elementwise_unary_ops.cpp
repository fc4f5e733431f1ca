// Elementwise math on one tensor: neg, abs, exp, log, sqrt, rsqrt, sin, cos,
// tanh, sigmoid, the activations (relu, leaky_relu, gelu, elu, softplus),
// logical_not, clamp, the roundings (floor, ceil, round, trunc) and sign,
// and the float tests and repairs (isnan, isinf, isfinite, nan_to_num). Each op's math is a functor
// here, beside its OpDef, holding the op's parameters as typed members read from its attributes;
// kernels/cpu/unary.h has the loops that run them.
#include <cmath>
#include <limits>

#include "kiln/kernels/cpu/unary.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

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

// logical_not and the float tests: any dtype in, bool out.
InferResult infer_bool_result(const InferArgs& args) {
  return InferResult{{TensorMeta{DType::Bool, args.inputs[0].shape}}, {}};
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

// ---- the math of each op, on one element

// An op without parameters: its math is a generic lambda, and its functor
// is built from any attributes.
template <auto kMath>
struct NoParams {
  explicit NoParams(const Attrs&) {}
  template <typename T>
  T operator()(T x) const {
    return T(kMath(x));
  }
};

using Neg = NoParams<[](auto x) { return -x; }>;
using Abs = NoParams<[](auto x) { return cpu::abs_of(x); }>;
using Exp = NoParams<[](auto x) { return cpu::exp_of(x); }>;
using Log = NoParams<[](auto x) { return std::log(x); }>;
using Sqrt = NoParams<[](auto x) { return std::sqrt(x); }>;
using Rsqrt = NoParams<[](auto x) { return decltype(x)(1) / std::sqrt(x); }>;
using Sin = NoParams<[](auto x) { return std::sin(x); }>;
using Cos = NoParams<[](auto x) { return std::cos(x); }>;
using Tanh = NoParams<[](auto x) { return cpu::tanh_of(x); }>;
using Sigmoid = NoParams<[](auto x) { return cpu::sigmoid_of(x); }>;
using GeluErf = NoParams<[](auto x) { return cpu::gelu_erf_of(x); }>;
using GeluTanh = NoParams<[](auto x) { return cpu::gelu_tanh_of(x); }>;
// x < 0 rather than x > 0 so NaN passes through, as in PyTorch.
using Relu = NoParams<[](auto x) { return x < 0 ? decltype(x)(0) : x; }>;

// Roundings: integers are already whole, so they pass through unchanged.
// round is to nearest, ties to even (nearbyint), as torch.round.
template <auto kRound>
struct Rounding {
  explicit Rounding(const Attrs&) {}
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return kRound(x);
    return x;
  }
};
using Floor = Rounding<[](auto x) { return std::floor(x); }>;
using Ceil = Rounding<[](auto x) { return std::ceil(x); }>;
using Round = Rounding<[](auto x) { return std::nearbyint(x); }>;
using Trunc = Rounding<[](auto x) { return std::trunc(x); }>;

struct LeakyRelu {
  double negative_slope;
  explicit LeakyRelu(const Attrs& a) : negative_slope(a.get_float("negative_slope")) {}
  template <typename T>
  T operator()(T x) const {
    return x > 0 ? x : x * T(negative_slope);
  }
};

struct Elu {
  double alpha;
  explicit Elu(const Attrs& a) : alpha(a.get_float("alpha")) {}
  template <typename T>
  T operator()(T x) const {
    return x > 0 ? x : T(alpha) * std::expm1(x);
  }
};

// log1p(exp(beta x)) / beta, returning x itself once beta x passes the
// threshold (where the two agree to rounding and exp would overflow).
struct Softplus {
  double beta, threshold;
  explicit Softplus(const Attrs& a)
      : beta(a.get_float("beta")), threshold(a.get_float("threshold")) {}
  template <typename T>
  T operator()(T x) const {
    T scaled = x * T(beta);
    return scaled > T(threshold) ? x : std::log1p(std::exp(scaled)) / T(beta);
  }
};

// NaN passes through every clamp, as in PyTorch: comparisons with NaN are
// false, so the input is kept. min > max gives max everywhere.
template <typename T>
T clamp_min_of(T x, T lo) {
  return x < lo ? lo : x;
}
template <typename T>
T clamp_max_of(T x, T hi) {
  return x > hi ? hi : x;
}

template <typename Fn>
void floating_kernel(const KernelArgs& args) {
  cpu::map_floating(args.outputs[0], args.inputs[0], Fn(args.attrs));
}

template <typename Fn>
void numeric_kernel(const KernelArgs& args) {
  cpu::map_numeric(args.outputs[0], args.inputs[0], Fn(args.attrs));
}

// gelu's `approximate` picks the function, once per call.
void gelu_kernel(const KernelArgs& args) {
  const bool tanh_form = args.attrs.get_string("approximate") == "tanh";
  if (cpu::gelu_dense_f32(args.outputs[0], args.inputs[0], tanh_form)) return;
  if (tanh_form) return floating_kernel<GeluTanh>(args);
  floating_kernel<GeluErf>(args);
}

void logical_not_kernel(const KernelArgs& args) {
  cpu::logical_not(args.outputs[0], args.inputs[0]);
}

template <cpu::FloatClass kWhich>
void classify_kernel(const KernelArgs& args) {
  cpu::classify(kWhich, args.outputs[0], args.inputs[0]);
}

// sign = (0 < x) - (x < 0): 0 for NaN and for -0, as PyTorch; bools are
// their own sign.
void sign_kernel(const KernelArgs& args) {
  const cpu::StridedView &out = args.outputs[0], &in = args.inputs[0];
  if (out.dtype == DType::Bool) return cpu::copy_same(out, in);
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::unary_loop<T, T>(out, in, [](T x) { return T(T(T(0) < x) - T(x < T(0))); });
  });
}

// A replacement given as a double, in T: one beyond T's range is the
// infinity of its sign, as the conversion gives in PyTorch.
template <typename T>
T narrowed(double value) {
  if (std::fabs(value) <= double(std::numeric_limits<T>::max())) return T(value);
  return std::isnan(value) ? T(value) : std::copysign(std::numeric_limits<T>::infinity(), T(value));
}

// NaN -> nan, +inf -> posinf (default: the dtype's largest value), -inf ->
// neginf (its lowest); integers and bools pass through.
void nan_to_num_kernel(const KernelArgs& args) {
  const Attrs& a = args.attrs;
  const cpu::StridedView &out = args.outputs[0], &in = args.inputs[0];
  if (!is_floating(out.dtype)) return cpu::copy_same(out, in);
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Limits = std::numeric_limits<T>;
    const T nan = narrowed<T>(a.get_float("nan"));
    const T posinf = a.has("posinf") ? narrowed<T>(a.get_float("posinf")) : Limits::max();
    const T neginf = a.has("neginf") ? narrowed<T>(a.get_float("neginf")) : Limits::lowest();
    cpu::unary_loop<T, T>(out, in, [=](T x) {
      if (x != x) return nan;
      if (x == Limits::infinity()) return posinf;
      return x == -Limits::infinity() ? neginf : x;
    });
  });
}

// The bounds are converted to the element type once per call, not per
// element, so each bound case is its own loop.
void clamp_kernel(const KernelArgs& args) {
  const Attrs& a = args.attrs;
  const cpu::StridedView &out = args.outputs[0], &in = args.inputs[0];
  const bool has_min = a.has("min"), has_max = a.has("max");
  const double lo = has_min ? a.get_float("min") : 0.0, hi = has_max ? a.get_float("max") : 0.0;
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T min = cpu::bound_as<T>(lo), max = cpu::bound_as<T>(hi);
    if (!has_max) {
      return cpu::unary_loop<T, T>(out, in, [min](T x) { return clamp_min_of(x, min); });
    }
    if (!has_min) {
      return cpu::unary_loop<T, T>(out, in, [max](T x) { return clamp_max_of(x, max); });
    }
    cpu::unary_loop<T, T>(out, in,
                          [min, max](T x) { return clamp_max_of(clamp_min_of(x, min), max); });
  });
}

// ---- backward rules ----
// Each returns one gradient (undefined when x needs none). They are written
// with kiln ops, so they can be differentiated again; the formulas (and which
// of x or y = f(x) they read) follow PyTorch's derivatives.yaml, so the
// conventions at NaN, infinities and kinks match too.

using UnaryGrad = Tensor (*)(const GradContext&, const Tensor& g);

template <UnaryGrad Rule>
std::vector<Tensor> unary_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  return {Rule(ctx, ctx.grad_output(0))};
}

Tensor neg_grad(const GradContext&, const Tensor& g) {  // d(-x) = -1
  return neg(g);
}

// d|x| = sign(x), with sign(0) = sign(NaN) = 0 as PyTorch's sgn.
Tensor abs_grad(const GradContext& ctx, const Tensor& g) {
  Tensor x = ctx.input(0);
  return where(x > 0.0, g, 0.0) - where(x < 0.0, g, 0.0);
}

Tensor exp_grad(const GradContext& ctx, const Tensor& g) {  // d exp = y
  return g * ctx.output(0);
}

Tensor log_grad(const GradContext& ctx, const Tensor& g) {  // d log = 1 / x
  return g / ctx.input(0);
}

Tensor sqrt_grad(const GradContext& ctx, const Tensor& g) {  // d sqrt = 1 / (2 y)
  return g / (2.0 * ctx.output(0));
}

// d x^(-1/2) = -x^(-3/2) / 2 = -y³ / 2
Tensor rsqrt_grad(const GradContext& ctx, const Tensor& g) {
  Tensor y = ctx.output(0);
  return -0.5 * g * (y * y * y);
}

Tensor sin_grad(const GradContext& ctx, const Tensor& g) {  // d sin = cos x
  return g * cos(ctx.input(0));
}

Tensor cos_grad(const GradContext& ctx, const Tensor& g) {  // d cos = -sin x
  return g * neg(sin(ctx.input(0)));
}

Tensor tanh_grad(const GradContext& ctx, const Tensor& g) {  // d tanh = 1 - y²
  Tensor y = ctx.output(0);
  return g * (1.0 - y * y);
}

Tensor sigmoid_grad(const GradContext& ctx, const Tensor& g) {  // d sigmoid = (1 - y) y
  Tensor y = ctx.output(0);
  return g * ((1.0 - y) * y);
}

// d relu = [y > 0]; PyTorch tests the output, so relu(NaN) passes the gradient.
Tensor relu_grad(const GradContext& ctx, const Tensor& g) {
  return where(ctx.output(0) <= 0.0, 0.0, g);
}

Tensor leaky_relu_grad(const GradContext& ctx, const Tensor& g) {  // d = x > 0 ? 1 : slope
  double slope = ctx.attrs().get_float("negative_slope");
  return where(ctx.input(0) > 0.0, g, g * slope);
}

// erf gelu: y = x Φ(x), d y = Φ(x) + x φ(x). kiln has no erf op, so Φ(x) is
// read back from the forward as gelu(x) / x. At 0 it is 1/2 + x φ(0), which
// keeps Φ's slope there for a second derivative; the denominator is made safe
// first so that no NaN reaches one either.
Tensor gelu_erf_grad(const Tensor& x, const Tensor& g) {
  constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi) = φ(0)
  Tensor at_zero = x == 0.0;
  Tensor safe_x = where(at_zero, 1.0, x);
  Tensor cdf = where(at_zero, 0.5 + kInvSqrt2Pi * x, gelu(safe_x) / safe_x);
  Tensor pdf = exp(-0.5 * (x * x)) * kInvSqrt2Pi;
  return g * (cdf + x * pdf);
}

// tanh gelu: y = x/2 (1 + t), t = tanh(k (x + c x³)):
// d y = (1 + t)/2 + x/2 (1 - t²) k (1 + 3 c x²)
Tensor gelu_tanh_grad(const Tensor& x, const Tensor& g) {
  constexpr double kBeta = 0.7978845608028654;  // sqrt(2 / pi)
  constexpr double kKappa = 0.044715;
  Tensor x_sq = x * x;
  Tensor t = tanh(kBeta * (x + kKappa * (x_sq * x)));
  Tensor left = 0.5 * (1.0 + t);
  Tensor right = (0.5 * x) * (1.0 - t * t) * (kBeta * (1.0 + (3 * kKappa) * x_sq));
  return g * (left + right);
}

Tensor gelu_grad(const GradContext& ctx, const Tensor& g) {
  bool tanh = ctx.attrs().get_string("approximate") == "tanh";
  return tanh ? gelu_tanh_grad(ctx.input(0), g) : gelu_erf_grad(ctx.input(0), g);
}

Tensor elu_grad(const GradContext& ctx, const Tensor& g) {  // d elu = x <= 0 ? alpha e^x : 1
  Tensor x = ctx.input(0);
  double alpha = ctx.attrs().get_float("alpha");
  return where(x <= 0.0, g * (alpha * exp(x)), g);
}

// softplus = log(1 + e^(beta x)) / beta, d = sigmoid(beta x); the identity
// (d = 1) above the threshold, where the forward is x.
Tensor softplus_grad(const GradContext& ctx, const Tensor& g) {
  Tensor bx = ctx.input(0) * ctx.attrs().get_float("beta");
  return where(bx > ctx.attrs().get_float("threshold"), g, g * sigmoid(bx));
}

// Piecewise constant (the roundings, sign): a zero gradient, as PyTorch
// gives. A fill of g's shape rather than a fresh zeros tensor, so a traced
// backward keeps g's (maybe symbolic) shape.
Tensor zero_grad(const GradContext&, const Tensor& g) {
  static const OpDef& fill_op = op("fill");
  return dispatch1(fill_op, {g}, {{"value", 0.0}});
}

// d nan_to_num = [x is finite]: the replaced elements get none.
Tensor nan_to_num_grad(const GradContext& ctx, const Tensor& g) {
  return where(isfinite(ctx.input(0)), g, 0.0);
}

// The gradient passes where min <= x <= max (so NaN gets none), as PyTorch.
Tensor clamp_grad(const GradContext& ctx, const Tensor& g) {
  const Attrs& a = ctx.attrs();
  Tensor x = ctx.input(0);
  if (!a.has("max")) return where(x >= a.get_float("min"), g, 0.0);
  if (!a.has("min")) return where(x <= a.get_float("max"), g, 0.0);
  return where((x >= a.get_float("min")) * (x <= a.get_float("max")), g, 0.0);
}

OpDef elementwise(std::string name, InferFn infer, KernelFn cpu, OnnxInfo onnx,
                  std::vector<AttrSpec> attrs = {}, GradFn grad = nullptr) {
  return OpDef{.name = std::move(name),
               .attrs = std::move(attrs),
               .infer = infer,
               .cpu = cpu,
               .grad = grad,
               .kind = OpKind::Elementwise,
               .may_run_inplace = true,
               .onnx = std::move(onnx)};
}

// ONNX's unary ops take and give one dtype: an integer input of an op that
// computes in float is cast to the output's dtype first.
OnnxInfo onnx_unary(std::string op_type) {
  return onnx_op(std::move(op_type), {}, {OnnxOperand::Output});
}

// `grad_reads` says whether the backward rule above reads x or only y.
enum class GradReads { Input, OutputOnly };

OpDef activation(OpDef def, GradReads grad_reads) {
  def.is_activation = true;
  def.grad_reads_output_only = grad_reads == GradReads::OutputOnly;
  return def;
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& registry) {
  registry.add(elementwise("neg", infer_neg, numeric_kernel<Neg>, onnx_unary("Neg"), {},
                           unary_grad<neg_grad>));
  registry.add(elementwise("abs", infer_numeric, numeric_kernel<Abs>, onnx_unary("Abs"), {},
                           unary_grad<abs_grad>));
  // Integer and bool inputs compute in float32, as in PyTorch.
  registry.add(elementwise("exp", infer_unary_float, floating_kernel<Exp>, onnx_unary("Exp"), {},
                           unary_grad<exp_grad>));
  registry.add(elementwise("log", infer_unary_float, floating_kernel<Log>, onnx_unary("Log"), {},
                           unary_grad<log_grad>));
  registry.add(elementwise("sqrt", infer_unary_float, floating_kernel<Sqrt>, onnx_unary("Sqrt"), {},
                           unary_grad<sqrt_grad>));
  // ONNX has no rsqrt; the exporter writes Reciprocal(Sqrt(x)).
  registry.add(elementwise("rsqrt", infer_unary_float, floating_kernel<Rsqrt>, {}, {},
                           unary_grad<rsqrt_grad>));
  registry.add(elementwise("sin", infer_unary_float, floating_kernel<Sin>, onnx_unary("Sin"), {},
                           unary_grad<sin_grad>));
  registry.add(elementwise("cos", infer_unary_float, floating_kernel<Cos>, onnx_unary("Cos"), {},
                           unary_grad<cos_grad>));
  registry.add(activation(elementwise("tanh", infer_unary_float, floating_kernel<Tanh>,
                                      onnx_unary("Tanh"), {}, unary_grad<tanh_grad>),
                          GradReads::OutputOnly));
  registry.add(activation(elementwise("sigmoid", infer_unary_float, floating_kernel<Sigmoid>,
                                      onnx_unary("Sigmoid"), {}, unary_grad<sigmoid_grad>),
                          GradReads::OutputOnly));
  registry.add(activation(elementwise("relu", infer_numeric, numeric_kernel<Relu>,
                                      onnx_unary("Relu"), {}, unary_grad<relu_grad>),
                          GradReads::OutputOnly));
  registry.add(activation(
      elementwise("leaky_relu", infer_floating, floating_kernel<LeakyRelu>,
                  onnx_op("LeakyRelu", {{"negative_slope", "alpha", double(0.01f)}}),
                  {{"negative_slope", AttrKind::Float, 0.01}}, unary_grad<leaky_relu_grad>),
      GradReads::Input));
  registry.add(activation(
      elementwise("gelu", infer_gelu, gelu_kernel, {"Gelu"},
                  {{"approximate", AttrKind::String, std::string("none")}}, unary_grad<gelu_grad>),
      GradReads::Input));
  registry.add(activation(elementwise("elu", infer_floating, floating_kernel<Elu>,
                                      onnx_op("Elu", {{"alpha", "alpha", 1.0}}),
                                      {{"alpha", AttrKind::Float, 1.0}}, unary_grad<elu_grad>),
                          GradReads::Input));
  registry.add(
      activation(elementwise("softplus", infer_floating, floating_kernel<Softplus>, {"Softplus"},
                             {{"beta", AttrKind::Float, 1.0}, {"threshold", AttrKind::Float, 20.0}},
                             unary_grad<softplus_grad>),
                 GradReads::Input));
  // Bool outputs: no gradient, so no rule; never in place over a float input.
  auto to_bool = [](std::string name, KernelFn cpu, OnnxInfo onnx) {
    OpDef def = elementwise(std::move(name), infer_bool_result, cpu, std::move(onnx));
    def.may_run_inplace = false;
    return def;
  };
  registry.add(to_bool("logical_not", logical_not_kernel, onnx_op("Not", {}, {OnnxOperand::Bool})));
  registry.add(to_bool("isnan", classify_kernel<cpu::FloatClass::NaN>,
                       onnx_op("IsNaN", {}, {}, OnnxDirection::ImportOnly)));
  registry.add(to_bool("isinf", classify_kernel<cpu::FloatClass::Inf>, {"IsInf"}));
  registry.add(to_bool("isfinite", classify_kernel<cpu::FloatClass::Finite>, {}));
  registry.add(elementwise("nan_to_num", infer_same, nan_to_num_kernel, {},
                           {{"nan", AttrKind::Float, 0.0},
                            {"posinf", AttrKind::Float, {}, true},
                            {"neginf", AttrKind::Float, {}, true}},
                           unary_grad<nan_to_num_grad>));
  registry.add(elementwise("floor", infer_numeric, numeric_kernel<Floor>,
                           onnx_op("Floor", {}, {}, OnnxDirection::ImportOnly), {},
                           unary_grad<zero_grad>));
  registry.add(elementwise("ceil", infer_numeric, numeric_kernel<Ceil>,
                           onnx_op("Ceil", {}, {}, OnnxDirection::ImportOnly), {},
                           unary_grad<zero_grad>));
  registry.add(elementwise("round", infer_numeric, numeric_kernel<Round>,
                           onnx_op("Round", {}, {}, OnnxDirection::ImportOnly), {},
                           unary_grad<zero_grad>));
  registry.add(
      elementwise("trunc", infer_numeric, numeric_kernel<Trunc>, {}, {}, unary_grad<zero_grad>));
  registry.add(elementwise("sign", infer_same, sign_kernel, {"Sign"}, {}, unary_grad<zero_grad>));
  registry.add(elementwise("clamp", infer_clamp, clamp_kernel, {"Clip"},
                           {{"min", AttrKind::Float, {}, true}, {"max", AttrKind::Float, {}, true}},
                           unary_grad<clamp_grad>));
}

}  // namespace kiln
