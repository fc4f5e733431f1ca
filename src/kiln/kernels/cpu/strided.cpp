#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

bool StridedView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) return true;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

StridedView broadcast_to(const StridedView& in, const int64_t* shape, int ndim) {
  StridedView out;
  out.data = in.data;
  out.dtype = in.dtype;
  out.ndim = ndim;
  int lead = ndim - in.ndim;
  for (int d = 0; d < ndim; ++d) {
    out.shape[d] = shape[d];
    bool broadcast = d < lead || in.shape[d - lead] != shape[d];
    out.strides[d] = broadcast ? 0 : in.strides[d - lead];
  }
  return out;
}

}  // namespace kiln::cpu
