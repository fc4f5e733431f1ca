// Narrowing and selecting along one dim of a StridedView: the kernel-side
// twins of the narrow and select view ops, for kernels that copy piece by
// piece (cat, stack, index_select).
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// v restricted to [start, start + length) along dim.
inline StridedView narrow_view(const StridedView& v, int dim, int64_t start, int64_t length) {
  StridedView part = v;
  part.data = static_cast<char*>(v.data) + start * v.strides[dim] * int64_t(element_size(v.dtype));
  part.shape[dim] = length;
  return part;
}

// v at `index` along dim, with that dim removed.
inline StridedView select_view(const StridedView& v, int dim, int64_t index) {
  StridedView slot = narrow_view(v, dim, index, 1);
  for (int d = dim; d + 1 < v.ndim; ++d) {
    slot.shape[d] = v.shape[d + 1];
    slot.strides[d] = v.strides[d + 1];
  }
  slot.ndim = v.ndim - 1;
  return slot;
}

}  // namespace kiln::cpu
