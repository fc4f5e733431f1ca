// The indexing writes and reads PyTorch programs reach for beyond
// index_select / gather / scatter_add / index_add (ops/shape.h): scatter
// (an op of the table, scatter_ops.cpp) and compositions of ops
// (indexing.cpp) that trace and differentiate as their parts. As in
// PyTorch, index tensors are int64 (scatter also takes int32), dims wrap,
// and a bad index raises IndexError naming it.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

// self with src's elements written where index points along dim: for dim 0,
// out[index[i][j]][j] = src[i][j]. reduce "add" / "multiply" combines with
// what is there instead of replacing it. A position named twice keeps the
// last write (row-major order of index). The value form (a number, or any
// 0-d src) writes one value everywhere.
// Gradients: self gets g where nothing was written (all of g with "add"),
// src gets g gathered at its positions; "multiply" has none, as in PyTorch.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce = "none");
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce = "none");
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::string& reduce = "none");
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
                       const std::string& reduce = "none");

// x with the slices index[i] along dim set to value (a number or a 0-d
// tensor, which then gets the gradient of every slice it filled); negative
// indices count from the end.
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);
// x with slice index[i] along dim replaced by source's slice i (source has
// x's dtype and shape but index.numel() along dim).
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
const Tensor& index_copy_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);

// gather after broadcasting x and indices over every dim but dim; with no
// dim, x and indices are flattened first (torch.take_along_dim).
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);

// The elements of x (broadcast with the bool mask) where mask is true, 1-D
// in row-major order. The length depends on the data, so it refuses to run
// while a trace records, as nonzero does (data_dependent.h).
Tensor masked_select(const Tensor& x, const Tensor& mask);
// x (broadcast with mask) with the positions where mask is true filled, in
// row-major order, by source's first elements; source has x's dtype and at
// least as many elements as mask has trues.
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
const Tensor& masked_scatter_(const Tensor& x, const Tensor& mask, const Tensor& source);

}  // namespace kiln
