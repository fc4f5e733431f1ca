// softmax and log_softmax along one dim, numerically stable: each row is
// shifted by its max before exponentiating, so exp never overflows.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out and in have one shape; `dim` is already wrapped (any value for 0-d).
// Floating only. The row sum of exponentials accumulates in double.
void softmax(const StridedView& out, const StridedView& in, int dim, bool log);

}  // namespace kiln::cpu
