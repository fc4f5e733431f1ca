// Elementwise math on one operand: out[i] = f(in[i]). Inference has already
// cast the input to the dtype the op computes in, so out and in share a
// dtype, except logical_not (any dtype in, bool out).
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class UnaryOp {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  LeakyRelu,  // alpha: negative slope
  Gelu,       // exact, through erf
  GeluTanh,   // the tanh approximation
  Elu,        // alpha
  Softplus,   // alpha: beta, beta: threshold
  LogicalNot,
  ClampMin,  // alpha: min
  ClampMax,  // alpha: max
  Clamp,     // alpha: min, beta: max (min > max gives max everywhere, as in PyTorch)
};

// `in` broadcasts to out's shape; out may alias in exactly (in-place ops).
void unary(UnaryOp op, const StridedView& out, const StridedView& in, double alpha = 0.0,
           double beta = 0.0);

}  // namespace kiln::cpu
