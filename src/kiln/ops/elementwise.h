// Elementwise math: the C++ API over the elementwise ops (every function goes
// through dispatch). Binary functions broadcast and promote types as PyTorch
// does; a Scalar operand acts as a Python number (x_int32 + 2 stays int32,
// x_int32 + 2.5 is float32).
#pragma once

#include <optional>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

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
Tensor minimum(const Tensor& a, const Tensor& b);  // NaN-propagating

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

}  // namespace kiln
