#include "kiln/kernels/cpu/scatter.h"

#include <type_traits>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/scatter_reduce.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

int64_t offset_at(const StridedView& v, const int64_t* coord) {
  int64_t off = 0;
  for (int d = 0; d < v.ndim; ++d)
    off += coord[d] * v.strides[d];
  return off;
}

int64_t read_index(const StridedView& index, int64_t offset) {
  if (index.dtype == DType::Int32) return index.ptr<const int32_t>()[offset];
  return index.ptr<const int64_t>()[offset];
}

// Bools combine as PyTorch's do: add is `or`, multiply is `and`.
template <typename T>
T combine(T old, T value, ScatterReduce reduce) {
  if (reduce == ScatterReduce::None) return value;
  if constexpr (std::is_same_v<T, bool>) {
    return reduce == ScatterReduce::Add ? (old || value) : (old && value);
  } else {
    return reduce == ScatterReduce::Add ? T(old + value) : T(old * value);
  }
}

// Calls write(to, from) for every position of index in row-major order:
// `to` the element offset in out it names along dim, `from` the offset of
// its value in src. A bad index throws IndexError naming `op`.
template <typename Write>
void for_each_target(const StridedView& out, const StridedView& index, const StridedView& src,
                     int dim, const char* op, Write&& write) {
  const int64_t size = out.ndim == 0 ? 1 : out.shape[dim];
  const int64_t numel = index.numel();
  int64_t coord[kMaxDims] = {};
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t at = read_index(index, offset_at(index, coord));
    KILN_CHECK_INDEX(at >= 0 && at < size, op, ": index ", at, " is out of bounds for dimension ",
                     dim, " with size ", size);
    int64_t to = 0;
    for (int d = 0; d < out.ndim; ++d)
      to += (d == dim ? at : coord[d]) * out.strides[d];
    write(to, offset_at(src, coord));
    for (int d = index.ndim - 1; d >= 0; --d) {
      if (++coord[d] < index.shape[d]) break;
      coord[d] = 0;
    }
  }
}

}  // namespace

void scatter(const StridedView& out, const StridedView& self, const StridedView& index,
             const StridedView& src, int dim, ScatterReduce reduce) {
  copy_convert(out, self);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.ptr<T>();
    const T* values = src.ptr<const T>();
    for_each_target(out, index, src, dim, "scatter", [&](int64_t to, int64_t from) {
      dst[to] = combine(dst[to], values[from], reduce);
    });
  });
}

// ---- scatter_reduce's amax / amin (scatter_reduce.h) ----

void scatter_extreme(const StridedView& out, const StridedView& self, const StridedView& index,
                     const StridedView& src, int dim, ScatterExtreme extreme, bool include_self) {
  KILN_ASSERT(out.is_contiguous(), "scatter_extreme: expects a contiguous output");
  copy_convert(out, self);
  std::vector<char> written(include_self ? 0 : size_t(out.numel()), 0);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.ptr<T>();
    const T* values = src.ptr<const T>();
    for_each_target(out, index, src, dim, "scatter_reduce", [&](int64_t to, int64_t from) {
      const T value = values[from];
      if (!include_self && !written[size_t(to)]) {
        written[size_t(to)] = 1;
        dst[to] = value;
      } else if (extreme == ScatterExtreme::Max ? dst[to] < value : value < dst[to]) {
        dst[to] = value;
      }
    });
  });
}

}  // namespace kiln::cpu
