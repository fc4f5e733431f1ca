// Joining and indexing: cat, stack, index_select, gather, embedding, one_hot,
// and the accumulating writes scatter_add and index_add.
// Each returns a new contiguous tensor (see view.h for the ops that alias).
#pragma once

#include <optional>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// Joins along an existing dim; dtypes are promoted as in PyTorch and shapes
// must match except at `dim` (a 1-D empty tensor is skipped, as in PyTorch).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// x's entries at `index` (1-D int32/int64) along dim.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] for dim 0, and so on; out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of self with src[i][j] added at [index[i][j]][j] for dim 0 (and so
// on), as in PyTorch: index has self's number of dims and is no larger than
// src (nor than self, apart from dim); repeated indices add up.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// A copy of self with source.select(dim, i) added at self.select(dim, index[i]).
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// Rows of the 2-D `weight` picked by `indices`: shape indices.shape + [dim].
// padding_idx only changes the gradient (that row gets none).
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);
// int64 class indices -> int64 one-hot rows; -1 takes max(x) + 1 classes.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

}  // namespace kiln
