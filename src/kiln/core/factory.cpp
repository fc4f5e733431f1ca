#include "kiln/core/factory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kiln/core/element_cast.h"

namespace kiln {
namespace {

Tensor with_grad_flag(Tensor t, const TensorOptions& options) {
  t.impl()->requires_grad = options.requires_grad;
  return t;
}

template <typename Fn>
void fill_each(const Tensor& t, Fn value_at) {
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = T(value_at(i));
  });
}

}  // namespace

Tensor empty(const IntList& shape, TensorOptions options) {
  return with_grad_flag(make_tensor(shape, options.dtype), options);
}

Tensor zeros(const IntList& shape, TensorOptions options) {
  Tensor t = empty(shape, options);
  std::memset(t.data_ptr(), 0, size_t(t.numel()) * t.itemsize());
  return t;
}

Tensor ones(const IntList& shape, TensorOptions options) {
  return full(shape, 1, options);
}

Tensor full(const IntList& shape, Scalar value, TensorOptions options) {
  Tensor t = empty(shape, options);
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(static_cast<T*>(t.data_ptr()), t.numel(), value.to<T>());
  });
  return t;
}

Tensor scalar_tensor(Scalar value, TensorOptions options) {
  return full({}, value, options);
}

Tensor scalar_tensor(Scalar value) {
  DType dtype = value.kind() == DType::Float64 ? kDefaultFloat : value.kind();
  return full({}, value, TensorOptions(dtype));
}

Tensor arange(Scalar end) {
  return arange(int64_t(0), end, int64_t(1));
}

Tensor arange(Scalar start, Scalar end, Scalar step) {
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  return arange(start, end, step, TensorOptions(integral ? kDefaultInt : kDefaultFloat));
}

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  double s = start.to_double(), e = end.to_double(), d = step.to_double();
  KILN_CHECK_VALUE(d != 0, "arange: step must be nonzero");
  KILN_CHECK_VALUE((d > 0 && e >= s) || (d < 0 && e <= s), "arange: upper bound ", e,
                   " and lower bound ", s, " inconsistent with step sign ", d);
  auto n = int64_t(std::ceil((e - s) / d));
  Tensor t = empty({n}, options);
  fill_each(t, [&](int64_t i) { return s + double(i) * d; });
  return t;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  KILN_CHECK_VALUE(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, options);
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
  int64_t half = steps / 2;
  fill_each(t, [&](int64_t i) {
    return i < half ? start + step * double(i) : end - step * double(steps - 1 - i);
  });
  return t;
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  KILN_CHECK_VALUE(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor t = zeros({n, m}, options);
  fill_each(t, [&](int64_t i) { return i / m == i % m ? 1 : 0; });
  return t;
}

Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), t.dtype());
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  return ones(t.shape(), t.dtype());
}
Tensor full_like(const Tensor& t, Scalar value) {
  return full(t.shape(), value, t.dtype());
}

Tensor from_blob(void* data, const IntList& shape, DType dtype, std::function<void()> release,
                 const IntList& strides) {
  IntList st = strides.empty() ? contiguous_strides(shape) : strides;
  KILN_CHECK_VALUE(st.size() == shape.size(), "from_blob: shape ", shape, " and strides ", st,
                   " differ in length");
  int64_t extent = 1;  // elements spanned, to size the storage honestly
  for (size_t d = 0; d < shape.size(); ++d) {
    KILN_CHECK_VALUE(shape[d] >= 0 && st[d] >= 0, "from_blob: negative size or stride at dim ", d,
                     " (shape ", shape, ", strides ", st, ")");
    if (shape[d] == 0) extent = 0;
    if (extent) extent += (shape[d] - 1) * st[d];
  }
  auto storage =
      std::make_shared<StorageImpl>(data, size_t(extent) * element_size(dtype), std::move(release));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, st, 0, dtype));
}

Tensor tensor_from_data(const void* data, DType src_dtype, const IntList& shape,
                        TensorOptions options) {
  Tensor t = empty(shape, options);
  visit_dtype(src_dtype, [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* src = static_cast<const S*>(data);
    visit_dtype(t.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      D* dst = static_cast<D*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel(); ++i)
        dst[i] = element_cast<D>(src[i]);
    });
  });
  return t;
}

}  // namespace kiln
