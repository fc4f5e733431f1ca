// What a kernel sees of a tensor: a data pointer, a dtype, and shape/strides
// (in elements). Kernels take these and plain numbers; they include no
// Tensor, autograd or JIT header.
#pragma once

#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln::cpu {

inline constexpr int kMaxDims = 12;

struct StridedView {
  void* data = nullptr;  // null for an absent optional input
  DType dtype = DType::Float32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
      n *= shape[d];
    return n;
  }
  bool is_contiguous() const;
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

// The view of `in` broadcast to `shape` (stride 0 along broadcast dims); the
// caller has already checked that the shapes broadcast.
StridedView broadcast_to(const StridedView& in, const int64_t* shape, int ndim);

// Row-major element offset of linear index `i` within `v` (slow path helper).
inline int64_t offset_of(const StridedView& v, int64_t i) {
  int64_t off = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    off += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  return off;
}

}  // namespace kiln::cpu
