// The C++ API of elementwise math: thin calls into dispatch. Ops are looked
// up once per function (static locals), so a call costs one dispatch.
#include <algorithm>
#include <cmath>

#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace {

Tensor call(const char* name, std::vector<Tensor> inputs, const Attrs& attrs = {}) {
  return dispatch1(op(name), std::move(inputs), attrs);
}

Attrs clamp_attrs(std::optional<double> min, std::optional<double> max) {
  AttrValue lo = min ? AttrValue(*min) : AttrValue(std::monostate{});
  AttrValue hi = max ? AttrValue(*max) : AttrValue(std::monostate{});
  return Attrs{{"min", lo}, {"max", hi}};
}

}  // namespace

// Unary. `static const OpDef&` keeps the name lookup out of the hot path.
#define KILN_UNARY(fn)                 \
  Tensor fn(const Tensor& x) {         \
    static const OpDef& def = op(#fn); \
    return dispatch1(def, {x});        \
  }
KILN_UNARY(neg)
KILN_UNARY(abs)
KILN_UNARY(exp)
KILN_UNARY(log)
KILN_UNARY(sqrt)
KILN_UNARY(rsqrt)
KILN_UNARY(sin)
KILN_UNARY(cos)
KILN_UNARY(tanh)
KILN_UNARY(sigmoid)
KILN_UNARY(relu)
KILN_UNARY(logical_not)
KILN_UNARY(floor)
KILN_UNARY(ceil)
KILN_UNARY(round)
KILN_UNARY(trunc)
KILN_UNARY(sign)
KILN_UNARY(isnan)
KILN_UNARY(isinf)
KILN_UNARY(isfinite)
KILN_UNARY(bitwise_not)
KILN_UNARY(log1p)
KILN_UNARY(expm1)
KILN_UNARY(log2)
KILN_UNARY(log10)
KILN_UNARY(reciprocal)
KILN_UNARY(erf)
KILN_UNARY(erfc)
KILN_UNARY(tan)
KILN_UNARY(asin)
KILN_UNARY(acos)
KILN_UNARY(atan)
KILN_UNARY(sinh)
KILN_UNARY(cosh)
KILN_UNARY(asinh)
KILN_UNARY(acosh)
KILN_UNARY(atanh)
#undef KILN_UNARY

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return call("leaky_relu", {x}, {{"negative_slope", negative_slope}});
}
Tensor gelu(const Tensor& x, const std::string& approximate) {
  return call("gelu", {x}, {{"approximate", approximate}});
}
Tensor elu(const Tensor& x, double alpha) {
  return call("elu", {x}, {{"alpha", alpha}});
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return call("softplus", {x}, {{"beta", beta}, {"threshold", threshold}});
}
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  return call("clamp", {x}, clamp_attrs(min, max));
}
Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  auto optional = [](std::optional<double> v) {
    return v ? AttrValue(*v) : AttrValue(std::monostate{});
  };
  return call("nan_to_num", {x},
              {{"nan", nan}, {"posinf", optional(posinf)}, {"neginf", optional(neginf)}});
}

// Binary: a Tensor overload and a Scalar overload (the scalar becomes a
// wrapped number, so it promotes like a Python number).
#define KILN_BINARY(fn)                         \
  Tensor fn(const Tensor& a, const Tensor& b) { \
    static const OpDef& def = op(#fn);          \
    return dispatch1(def, {a, b});              \
  }                                             \
  Tensor fn(const Tensor& a, Scalar b) {        \
    return fn(a, wrap_scalar(b));               \
  }
KILN_BINARY(add)
KILN_BINARY(sub)
KILN_BINARY(mul)
KILN_BINARY(div)
KILN_BINARY(eq)
KILN_BINARY(ne)
KILN_BINARY(lt)
KILN_BINARY(le)
KILN_BINARY(gt)
KILN_BINARY(ge)
KILN_BINARY(remainder)
KILN_BINARY(fmod)
KILN_BINARY(floor_divide)
KILN_BINARY(bitwise_and)
KILN_BINARY(bitwise_or)
KILN_BINARY(bitwise_xor)
#undef KILN_BINARY

Tensor remainder(Scalar a, const Tensor& b) {
  return remainder(wrap_scalar(a), b);
}

namespace {

// alpha * b for a + alpha * b, with PyTorch's checks: no fractional alpha
// for integral operands, and a bool alpha for bool ones (so bool stays bool).
Tensor alpha_times(const Tensor& a, const Tensor& b, Scalar alpha, const char* name) {
  const bool integral = !is_floating(a.dtype()) && !is_floating(b.dtype());
  KILN_CHECK_TYPE(!integral || !alpha.is_floating(), name,
                  ": for integral input tensors, argument alpha must not be a floating point "
                  "number (got ",
                  alpha, ", dtypes ", a.dtype(), " and ", b.dtype(), ")");
  if (a.dtype() == DType::Bool && b.dtype() == DType::Bool) return mul(b, alpha.to_bool());
  if (alpha.to_double() == 1.0) return b;
  return mul(b, alpha);
}

// Whether a + alpha * b takes add_scaled (Note [Add with alpha] in
// elementwise_binary_ops.cpp): a floating result and an alpha that scales.
// Bool operands keep their own path (sub refuses them, add of two bools
// stays bool).
bool adds_scaled(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (alpha.to_double() == 1.0 || a.dtype() == DType::Bool || b.dtype() == DType::Bool)
    return false;
  return is_floating(a.dtype()) || is_floating(b.dtype());
}

Tensor add_scaled(const Tensor& a, const Tensor& b, double alpha) {
  static const OpDef& def = op("add_scaled");
  return dispatch1(def, {a, b}, {{"alpha", alpha}});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (adds_scaled(a, b, alpha)) return add_scaled(a, b, alpha.to_double());
  return add(a, alpha_times(a, b, alpha, "add"));
}
// A bool operand is refused whatever alpha is, as PyTorch refuses it (sub's
// inference says why); scaling it first made it a number.
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (a.dtype() == DType::Bool || b.dtype() == DType::Bool) return sub(a, b);
  if (adds_scaled(a, b, alpha)) return add_scaled(a, b, -alpha.to_double());
  return sub(a, alpha_times(a, b, alpha, "sub"));
}

Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value) {
  static const OpDef& def = op("addcmul");
  return dispatch1(def, {input, t1, t2}, {{"value", value.to_double()}});
}
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value) {
  static const OpDef& def = op("addcdiv");
  return dispatch1(def, {input, t1, t2}, {{"value", value.to_double()}});
}

