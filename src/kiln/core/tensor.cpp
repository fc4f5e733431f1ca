#include "kiln/core/tensor.h"

#include <cstring>

namespace kiln {

TensorImpl::TensorImpl(Storage storage, IntList shape, IntList strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype),
      numel_(numel_of(shape_)),
      contiguous_(kiln::is_contiguous(shape_, strides_)) {
  KILN_ASSERT(shape_.size() == strides_.size(), "shape ", shape_, " and strides ", strides_,
              " differ in length");
}

bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && storage() == other.storage();
}

int64_t Tensor::size(int64_t d) const {
  return shape()[wrap_dim(d, dim(), "size", shape())];
}

int64_t Tensor::stride(int64_t d) const {
  return strides()[wrap_dim(d, dim(), "stride", shape())];
}

void* Tensor::data_ptr() const {
  wait_for_engine();
  return unsynced_data_ptr();
}

void* Tensor::unsynced_data_ptr() const {
  auto* base = static_cast<char*>(storage()->data());
  return base + offset() * int64_t(itemsize());
}

Scalar Tensor::item(std::source_location where) const {
  report_host_read(*this, "item()", where);
  KILN_CHECK(numel() == 1, "item: a tensor with ", numel(),
             " elements cannot be converted to a scalar (shape ", shape(), ")");
  return read_element(*this, 0);
}

Scalar read_element(const Tensor& t, int64_t linear_index) {
  int64_t elem_offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    int64_t size = t.shape()[d];
    elem_offset += (linear_index % size) * t.strides()[d];
    linear_index /= size;
  }
  const char* p = static_cast<const char*>(t.data_ptr()) + elem_offset * int64_t(t.itemsize());
  return visit_dtype(t.dtype(), [&](auto tag) -> Scalar {
    using T = decltype(tag);
    T value;
    std::memcpy(&value, p, sizeof(T));
    if constexpr (std::is_same_v<T, bool>)
      return Scalar(value);
    else if constexpr (std::is_floating_point_v<T>)
      return Scalar(double(value));
    else
      return Scalar(int64_t(value));
  });
}

Tensor make_tensor(const IntList& shape, DType dtype) {
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_CHECK_VALUE(shape[i] >= 0, "negative dimension ", shape[i], " at dim ", i,
                     " of requested shape ", shape);
  }
  size_t bytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(size_t(numel_of(shape)), element_size(dtype), &bytes),
             "tensor of shape ", shape, " and dtype ", to_string(dtype),
             " has more bytes than memory can address");
  auto storage = std::make_shared<StorageImpl>(bytes);
  Tensor t(
      std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
  if (TraceHook* hook = trace_hook()) hook->on_tensor_created(t);
  return t;
}

Tensor make_view(const Tensor& base, IntList shape, IntList strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), std::move(shape), std::move(strides),
                                             offset, base.dtype()));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  // An operator cannot take the caller's location; the report says what ran.
  if (t.defined()) report_host_read(t, "operator<< (printing)", std::source_location());
  return os << detail::render(t);
}

}  // namespace kiln
