// Views and reshaping, with PyTorch's names and argument order.
//
// Every function here except reshape/flatten returns a view: a tensor over
// the input's storage (writes through one are seen by the other, and they
// share a version counter). reshape and flatten return a view when the
// input's strides allow it and a contiguous copy otherwise, as in PyTorch.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// `shape` may hold one -1, inferred from the element count. Throws when the
// strides don't allow the view (use reshape then).
Tensor view(const Tensor& x, const IntList& shape);
Tensor reshape(const Tensor& x, const IntList& shape);
// The same with sizes that may be symbolic (core/sym_shape.h), so a trace
// with dynamic shapes records them as expressions: reshape(x, DimList{
// sym_size(x, 0), -1}). A span, so that braces of plain ints stay IntList.
Tensor view(const Tensor& x, std::span<const Dim> shape);
Tensor reshape(const Tensor& x, std::span<const Dim> shape);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);  // transpose of a tensor of at most 2 dims
Tensor permute(const Tensor& x, const IntList& dims);
// -1 keeps a dim; new leading dims may be added; only size-1 dims can grow
// (their stride becomes 0).
Tensor expand(const Tensor& x, const IntList& size);
Tensor expand(const Tensor& x, std::span<const Dim> size);
Tensor expand_as(const Tensor& x, const Tensor& other);
Tensor squeeze(const Tensor& x);               // drops every size-1 dim
Tensor squeeze(const Tensor& x, int64_t dim);  // drops `dim` if its size is 1
Tensor unsqueeze(const Tensor& x, int64_t dim);
// Merges dims start_dim..end_dim into one. Not an op of its own: it is
// reshape to the merged shape, so a trace records a view or a reshape.
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);  // drops `dim`
// x[start:end:step] along `dim`, with Python's clamping of the bounds.
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
// Pieces of `split_size` along dim (the last may be smaller), or of the given
// sizes. Note split(x, {3}) picks the split_size overload, as in Python.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim = 0);
// At most `chunks` pieces of ceil(size / chunks) each.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// Not views: copies of `base` with `src` written where slice(base, ...) or
// select(base, ...) would look (PyTorch's slice_scatter/select_scatter).
// src must have that part's shape; it is cast to base's dtype. The backward
// rules of narrow, slice and select are built from them.
Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim = 0,
                     std::optional<int64_t> start = std::nullopt,
                     std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index);

}  // namespace kiln
