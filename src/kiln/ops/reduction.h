// Reductions and softmax. As in PyTorch: `dims` empty means every dim,
// negative dims wrap, a dim may not repeat, and keepdim leaves reduced dims in
// place with size 1.
#pragma once

#include <optional>
#include <tuple>

#include "kiln/core/tensor.h"

namespace kiln {

// Bool and integer inputs sum (and multiply) into int64 unless `dtype` says
// otherwise; a given dtype converts the input before reducing. A sum over no
// elements is 0, a product 1, a mean NaN.
Tensor sum(const Tensor& x, IntList dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, IntList dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// Floating inputs only, unless `dtype` names a floating type to compute in.
Tensor mean(const Tensor& x, IntList dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

// Max/min values over dims; NaN propagates; reducing an empty dim is an error.
Tensor amax(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntList dims = {}, bool keepdim = false);

// (values, int64 indices) along one dim; ties give the first occurrence and a
// NaN counts as the max (and the min).
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over every element, a 0-d tensor
Tensor min(const Tensor& x);

// Index of the first max/min along `dim`, or within the flattened tensor
// when no dim is given.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Sum of squared deviations divided by (n - correction); floating only.
Tensor var(const Tensor& x, IntList dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntList dims = {}, int64_t correction = 1, bool keepdim = false);

// exp(x) / sum(exp(x)) along `dim`, and its log, computed stably; floating only.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln
