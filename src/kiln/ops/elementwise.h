// Elementwise math: the C++ API over the elementwise ops (every function goes
// through dispatch). Binary functions broadcast and promote types as PyTorch
// does; a Scalar operand acts as a Python number (x_int32 + 2 stays int32,
// x_int32 + 2.5 is float32).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/ops/attrs.h"

namespace kiln {

struct OpDef;

// --- unary ------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // or "tanh"
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor logical_not(const Tensor& x);  // any dtype -> bool
// At least one bound must be given; min > max gives max everywhere.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// Roundings (integers pass through; round is half to even) and sign (0 at
// NaN and at -0); their gradients are zero.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor sign(const Tensor& x);
// Any dtype -> bool; integers and bools are finite.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// NaN, +inf and -inf replaced; unset bounds are the dtype's largest and
// lowest finite values. Integer and bool tensors come back unchanged.
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
Tensor bitwise_not(const Tensor& x);  // integer and bool tensors (~x)
// libm's functions (elementwise_math_ops.cpp); integer inputs give float32.
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);

// --- binary -----------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: int / int is float32
Tensor div(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, const Tensor& b);
// An integer tensor to a negative integer power is an error, as in PyTorch.
Tensor pow(const Tensor& a, Scalar exponent);
Tensor pow(Scalar base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN-propagating
// atan2(a, b) is the angle of (b, a), integers compute in float32;
// hypot = sqrt(a² + b²) and logaddexp = log(e^a + e^b) take floating
// operands only (as in PyTorch), and neither overflows.
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor logaddexp(const Tensor& a, const Tensor& b);
// start + weight * (end - start), computed from end's side where |weight|
// >= 1/2 (as PyTorch, so weight 1 gives end exactly); floating only.
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight);
const Tensor& lerp_(const Tensor& x, const Tensor& end, const Tensor& weight);
const Tensor& lerp_(const Tensor& x, const Tensor& end, Scalar weight);
Tensor minimum(const Tensor& a, const Tensor& b);  // NaN-propagating
// a + alpha * b and a - alpha * b (PyTorch's alpha=; an integral a and b
// take no fractional alpha). A floating result is rounded once, as
// PyTorch's (the add_scaled op).
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);

// Divisions with a rounding, as Python's // and % (integers and floats;
// bool is an error, and so is an integer division by zero):
// floor_divide rounds the quotient down, remainder takes the divisor's sign,
// fmod the dividend's (C's %).
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
Tensor remainder(Scalar a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, Scalar b);
// Integer and bool operands; a floating result type is an error.
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, Scalar b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, Scalar b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, Scalar b);

// input + value * t1 * t2 and input + value * t1 / t2, broadcasting all three.
Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value = 1.0);
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value = 1.0);

// Comparisons give bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);

// cond ? a : b, all three broadcast; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);

// --- in place: write into x (which must hold the broadcast result and its
// dtype: adding a float tensor into an int tensor is an error) and return it.
const Tensor& add_(const Tensor& x, const Tensor& other);
const Tensor& add_(const Tensor& x, Scalar other);
const Tensor& sub_(const Tensor& x, const Tensor& other);
const Tensor& sub_(const Tensor& x, Scalar other);
const Tensor& mul_(const Tensor& x, const Tensor& other);
const Tensor& mul_(const Tensor& x, Scalar other);
const Tensor& div_(const Tensor& x, const Tensor& other);
const Tensor& div_(const Tensor& x, Scalar other);
const Tensor& clamp_(const Tensor& x, std::optional<double> min, std::optional<double> max);
const Tensor& relu_(const Tensor& x);
const Tensor& add_(const Tensor& x, const Tensor& other, Scalar alpha);
const Tensor& sub_(const Tensor& x, const Tensor& other, Scalar alpha);
// x += alpha * other with alpha a 0-d floating tensor, cast to x's dtype
// (a compiled training step's learning rate); one rounding, as add_ with a
// number alpha.
const Tensor& add_scaled_(const Tensor& x, const Tensor& other, const Tensor& alpha);
const Tensor& addcmul_(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1.0);
const Tensor& addcdiv_(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1.0);
// The in-place form of any one-output elementwise op: op(x, others...,
// attrs) written into x, which is returned (x.sqrt_(), x.remainder_(y)).
// While an input requires grad, the op reads x from a copy, so a
// backward rule that needs its old value still has it (PyTorch saves
// `original_self` for the same reason); ops whose backward reads only their
// output skip the copy.
const Tensor& apply_inplace(const OpDef& op, const Tensor& x, std::vector<Tensor> others = {},
                            const Attrs& attrs = {});

// --- operators --------------------------------------------------------------
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);

Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, Scalar b);

// Python's %, &, |, ^ and ~ (remainder and the bitwise ops).
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, Scalar b);
Tensor operator%(Scalar a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, Scalar b);
Tensor operator&(Scalar a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, Scalar b);
Tensor operator|(Scalar a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, Scalar b);
Tensor operator^(Scalar a, const Tensor& b);
Tensor operator~(const Tensor& x);

}  // namespace kiln
