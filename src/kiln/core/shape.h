// Shape arithmetic shared by views, broadcasting and op inference.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/core/dim.h"
#include "kiln/util/int_list.h"

namespace kiln {

int64_t numel_of(const IntList& shape);
Dim numel_of(const DimList& shape);
IntList contiguous_strides(const IntList& shape);
DimList contiguous_strides(const DimList& shape);
bool is_contiguous(const IntList& shape, const IntList& strides);

// Turns a possibly negative dim into [0, ndim). `op` names the caller in the
// error: "sum: dim 3 is out of range for a tensor of 2 dims (shape [2, 3])".
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, const IntList& shape);
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, const DimList& shape);

// NumPy broadcasting of two shapes; the error names both shapes and the dim.
// Symbolic sizes broadcast as they compare (dim.h): a size that may be 1
// needs an example value, and the decision becomes a guard.
DimList broadcast_shapes(const DimList& a, const DimList& b, std::string_view op);
IntList broadcast_shapes(const IntList& a, const IntList& b, std::string_view op);

// Strides that let a tensor of (shape, strides) be viewed as new_shape without
// a copy, or nothing when the memory layout does not allow it.
std::optional<IntList> view_strides(const IntList& shape, const IntList& strides,
                                    const IntList& new_shape);

// Resolves one -1 entry in a reshape target and checks the element count.
// With symbols the -1 must divide out exactly (`[batch, -1]` of
// `[batch, 8, 64]` is `[batch, 512]`); an error names the sizes otherwise.
DimList infer_reshape(const DimList& target, const Dim& numel, std::string_view op,
                      const DimList& shape);
IntList infer_reshape(const IntList& target, int64_t numel, std::string_view op,
                      const IntList& shape);

}  // namespace kiln
