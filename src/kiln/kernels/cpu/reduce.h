// Reductions over any set of dims of a strided tensor: sum, prod, mean,
// max/min (values, and values with indices), variance.
//
// `mask` names the reduced dims of `in` (bit d: dim d). `out` holds the kept
// dims in input order, with or without size-1 placeholders for the reduced
// ones (keepdim). Reducing zero elements gives the identity (sum 0, prod 1,
// mean NaN); max/min callers must not reduce an empty dim.
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/reduce_geometry.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class ReduceKind { Sum, Prod, Mean, Max, Min };

// Sum and Prod: floating inputs accumulate in double and give their own
// dtype; bool and integer inputs accumulate in int64 and give out.dtype
// (int64, or the input's own dtype). Mean: floating only. Max and Min keep
// the dtype and propagate NaN.
void reduce(const StridedView& out, const StridedView& in, DimMask mask, ReduceKind kind);

// Variance (two passes in double: the mean, then squared deviations) divided
// by max(0, n - correction); its square root when `take_sqrt`. Floating only.
void variance(const StridedView& out, const StridedView& in, DimMask mask, int64_t correction,
              bool take_sqrt);

// The max (or min) over the reduced dims and the row-major index of its first
// occurrence within them; NaN counts as the extremum. `values.data` may be
// null when only the indices are wanted (argmax). `indices` is int64.
void reduce_with_index(const StridedView& values, const StridedView& indices, const StridedView& in,
                       DimMask mask, bool is_max);

}  // namespace kiln::cpu
