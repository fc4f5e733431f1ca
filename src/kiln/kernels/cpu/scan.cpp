#include "kiln/kernels/cpu/scan.h"

#include <algorithm>
#include <type_traits>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/lines.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/sub_view.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// PyTorch's CPU accumulation type: double for floating values, int64 else.
template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T>
void scan_line(ScanKind kind, T* out, int64_t out_stride, const T* in, int64_t in_stride,
               int64_t n) {
  using Acc = Accumulator<T>;
  Acc acc = kind == ScanKind::Sum ? Acc(0) : Acc(1);
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = Acc(in[i * in_stride]);
    acc = kind == ScanKind::Sum ? acc + v : acc * v;
    out[i * out_stride] = static_cast<T>(acc);
  }
}

// Element offset of matrix `b` (row-major over the dims before the last two).
int64_t matrix_offset(const StridedView& v, int64_t b) {
  int64_t offset = 0;
  for (int d = v.ndim - 3; d >= 0; --d) {
    offset += (b % v.shape[d]) * v.strides[d];
    b /= v.shape[d];
  }
  return offset;
}

void roll_pieces(const StridedView& out, const StridedView& in, std::span<const int> dims,
                 std::span<const int64_t> shifts) {
  if (dims.empty()) {
    copy_convert(out, in);
    return;
  }
  const int d = dims[0];
  const int64_t n = in.shape[d];
  const int64_t shift = n == 0 ? 0 : ((shifts[0] % n) + n) % n;
  if (shift == 0) {
    roll_pieces(out, in, dims.subspan(1), shifts.subspan(1));
    return;
  }
  // in[0, n - shift) lands at out[shift, n); in[n - shift, n) at out[0, shift).
  roll_pieces(narrow_view(out, d, shift, n - shift), narrow_view(in, d, 0, n - shift),
              dims.subspan(1), shifts.subspan(1));
  roll_pieces(narrow_view(out, d, 0, shift), narrow_view(in, d, n - shift, shift), dims.subspan(1),
              shifts.subspan(1));
}

}  // namespace

void cumulative(ScanKind kind, const StridedView& out, const StridedView& in, int dim) {
  KILN_ASSERT(out.dtype == in.dtype, "cumulative: out and in must share a dtype");
  const Lines<2> lines({out, in}, dim);
  const int64_t count = lines.count(), n = lines.length(1);
  const bool split = count > 1 && count * n >= kParallelGrain;
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_for(count, split, [&](int64_t line) {
      scan_line<T>(kind, lines.start<T>(0, line), lines.stride(0), lines.start<const T>(1, line),
                   lines.stride(1), n);
    });
  });
}

// A view of `in` that reads each flipped dim backwards (negative stride from
// its last element), copied out in row-major order.
void flip(const StridedView& out, const StridedView& in, std::span<const int> dims) {
  StridedView reversed = in;
  const int64_t element = int64_t(element_size(in.dtype));
  for (int d : dims) {
    if (in.shape[d] == 0) continue;
    reversed.data = static_cast<char*>(reversed.data) + (in.shape[d] - 1) * in.strides[d] * element;
    reversed.strides[d] = -in.strides[d];
  }
  copy_convert(out, reversed);
}

// Each rolled dim splits into two pieces that swap places: at most 2^dims
// block copies, no per-element index arithmetic.
void roll(const StridedView& out, const StridedView& in, std::span<const int> dims,
          std::span<const int64_t> shifts) {
  KILN_ASSERT(dims.size() == shifts.size(), "roll: one shift per dim");
  roll_pieces(out, in, dims, shifts);
}

void triangle(const StridedView& out, const StridedView& in, int64_t diagonal, bool upper) {
  KILN_ASSERT(in.ndim >= 2 && out.ndim == in.ndim, "triangle: expected matrices");
  const int r = in.ndim - 2, c = in.ndim - 1;
  const int64_t rows = in.shape[r], cols = in.shape[c];
  const int64_t matrices = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_for(matrices, matrices > 1 && in.numel() >= kParallelGrain, [&](int64_t b) {
      T* dst = out.ptr<T>() + matrix_offset(out, b);
      const T* src = in.ptr<const T>() + matrix_offset(in, b);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
          dst[i * out.strides[r] + j * out.strides[c]] =
              keep ? src[i * in.strides[r] + j * in.strides[c]] : T{};
        }
      }
    });
  });
}

}  // namespace kiln::cpu
