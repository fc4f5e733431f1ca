// Padding: a table per dim maps each output coordinate to the input element
// offset it reads (or to none), and rows along the last dim are copied
// through the tables. The backward walks the same tables and adds instead
// of copying; rows that differ in a leading dim nobody pads never write the
// same gradient element, so those blocks run in parallel.
#include "kiln/kernels/cpu/pad.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kNoSource = std::numeric_limits<int64_t>::min();

// tables[d][o]: the element offset (coordinate * strides[d]) that output
// coordinate o of dim d reads, or kNoSource.
std::vector<std::vector<int64_t>> source_offsets(const StridedView& out, const int64_t* in_shape,
                                                 const int64_t* in_strides, const PadParams& p) {
  std::vector<std::vector<int64_t>> tables(size_t(out.ndim));
  for (int d = 0; d < out.ndim; ++d) {
    std::vector<int64_t>& table = tables[size_t(d)];
    table.resize(size_t(out.shape[d]));
    for (int64_t o = 0; o < out.shape[d]; ++o) {
      const int64_t source = pad_source(o, in_shape[d], p.before[d], p.after[d], p.mode);
      table[size_t(o)] = source < 0 ? kNoSource : source * in_strides[d];
    }
  }
  return tables;
}

// Row r of the output (all dims but the last): the offset of its source row
// and of its element in `strided` (dy's layout), or kNoSource for the first
// when some leading coordinate reads nothing.
struct RowOffsets {
  int64_t source, strided;
};

RowOffsets row_offsets(int64_t r, const StridedView& out, const int64_t* strided_strides,
                       const std::vector<std::vector<int64_t>>& tables) {
  RowOffsets offsets{0, 0};
  for (int d = out.ndim - 2; d >= 0; --d) {
    const int64_t index = r % out.shape[d];
    r /= out.shape[d];
    offsets.strided += index * strided_strides[d];
    const int64_t source = tables[size_t(d)][size_t(index)];
    offsets.source =
        (offsets.source == kNoSource || source == kNoSource) ? kNoSource : offsets.source + source;
  }
  return offsets;
}

template <typename T>
void pad_typed(const StridedView& out, const StridedView& x, const PadParams& p) {
  const T fill_value = static_cast<T>(p.value);
  if (out.ndim == 0) {
    *out.ptr<T>() = *x.ptr<const T>();
    return;
  }
  const auto tables = source_offsets(out, x.shape, x.strides, p);
  const std::vector<int64_t>& last = tables.back();
  const int64_t row_size = out.shape[out.ndim - 1], rows = out.numel() / row_size;
  const T* src = x.ptr<const T>();
  parallel_for(rows, out.numel() > kParallelGrain, [&](int64_t r) {
    T* dst = out.ptr<T>() + r * row_size;
    const int64_t base = row_offsets(r, out, out.strides, tables).source;
    if (base == kNoSource) {
      std::fill(dst, dst + row_size, fill_value);
      return;
    }
    for (int64_t o = 0; o < row_size; ++o) {
      const int64_t source = last[size_t(o)];
      dst[o] = source == kNoSource ? fill_value : src[base + source];
    }
  });
}

template <typename T>
void pad_backward_typed(const StridedView& dx, const StridedView& dy, const PadParams& p) {
  fill(dx, Scalar(0.0));
  if (dx.ndim == 0) {
    *dx.ptr<T>() = *dy.ptr<const T>();
    return;
  }
  if (dy.numel() == 0) return;
  const auto tables = source_offsets(dy, dx.shape, dx.strides, p);
  const std::vector<int64_t>& last = tables.back();
  const int64_t row_size = dy.shape[dy.ndim - 1], rows = dy.numel() / row_size;
  // Blocks of rows that share their leading unpadded coordinates.
  int64_t blocks = 1;
  for (int d = 0; d < dy.ndim - 1 && p.before[d] == 0 && p.after[d] == 0; ++d)
    blocks *= dy.shape[d];
  const int64_t rows_per_block = rows / blocks, gw = dy.strides[dy.ndim - 1];
  const T* g = dy.ptr<const T>();
  T* grad_in = dx.ptr<T>();
  parallel_for(blocks, dy.numel() > kParallelGrain, [&](int64_t block) {
    for (int64_t r = block * rows_per_block; r < (block + 1) * rows_per_block; ++r) {
      const RowOffsets offsets = row_offsets(r, dy, dy.strides, tables);
      if (offsets.source == kNoSource) continue;
      for (int64_t o = 0; o < row_size; ++o) {
        const int64_t source = last[size_t(o)];
        if (source != kNoSource) grad_in[offsets.source + source] += g[offsets.strided + o * gw];
      }
    }
  });
}

}  // namespace

int64_t pad_source(int64_t o, int64_t size, int64_t before, int64_t after, PadMode mode) {
  const int64_t c = o - before;
  switch (mode) {
    case PadMode::Constant:
      return c >= 0 && c < size ? c : -1;
    case PadMode::Reflect:
      if (c < 0) return -c;
      return c >= size ? 2 * (size - 1) - c : c;
    case PadMode::Replicate:
      return std::clamp<int64_t>(c, 0, size - 1);
    case PadMode::Circular:
      break;
  }
  // Circular wraps around what negative padding leaves of the dim (PyTorch
  // crops first, then copies from the cropped ends).
  const int64_t start = std::max<int64_t>(-before, 0);
  const int64_t kept = size - start - std::max<int64_t>(-after, 0);
  int64_t k = (o - std::max<int64_t>(before, 0)) % kept;
  if (k < 0) k += kept;
  return start + k;
}

void pad(const StridedView& out, const StridedView& x, const PadParams& p) {
  if (out.numel() == 0) return;
  visit_dtype(out.dtype, [&](auto t) { pad_typed<decltype(t)>(out, x, p); });
}

void pad_backward(const StridedView& dx, const StridedView& dy, const PadParams& p) {
  if (dx.numel() == 0) return;
  visit_floating(dx.dtype, [&](auto t) { pad_backward_typed<decltype(t)>(dx, dy, p); });
}

}  // namespace kiln::cpu
