#include "kiln/kernels/cpu/onednn.h"

#include "kiln/kernels/cpu/copy.h"

namespace kiln::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine cpu_engine(dnnl::engine::kind::cpu, 0);
  return cpu_engine;
}

dnnl::stream& stream() {
  static dnnl::stream cpu_stream(engine());
  return cpu_stream;
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory scratchpad(const dnnl::memory::desc& desc) {
  thread_local std::vector<char> buffer;
  const size_t size = desc.get_size();
  if (buffer.size() < size) buffer.resize(size);
  return dnnl::memory(desc, engine(), buffer.data());
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& shape, const dnnl::memory::dims& strides) {
  return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc plain_desc(const StridedView& v) {
  KILN_ASSERT(v.dtype == DType::Float32, "oneDNN path got ", to_string(v.dtype));
  return plain_desc(dnnl::memory::dims(v.shape, v.shape + v.ndim),
                    dnnl::memory::dims(v.strides, v.strides + v.ndim));
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) {
  // oneDNN takes a non-const handle for every argument; inputs are only read.
  return dnnl::memory(desc, engine(), const_cast<void*>(data));
}

}  // namespace kiln::cpu::onednn

namespace kiln::cpu::onednn {

const float* dense_f32(const StridedView& v, std::vector<float>& storage) {
  if (v.is_contiguous()) return v.ptr<const float>();
  storage.resize(size_t(v.numel()));
  StridedView dense = v;
  dense.data = storage.data();
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    dense.strides[d] = stride;
    stride *= v.shape[d];
  }
  copy_convert(dense, v);
  return storage.data();
}

}  // namespace kiln::cpu::onednn
