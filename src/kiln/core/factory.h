// Tensor factories: empty, zeros, ones, full, arange, linspace, eye,
// randperm, tensors from initializer lists and raw data, and *_like (the
// random ones, rand, randn and randint, are ops: kiln/ops/random.h).
#pragma once

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <vector>

#include "kiln/core/random.h"
#include "kiln/core/tensor.h"

namespace kiln {

struct TensorOptions {
  DType dtype = kDefaultFloat;
  bool requires_grad = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}  // lets callers pass a bare DType
};

Tensor empty(const IntList& shape, TensorOptions options = {});
Tensor zeros(const IntList& shape, TensorOptions options = {});
Tensor ones(const IntList& shape, TensorOptions options = {});
Tensor full(const IntList& shape, Scalar value, TensorOptions options = {});
// A 0-d tensor holding `value`, with the dtype a Python number of its kind gets.
Tensor scalar_tensor(Scalar value, TensorOptions options);
Tensor scalar_tensor(Scalar value);

// [start, end) in steps of `step`; int64 when every bound is an integer.
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = int64_t(1));
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options);
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});

// The random factories (rand, randn, randint, randperm, ...) are random ops:
// ops/random.h.

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);

// A tensor over memory kiln does not own; `release` runs when the last view
// of it is gone. Strides default to contiguous.
Tensor from_blob(void* data, const IntList& shape, DType dtype, std::function<void()> release,
                 const IntList& strides = {});

// Copies `count` elements of type `src_dtype` into a new tensor of `shape`,
// converting to options.dtype.
Tensor tensor_from_data(const void* data, DType src_dtype, const IntList& shape,
                        TensorOptions options);

namespace detail {
template <typename T>
constexpr DType default_dtype_for() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_floating_point_v<T>)
    return kDefaultFloat;
  else
    return kDefaultInt;
}
template <typename T>
Tensor tensor_from_vector(const std::vector<T>& values, const IntList& shape,
                          std::optional<DType> dtype) {
  TensorOptions options(dtype.value_or(default_dtype_for<T>()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // vector<bool> packs bits
    return tensor_from_data(bytes.data(), DType::Bool, shape, options);
  } else {
    return tensor_from_data(values.data(), dtype_of<T>(), shape, options);
  }
}
// Flattens nested initializer lists, checking that every row has one length.
template <typename T>
void flatten_rows(std::initializer_list<std::initializer_list<T>> rows, std::vector<T>& out,
                  int64_t& cols) {
  cols = rows.size() ? int64_t(rows.begin()->size()) : 0;
  for (const auto& row : rows) {
    KILN_CHECK_VALUE(int64_t(row.size()) == cols, "tensor: rows have different lengths (", cols,
                     " and ", row.size(), ")");
    out.insert(out.end(), row.begin(), row.end());
  }
}
}  // namespace detail

// kiln::tensor({1.f, 2.f}), kiln::tensor({{1, 2}, {3, 4}}): floating values
// give float32 and integers int64 (as in PyTorch) unless a dtype is given.
template <typename T>
Tensor tensor(std::initializer_list<T> values, std::optional<DType> dtype = std::nullopt) {
  return detail::tensor_from_vector(std::vector<T>(values), {int64_t(values.size())}, dtype);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<T> flat;
  int64_t cols;
  detail::flatten_rows(rows, flat, cols);
  return detail::tensor_from_vector(flat, {int64_t(rows.size()), cols}, dtype);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> blocks,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<T> flat;
  int64_t rows = -1, cols = -1;
  for (const auto& block : blocks) {
    int64_t block_cols;
    detail::flatten_rows(block, flat, block_cols);
    KILN_CHECK_VALUE(rows < 0 || (int64_t(block.size()) == rows && block_cols == cols),
                     "tensor: nested lists have different lengths");
    rows = int64_t(block.size());
    cols = block_cols;
  }
  rows = std::max<int64_t>(rows, 0);
  cols = std::max<int64_t>(cols, 0);
  return detail::tensor_from_vector(flat, {int64_t(blocks.size()), rows, cols}, dtype);
}
template <typename T>
Tensor tensor(const std::vector<T>& values, const IntList& shape,
              std::optional<DType> dtype = std::nullopt) {
  KILN_CHECK_VALUE(int64_t(values.size()) == numel_of(shape), "tensor: ", values.size(),
                   " values do not fill shape ", shape);
  return detail::tensor_from_vector(values, shape, dtype);
}

}  // namespace kiln
