// Elementwise math on two or three operands with broadcasting. Inference has
// already cast the inputs to one common dtype; comparisons write bool.
#pragma once

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,  // NaN-propagating
  Minimum,  // NaN-propagating
  // Division with a rounding (kernels/cpu/division.h); integer operands
  // throw on a zero divisor before writing anything.
  Remainder,
  Fmod,
  FloorDivide,
  // Integer and bool operands only.
  BitwiseAnd,
  BitwiseOr,
  BitwiseXor,
  // Comparisons last: they write bool.
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
};

// a and b broadcast to out's shape; out may alias a exactly (in-place ops).
void binary(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b);

// out[i] = cond[i] ? a[i] : b[i]; cond is bool, a and b have out's dtype.
void where(const StridedView& out, const StridedView& cond, const StridedView& a,
           const StridedView& b);

// out[i] = f(a[i], b[i]) with f called on the element type, for the
// floating dtypes: the loop of the float math of two operands (atan2,
// hypot, logaddexp), whose functors sit beside their OpDefs.
template <typename F>
void map2_floating(const StridedView& out, const StridedView& a, const StridedView& b, F f) {
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    binary_loop<T, T, T>(out, a, b, [f](T x, T y) { return T(f(x, y)); });
  });
}

}  // namespace kiln::cpu
