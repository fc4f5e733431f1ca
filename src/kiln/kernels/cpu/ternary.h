// Elementwise math on three operands: addcmul and addcdiv. Inference has
// already cast the operands to one dtype; they broadcast to out's shape and
// out may alias `in` exactly (the in-place forms).
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out = in + value * t1 * t2, with value in the element type.
void addcmul(const StridedView& out, const StridedView& in, const StridedView& t1,
             const StridedView& t2, double value);
// out = in + value * t1 / t2 (floating dtypes only).
void addcdiv(const StridedView& out, const StridedView& in, const StridedView& t1,
             const StridedView& t2, double value);

}  // namespace kiln::cpu
