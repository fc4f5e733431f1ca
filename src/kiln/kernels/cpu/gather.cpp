#include "kiln/kernels/cpu/gather.h"

#include <algorithm>
#include <type_traits>

#include "kiln/kernels/cpu/binary.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/sub_view.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

IntList shape_of(const StridedView& v) {
  return IntList(v.shape, v.shape + v.ndim);
}

// Element offset of the position `coord` within the first `ndim` dims of v.
int64_t offset_at(const StridedView& v, const int64_t* coord, int ndim) {
  int64_t off = 0;
  for (int d = 0; d < ndim; ++d)
    off += coord[d] * v.strides[d];
  return off;
}

// Calls fn(coord) for every position of v's shape in row-major order.
template <typename Fn>
void for_each_position(const StridedView& v, Fn fn) {
  int64_t numel = v.numel();
  int64_t coord[kMaxDims] = {};
  for (int64_t i = 0; i < numel; ++i) {
    fn(static_cast<const int64_t*>(coord));
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (++coord[d] < v.shape[d]) break;
      coord[d] = 0;
    }
  }
}

int64_t read_index(const StridedView& index, int64_t offset) {
  if (index.dtype == DType::Int32) return index.ptr<const int32_t>()[offset];
  KILN_ASSERT(index.dtype == DType::Int64, "index tensors are int32 or int64, got ",
              to_string(index.dtype));
  return index.ptr<const int64_t>()[offset];
}

}  // namespace

void index_select(const StridedView& out, const StridedView& in, const StridedView& index,
                  int dim) {
  int64_t size = in.ndim == 0 ? 1 : in.shape[dim];
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t at = read_index(index, offset_of(index, i));
    KILN_CHECK_INDEX(at >= 0 && at < size, "index_select: index ", at, " is out of range for dim ",
                     dim, " of size ", size, " (shape ", shape_of(in),
                     "): index out of range in self");
    if (in.ndim == 0) {
      copy_convert(out, in);
      continue;
    }
    copy_convert(select_view(out, dim, i), select_view(in, dim, at));
  }
}

void gather(const StridedView& out, const StridedView& in, const StridedView& index, int dim) {
  int64_t size = in.ndim == 0 ? 1 : in.shape[dim];
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.ptr<const T>();
    T* dst = out.ptr<T>();
    for_each_position(index, [&](const int64_t* coord) {
      int64_t at = read_index(index, offset_at(index, coord, index.ndim));
      KILN_CHECK_INDEX(at >= 0 && at < size, "gather: index ", at,
                       " is out of bounds for dimension ", dim, " with size ", size,
                       " (input shape ", shape_of(in), ")");
      int64_t from = 0;
      for (int d = 0; d < in.ndim; ++d)
        from += (d == dim ? at : coord[d]) * in.strides[d];
      dst[offset_at(out, coord, out.ndim)] = src[from];
    });
  });
}

void scatter_add(const StridedView& out, const StridedView& self, const StridedView& index,
                 const StridedView& src, int dim) {
  copy_convert(out, self);
  int64_t size = out.ndim == 0 ? 1 : out.shape[dim];
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.ptr<T>();
    const T* from = src.ptr<const T>();
    for_each_position(index, [&](const int64_t* coord) {
      int64_t at = read_index(index, offset_at(index, coord, index.ndim));
      KILN_CHECK_INDEX(at >= 0 && at < size, "scatter_add: index ", at,
                       " is out of bounds for dimension ", dim, " with size ", size,
                       " (self shape ", shape_of(out), ")");
      int64_t to = 0;
      for (int d = 0; d < out.ndim; ++d)
        to += (d == dim ? at : coord[d]) * out.strides[d];
      if constexpr (std::is_same_v<T, bool>) {
        dst[to] = dst[to] || from[offset_at(src, coord, src.ndim)];
      } else {
        dst[to] += from[offset_at(src, coord, src.ndim)];
      }
    });
  });
}

void index_add(const StridedView& out, const StridedView& self, const StridedView& index,
               const StridedView& src, int dim) {
  copy_convert(out, self);
  int64_t size = out.ndim == 0 ? 1 : out.shape[dim];
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t at = read_index(index, offset_of(index, i));
    KILN_CHECK_INDEX(at >= 0 && at < size, "index_add: index ", at, " is out of range for dim ",
                     dim, " of size ", size, " (self shape ", shape_of(out), ")");
    if (out.ndim == 0) {
      binary(BinaryOp::Add, out, out, src);
      continue;
    }
    StridedView slot = select_view(out, dim, at);
    binary(BinaryOp::Add, slot, slot, select_view(src, dim, i));
  }
}

void embedding(const StridedView& out, const StridedView& weight, const StridedView& indices) {
  const int64_t rows = weight.shape[0], cols = weight.shape[1];
  const int64_t out_col_stride = out.strides[indices.ndim];
  visit_dtype(weight.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_position(indices, [&](const int64_t* coord) {
      int64_t row = read_index(indices, offset_at(indices, coord, indices.ndim));
      KILN_CHECK_INDEX(row >= 0 && row < rows, "embedding: index ", row,
                       " is out of range for a weight of ", rows, " rows (shape ", shape_of(weight),
                       "): index out of range in self");
      const T* src = weight.ptr<const T>() + row * weight.strides[0];
      T* dst = out.ptr<T>() + offset_at(out, coord, indices.ndim);
      for (int64_t j = 0; j < cols; ++j)
        dst[j * out_col_stride] = src[j * weight.strides[1]];
    });
  });
}

void one_hot(const StridedView& out, const StridedView& in, int64_t num_classes) {
  fill(out, Scalar(int64_t(0)));
  const int64_t class_stride = out.strides[in.ndim];
  int64_t* dst = out.ptr<int64_t>();
  for_each_position(in, [&](const int64_t* coord) {
    int64_t value = in.ptr<const int64_t>()[offset_at(in, coord, in.ndim)];
    KILN_CHECK(value >= 0, "one_hot: Class values must be non-negative, got ", value);
    KILN_CHECK(value < num_classes, "one_hot: Class values must be smaller than num_classes (",
               num_classes, "), got ", value);
    dst[offset_at(out, coord, in.ndim) + value * class_stride] = 1;
  });
}

int64_t max_int64(const StridedView& in) {
  KILN_ASSERT(in.dtype == DType::Int64 && in.numel() > 0, "max_int64: expected non-empty int64");
  int64_t best = in.ptr<const int64_t>()[offset_of(in, 0)];
  for_each_position(in, [&](const int64_t* coord) {
    best = std::max(best, in.ptr<const int64_t>()[offset_at(in, coord, in.ndim)]);
  });
  return best;
}

}  // namespace kiln::cpu
