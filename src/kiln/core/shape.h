// Shape arithmetic shared by views, broadcasting and op inference.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/util/int_list.h"

namespace kiln {

int64_t numel_of(const IntList& shape);
IntList contiguous_strides(const IntList& shape);
bool is_contiguous(const IntList& shape, const IntList& strides);

// Turns a possibly negative dim into [0, ndim). `op` names the caller in the
// error: "sum: dim 3 is out of range for a tensor of 2 dims (shape [2, 3])".
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, const IntList& shape);

// NumPy broadcasting of two shapes; the error names both shapes and the dim.
IntList broadcast_shapes(const IntList& a, const IntList& b, std::string_view op);

// Strides that let a tensor of (shape, strides) be viewed as new_shape without
// a copy, or nothing when the memory layout does not allow it.
std::optional<IntList> view_strides(const IntList& shape, const IntList& strides,
                                    const IntList& new_shape);

// Resolves one -1 entry in a reshape target and checks the element count.
IntList infer_reshape(const IntList& target, int64_t numel, std::string_view op,
                      const IntList& shape);

}  // namespace kiln