Tensor pow(const Tensor& a, const Tensor& b) {
  return call("pow", {a, b});
}
Tensor pow(const Tensor& a, Scalar exponent) {
  // Only a scalar exponent is checked: an integer tensor exponent gives 0
  // for negative powers (of bases other than 1 and -1) as PyTorch does.
  bool integer_base = is_integral(a.dtype());
  KILN_CHECK(!(integer_base && !exponent.is_floating() && exponent.to_int() < 0),
             "pow: integers to negative integer powers are not allowed (base of dtype ", a.dtype(),
             ", shape ", a.shape(), ", exponent ", exponent, ")");
  return pow(a, wrap_scalar(exponent));
}
Tensor pow(Scalar base, const Tensor& exponent) {
  return pow(wrap_scalar(base), exponent);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return call("maximum", {a, b});
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return call("minimum", {a, b});
}
Tensor atan2(const Tensor& a, const Tensor& b) {
  return call("atan2", {a, b});
}
Tensor hypot(const Tensor& a, const Tensor& b) {
  return call("hypot", {a, b});
}
Tensor logaddexp(const Tensor& a, const Tensor& b) {
  return call("logaddexp", {a, b});
}

// A composition, so it traces and differentiates as its parts: d start =
// 1 - w, d end = w, d w = end - start on either side of the switch. Each
// side is one fused multiply-add, as PyTorch's kernel computes it
// (fma(coeff, end - start, base): coeff w from start, w - 1 from end), so
// the bits are torch's.
namespace {

void check_lerp(const Tensor& start, const Tensor& end) {
  KILN_CHECK(is_floating(start.dtype()) && start.dtype() == end.dtype(),
             "lerp: expected start and end of one floating dtype, got ", start.dtype(), " and ",
             end.dtype(), " (shapes ", start.shape(), " and ", end.shape(), ")");
}

}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  check_lerp(start, end);
  KILN_CHECK(weight.dtype() == start.dtype(), "lerp: expected a weight of dtype ", start.dtype(),
             ", got ", weight.dtype(), " (shape ", weight.shape(), ")");
  Tensor diff = end - start;
  Tensor from_start = addcmul(start, weight, diff);
  Tensor from_end = addcmul(end, weight - 1.0, diff);
  return where(abs(weight) < 0.5, from_start, from_end);
}
// A number picks its side once, so the graph holds one of the two forms.
// PyTorch takes the weight in the tensor's dtype first: w - 1 is then exact.
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight) {
  check_lerp(start, end);
  double w = weight.to_double();
  if (start.dtype() == DType::Float32) w = double(float(w));
  Tensor diff = end - start;
  if (std::abs(w) < 0.5) return add(start, diff, Scalar(w));
  return add(end, diff, Scalar(w - 1.0));
}
// The composition reads x before copy_ writes it; its backward saves only
// the new tensors it made (end - x, the weight), so x may change.
const Tensor& lerp_(const Tensor& x, const Tensor& end, const Tensor& weight) {
  return copy_(x, lerp(x, end, weight));
}
const Tensor& lerp_(const Tensor& x, const Tensor& end, Scalar weight) {
  return copy_(x, lerp(x, end, weight));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call("where", {cond, a, b});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return where(cond, a, wrap_scalar(b));
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  return where(cond, wrap_scalar(a), b);
}

