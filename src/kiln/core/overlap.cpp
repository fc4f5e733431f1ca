#include "kiln/core/overlap.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace kiln {

bool is_non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  const IntList& shape = t.shape();
  const IntList& strides = t.strides();
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (shape[a] < 2 || shape[b] < 2) return shape[a] < 2 && shape[b] >= 2;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

bool has_internal_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1) return true;
  return false;
}

MemOverlap memory_overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return MemOverlap::No;
  if (!a.is_alias_of(b)) return MemOverlap::No;
  if (a.offset() == b.offset() && a.shape() == b.shape() && a.strides() == b.strides())
    return MemOverlap::Full;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b))
    return MemOverlap::TooHard;
  // Dense tensors span [offset, offset + numel) elements of the storage.
  const int64_t a_begin = a.offset() * int64_t(a.itemsize());
  const int64_t b_begin = b.offset() * int64_t(b.itemsize());
  const int64_t a_end = a_begin + a.numel() * int64_t(a.itemsize());
  const int64_t b_end = b_begin + b.numel() * int64_t(b.itemsize());
  if (a_end <= b_begin || b_end <= a_begin) return MemOverlap::No;
  return MemOverlap::Partial;
}

}  // namespace kiln
