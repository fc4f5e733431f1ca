// Walking tensors line by line along one dim: the outer loop of the kernels
// that scan, sort or select along a dim (cumsum, sort, topk). The views share
// every size but the one along `dim`, which each walks with its own stride.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

template <int N>
class Lines {
 public:
  // A 0-d view counts as one line of one element (dim 0 of a 1-D view).
  Lines(const std::array<StridedView, N>& views, int dim) : views_(views), dim_(dim) {
    for (StridedView& v : views_) {
      if (v.ndim > 0) continue;
      v.ndim = 1;
      v.shape[0] = 1;
      v.strides[0] = 1;
    }
    count_ = 1;
    for (int d = 0; d < views_[0].ndim; ++d)
      count_ *= d == dim_ ? 1 : views_[0].shape[d];
  }

  int64_t count() const { return count_; }
  int64_t length(int k) const { return views_[k].shape[dim_]; }
  int64_t stride(int k) const { return views_[k].strides[dim_]; }

  // The first element of line `line` (row-major over the other dims) of view k.
  template <typename T>
  T* start(int k, int64_t line) const {
    const StridedView& v = views_[k];
    int64_t offset = 0;
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (d == dim_) continue;
      offset += (line % v.shape[d]) * v.strides[d];
      line /= v.shape[d];
    }
    return static_cast<T*>(v.data) + offset;
  }

 private:
  std::array<StridedView, N> views_;
  int dim_;
  int64_t count_ = 1;
};

}  // namespace kiln::cpu
