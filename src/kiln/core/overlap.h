// Whether two tensors share elements, as an in-place write must know: a
// kernel that writes `out` while it reads an input that is a shifted or
// permuted view of the same memory reads values it already overwrote.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

enum class MemOverlap {
  No,       // no element in common
  Full,     // the same view: same first element, shape and strides
  Partial,  // some elements in common, laid out differently
  TooHard,  // not decidable cheaply (a view with gaps); assumed safe, as in PyTorch
};

// PyTorch's rule: decided only when both tensors are dense (a permutation
// of a contiguous layout, no gaps), by comparing the memory ranges they span.
MemOverlap memory_overlap(const Tensor& a, const Tensor& b);

// True when two elements of `t` are one memory location (a stride of 0 over
// a dimension of size > 1: an expanded tensor).
bool has_internal_overlap(const Tensor& t);

// Dense: every element of the span [offset, offset + numel) belongs to `t`
// exactly once, in some order of its dimensions.
bool is_non_overlapping_and_dense(const Tensor& t);

}  // namespace kiln
