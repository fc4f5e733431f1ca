// The C++ API of elementwise math: thin calls into dispatch. Ops are looked
// up once per function (static locals), so a call costs one dispatch.
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
#undef KILN_BINARY

Tensor pow(const Tensor& a, const Tensor& b) {
  return call("pow", {a, b});
}
Tensor pow(const Tensor& a, Scalar exponent) {
  // Only a scalar exponent is checked: an integer tensor exponent gives 0
  // for negative powers (of bases other than 1 and -1) as PyTorch does.
  bool integer_base = a.dtype() == DType::Int32 || a.dtype() == DType::Int64;
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
#define KILN_INPLACE(fn)                                      \
  const Tensor& fn##_(const Tensor& x, const Tensor& other) { \
    static const OpDef& def = op(#fn);                        \
    dispatch_into(def, {x, other}, {}, x);                    \
    return x;                                                 \
  }                                                           \
  const Tensor& fn##_(const Tensor& x, Scalar other) {        \
    return fn##_(x, wrap_scalar(other));                      \
  }
KILN_INPLACE(add)
KILN_INPLACE(sub)
KILN_INPLACE(mul)
KILN_INPLACE(div)
#undef KILN_INPLACE

const Tensor& clamp_(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  dispatch_into(op("clamp"), {x}, clamp_attrs(min, max), x);
  return x;
}
const Tensor& relu_(const Tensor& x) {
  dispatch_into(op("relu"), {x}, {}, x);
  return x;
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
#undef KILN_OPERATOR
#undef KILN_OPERATOR_SCALAR_LEFT

}  // namespace kiln