// In place: dispatch_into checks that the result fits x's shape and dtype.
const Tensor& apply_inplace(const OpDef& def, const Tensor& x, std::vector<Tensor> others,
                            const Attrs& attrs) {
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), others.begin(), others.end());
  const bool any_requires_grad = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) {
    return t.defined() && t.requires_grad();
  });
  if (any_requires_grad && def.grad && !def.grad_reads_output_only) {
    Tensor before = clone(x);
    for (Tensor& t : inputs) {
      if (t.defined() && t.is_same(x)) t = before;
    }
  }
  dispatch_into(def, std::move(inputs), attrs, x);
  return x;
}

// add and sub write directly: their backward reads no input.
#define KILN_INPLACE(fn, write)                               \
  const Tensor& fn##_(const Tensor& x, const Tensor& other) { \
    static const OpDef& def = op(#fn);                        \
    write;                                                    \
    return x;                                                 \
  }                                                           \
  const Tensor& fn##_(const Tensor& x, Scalar other) {        \
    return fn##_(x, wrap_scalar(other));                      \
  }
KILN_INPLACE(add, dispatch_into(def, {x, other}, {}, x))
KILN_INPLACE(sub, dispatch_into(def, {x, other}, {}, x))
KILN_INPLACE(mul, apply_inplace(def, x, {other}))
KILN_INPLACE(div, apply_inplace(def, x, {other}))
#undef KILN_INPLACE

// The scaled forms write directly, as add_ does: with alpha an attribute,
// their backward reads no input. A result x's integral dtype cannot hold
// keeps the unscaled path, which refuses it.
namespace {

bool writes_scaled(const Tensor& x, const Tensor& other, Scalar alpha) {
  return is_floating(x.dtype()) && adds_scaled(x, other, alpha);
}

const Tensor& add_scaled_into(const Tensor& x, const Tensor& other, double alpha) {
  static const OpDef& def = op("add_scaled");
  dispatch_into(def, {x, other}, {{"alpha", alpha}}, x);
  return x;
}

}  // namespace

const Tensor& add_(const Tensor& x, const Tensor& other, Scalar alpha) {
  if (writes_scaled(x, other, alpha)) return add_scaled_into(x, other, alpha.to_double());
  return add_(x, alpha_times(x, other, alpha, "add_"));
}
const Tensor& sub_(const Tensor& x, const Tensor& other, Scalar alpha) {
  if (x.dtype() == DType::Bool || other.dtype() == DType::Bool) return sub_(x, other);
  if (writes_scaled(x, other, alpha)) return add_scaled_into(x, other, -alpha.to_double());
  return sub_(x, alpha_times(x, other, alpha, "sub_"));
}
const Tensor& add_scaled_(const Tensor& x, const Tensor& other, const Tensor& alpha) {
  return apply_inplace(op("add_scaled"), x, {other, alpha});
}
const Tensor& addcmul_(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  return apply_inplace(op("addcmul"), x, {t1, t2}, {{"value", value.to_double()}});
}
const Tensor& addcdiv_(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  return apply_inplace(op("addcdiv"), x, {t1, t2}, {{"value", value.to_double()}});
}
const Tensor& clamp_(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  return apply_inplace(op("clamp"), x, {}, clamp_attrs(min, max));
}
const Tensor& relu_(const Tensor& x) {
  return apply_inplace(op("relu"), x);
}

// Operators.
Tensor operator-(const Tensor& x) {
  return neg(x);
}
#define KILN_OPERATOR(sym, fn)                            \
  Tensor operator sym(const Tensor& a, const Tensor& b) { \
    return fn(a, b);                                      \
  }                                                       \
  Tensor operator sym(const Tensor& a, Scalar b) {        \
    return fn(a, b);                                      \
  }
#define KILN_OPERATOR_SCALAR_LEFT(sym, fn)         \
  Tensor operator sym(Scalar a, const Tensor& b) { \
    return fn(wrap_scalar(a), b);                  \
  }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
KILN_OPERATOR_SCALAR_LEFT(+, add)
KILN_OPERATOR_SCALAR_LEFT(-, sub)
KILN_OPERATOR_SCALAR_LEFT(*, mul)
KILN_OPERATOR_SCALAR_LEFT(/, div)
KILN_OPERATOR(==, eq)
KILN_OPERATOR(!=, ne)
KILN_OPERATOR(<, lt)
KILN_OPERATOR(<=, le)
KILN_OPERATOR(>, gt)
KILN_OPERATOR(>=, ge)
KILN_OPERATOR(%, remainder)
KILN_OPERATOR(&, bitwise_and)
KILN_OPERATOR(|, bitwise_or)
KILN_OPERATOR(^, bitwise_xor)
KILN_OPERATOR_SCALAR_LEFT(%, remainder)
KILN_OPERATOR_SCALAR_LEFT(&, bitwise_and)
KILN_OPERATOR_SCALAR_LEFT(|, bitwise_or)
KILN_OPERATOR_SCALAR_LEFT(^, bitwise_xor)
Tensor operator~(const Tensor& x) {
  return bitwise_not(x);
}
#undef KILN_OPERATOR
#undef KILN_OPERATOR_SCALAR_LEFT

}  // namespace kiln
