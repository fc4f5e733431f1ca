#include "kiln/kernels/cpu/onednn.h"

#include <cstdlib>
#include <memory>

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

namespace {

// 64-byte aligned, as oneDNN's own buffers are.
class AlignedBuffer {
 public:
  void* reserve(size_t size) {
    if (size > size_) {
      data_.reset(static_cast<char*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
      KILN_CHECK(data_ != nullptr, "out of memory reserving ", size, " bytes for oneDNN");
      size_ = size;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

}  // namespace

dnnl::memory reorder_buffer(const dnnl::memory::desc& desc, ReorderSlot slot) {
  thread_local AlignedBuffer buffers[3];
  void* data = buffers[static_cast<int>(slot)].reserve(desc.get_size());
  return dnnl::memory(desc, engine(), data);
}

void execute(const dnnl::primitive& prim, std::initializer_list<ExecArg> args) {
  constexpr size_t kMaxArgs = 8;
  KILN_ASSERT(args.size() <= kMaxArgs, "a oneDNN primitive got ", args.size(), " arguments");
  dnnl_exec_arg_t c_args[kMaxArgs];
  int count = 0;
  for (const ExecArg& arg : args) {
    if (arg.memory) c_args[count++] = dnnl_exec_arg_t{arg.index, arg.memory.get()};
  }
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream().get(), count, c_args),
                          "could not execute a primitive");
  stream().wait();
}

Reorder::Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to)
    : from_(from), to_(to), needed_(from != to) {
  if (!needed_) return;
  dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, default_attr());
  reorder_ = dnnl::reorder(pd);
  scratchpad_ = pd.scratchpad_desc();
}

dnnl::memory Reorder::run(const void* data, ReorderSlot slot) const {
  if (!needed_) return wrap(to_, data);
  dnnl::memory target = reorder_buffer(to_, slot);
  run_into(wrap(from_, data), target);
  return target;
}

void Reorder::run_into(const dnnl::memory& source, const dnnl::memory& target) const {
  execute(reorder_, {{DNNL_ARG_FROM, source},
                     {DNNL_ARG_TO, target},
                     {DNNL_ARG_SCRATCHPAD, scratchpad(scratchpad_)}});
}

void Reorder::run_into(const dnnl::memory& source, void* data) const {
  run_into(source, wrap(to_, data));
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& shape, const dnnl::memory::dims& strides) {
  return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, strides);
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
