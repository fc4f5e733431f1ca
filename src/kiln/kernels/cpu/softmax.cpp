#include "kiln/kernels/cpu/softmax.h"

#include <cmath>
#include <limits>

#include "kiln/kernels/cpu/reduce_geometry.h"

namespace kiln::cpu {
namespace {

// One row: n elements, `in_stride` and `out_stride` apart. A NaN anywhere
// makes the max NaN and so the whole row NaN, as in PyTorch.
template <typename T>
void softmax_row(T* y, const T* x, int64_t n, int64_t in_stride, int64_t out_stride, bool log) {
  T row_max = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i * in_stride];
    if (v > row_max || std::isnan(v)) row_max = v;
    if (std::isnan(row_max)) break;
  }
  double total = 0.0;
  if (log) {
    for (int64_t i = 0; i < n; ++i) {
      total += double(std::exp(x[i * in_stride] - row_max));
    }
    // (x - max) first: it is exact near the max, where folding max and
    // log(total) into one shift would round away the small result.
    const T log_total = T(std::log(total));
    for (int64_t i = 0; i < n; ++i) {
      y[i * out_stride] = (x[i * in_stride] - row_max) - log_total;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::exp(x[i * in_stride] - row_max);
    y[i * out_stride] = e;
    total += double(e);
  }
  const T scale = T(1.0 / total);
  for (int64_t i = 0; i < n; ++i)
    y[i * out_stride] *= scale;
}

}  // namespace

void softmax(const StridedView& out, const StridedView& in, int dim, bool log) {
  // A row is a reduction over `dim` whose result is written back along it, so
  // the reduction geometry finds the rows; its "output" is `out` itself.
  const DimMask mask = in.ndim == 0 ? 0 : DimMask(1) << dim;
  const ReduceGeometry g = make_reduce_geometry(out, in, mask);
  const int64_t n = g.reduce_len;
  const int64_t in_stride = g.red_ndim == 0 ? 1 : g.red_in[0];
  const int64_t out_stride = in.ndim == 0 ? 1 : out.strides[dim];
  if (n == 0) return;
  visit_floating(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.ptr<const T>();
    T* dst = out.ptr<T>();
    for_each_output(g, [&](int64_t in_offset, int64_t out_offset) {
      softmax_row(dst + out_offset, src + in_offset, n, in_stride, out_stride, log);
    });
  });
}

}  // namespace kiln::cpu
