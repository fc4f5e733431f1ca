// Helpers for backward rules.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

// Sums a broadcast gradient back to `shape`: over the leading dims `shape`
// lacks and over dims where `shape` has size 1 (the reverse of broadcasting).
Tensor sum_to(const Tensor& grad, const IntList& shape);

}  // namespace kiln
