// Sorting along a dim, with PyTorch's names, arguments and defaults: sort,
// argsort and topk. A NaN counts as larger than every number (last in an
// ascending sort, first in a descending one, taken first by topk's largest).
// Equal values keep their order (a stable sort, whatever `stable` says), so
// the indices are the ones PyTorch gives when its result is deterministic.
#pragma once

#include <tuple>

#include "kiln/core/tensor.h"

namespace kiln {

// (values, int64 indices) with values = x gathered at indices along dim.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
// The indices of sort alone.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) along dim, best first, and their int64
// indices; equal values are taken in index order. `sorted` = false allows
// any order, and kiln gives the sorted one.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace kiln
