// Tensor: a cheap handle (one shared pointer) to a TensorImpl, which is
// storage + shape + strides + offset + dtype. Views share the storage; two
// tensors alias iff they share a storage.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/scalar.h"
#include "kiln/core/shape.h"
#include "kiln/core/storage.h"
#include "kiln/core/trace_hook.h"
#include "kiln/util/error.h"

namespace kiln {

// Autograd state hangs off a tensor through this interface; the autograd
// layer (above core) defines what it holds.
struct AutogradMeta {
  virtual ~AutogradMeta() = default;
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, IntList shape, IntList strides, int64_t offset, DType dtype);

  const Storage& storage() const { return storage_; }
  const IntList& shape() const { return shape_; }
  const IntList& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }

  bool requires_grad = false;
  // A Python number turned into a 0-d tensor (x + 2.5): it only changes the
  // result dtype when it is of a higher category (see ResultTypeState).
  bool wrapped_number = false;
  std::shared_ptr<AutogradMeta> autograd;

 private:
  Storage storage_;
  IntList shape_, strides_;
  int64_t offset_;
  DType dtype_;
  int64_t numel_;
  bool contiguous_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // How many Tensor handles share this one's TensorImpl: autograd keeps a
  // gradient that no other handle can see rather than copy it.
  long use_count() const { return impl_.use_count(); }
  bool is_alias_of(const Tensor& other) const;

  const IntList& shape() const { return checked().shape(); }
  const IntList& strides() const { return checked().strides(); }
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t numel() const { return checked().numel(); }
  int64_t offset() const { return checked().offset(); }
  DType dtype() const { return checked().dtype(); }
  size_t itemsize() const { return element_size(dtype()); }
  bool is_contiguous() const { return checked().is_contiguous(); }

  const Storage& storage() const { return checked().storage(); }
  // Address of element [0, 0, ...], storage offset applied. A sync point:
  // outside a running engine op it first waits for the ops pushed on this
  // storage (and raises the failure they left), so code that reads or writes
  // values on the host sees them done (Note [Sync points], engine/engine.h).
  void* data_ptr() const;
  // The same address without waiting: for code that schedules work on the
  // tensor (dispatch pushing a kernel) rather than touching its values.
  void* unsynced_data_ptr() const;
  // Waits as data_ptr() does, without taking the address.
  void wait_for_engine() const { storage()->engine_var().wait_for_host_access(); }
  template <typename T>
  T* data() const {
    KILN_CHECK_TYPE(dtype_of<T>() == dtype(), "data<", kiln::to_string(dtype_of<T>()),
                    ">() called on a tensor of dtype ", dtype());
    return static_cast<T*>(data_ptr());
  }

  // Bumped by every in-place write to the storage (shared with all views).
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  bool requires_grad() const { return checked().requires_grad; }

  // Reading values into the host program. While a trace records, each read
  // is reported with the caller's location (see core/trace_hook.h): a value
  // read there is frozen into the graph.
  // The single element of a one-element tensor.
  Scalar item(std::source_location where = std::source_location::current()) const;
  template <typename T>
  T item(std::source_location where = std::source_location::current()) const {
    return item(where).to<T>();
  }
  // Copies the elements out in row-major order, converting to T.
  template <typename T>
  std::vector<T> to_vector(std::source_location where = std::source_location::current()) const;

  // PyTorch's format: tensor([[1., 2.]])
  std::string to_string(std::source_location where = std::source_location::current()) const;

 private:
  const TensorImpl& checked() const {
    KILN_CHECK(impl_ != nullptr, "operation on an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {
std::string render(const Tensor& t);  // to_string without reporting the read
}  // namespace detail

// A new tensor with its own contiguous, uninitialized storage.
Tensor make_tensor(const IntList& shape, DType dtype);
// A view over another tensor's storage.
Tensor make_view(const Tensor& base, IntList shape, IntList strides, int64_t offset);

// Reads element `linear_index` (row-major over the shape) as a double or
// int64, whatever the layout. Slow; for printing, item() and tests.
Scalar read_element(const Tensor& t, int64_t linear_index);

template <typename T>
std::vector<T> Tensor::to_vector(std::source_location where) const {
  report_host_read(*this, "to_vector()", where);
  std::vector<T> out;
  out.reserve(size_t(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out.push_back(read_element(*this, i).template to<T>());
  return out;
}

}  // namespace kiln
