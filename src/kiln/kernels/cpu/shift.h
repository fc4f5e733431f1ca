// Bit shifts of integers (bitwise_left_shift, bitwise_right_shift), with
// PyTorch's answer for every shift count, where C++'s << and >> leave
// negative counts and counts of the type's width or more undefined.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out = a << b or a >> b; a, b and out share one integer dtype (not bool),
// a and b broadcast to out's shape; out may alias a exactly (in place).
void shift(bool left, const StridedView& out, const StridedView& a, const StridedView& b);

}  // namespace kiln::cpu
