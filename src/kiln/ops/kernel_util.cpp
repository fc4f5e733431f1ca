#include "kiln/ops/kernel_util.h"

#include "kiln/kernels/cpu/copy.h"

namespace kiln {

ContiguousInput::ContiguousInput(const cpu::StridedView& v) {
  if (v.data == nullptr || v.is_contiguous()) {
    data_ = v.data;
    return;
  }
  copy_ = make_tensor(IntList(v.shape, v.shape + v.ndim), v.dtype);
  cpu::StridedView packed = v;
  packed.data = copy_.data_ptr();
  IntList strides = contiguous_strides(copy_.shape());
  std::copy(strides.begin(), strides.end(), packed.strides);
  cpu::copy_convert(packed, v);
  data_ = copy_.data_ptr();
}

}  // namespace kiln
