// Sorting along one dim: sort (values and int64 indices) and topk. A NaN
// counts as larger than every number, as in PyTorch: last in an ascending
// sort, first in a descending one and in topk's largest.
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// Each line of `in` along dim sorted, stably (equal values keep their order,
// so the indices are PyTorch's stable ones). `values.data` may be null when
// only the indices are wanted (argsort). A 0-d `in` is one line of one.
void sort(const StridedView& values, const StridedView& indices, const StridedView& in, int dim,
          bool descending);

// The k largest (or smallest) of each line along dim, best first; equal
// values are taken in index order. The outputs have k along dim; the caller
// has checked k <= the line's length.
void topk(const StridedView& values, const StridedView& indices, const StridedView& in, int dim,
          bool largest);

}  // namespace kiln::cpu
