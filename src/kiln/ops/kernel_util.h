// Helpers for op glue whose kernels want contiguous buffers.
#pragma once

#include "kiln/core/tensor.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln {

// The data of `v` laid out contiguously: v's own pointer when it already is,
// else a packed copy that lives as long as this object.
class ContiguousInput {
 public:
  explicit ContiguousInput(const cpu::StridedView& v);
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

 private:
  Tensor copy_;
  const void* data_ = nullptr;
};

}  // namespace kiln
