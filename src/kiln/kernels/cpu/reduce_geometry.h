// The geometry of a reduction: which dims of the input are kept (one output
// element per index) and which are reduced, after dropping size-1 dims and
// merging neighbours that step through memory as one. Kernels walk the kept
// dims to find each output element and the reduced dims as runs along the
// last reduced dim, so a reduction over any dims of any layout is one loop
// nest, and the common layouts become one flat loop.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

using DimMask = uint64_t;  // bit d set: input dim d is reduced
inline bool is_reduced(DimMask mask, int d) {
  return (mask >> d) & 1;
}

struct ReduceGeometry {
  int kept_ndim = 0;
  int64_t kept_shape[kMaxDims] = {};
  int64_t kept_in[kMaxDims] = {};   // input strides, in elements
  int64_t kept_out[kMaxDims] = {};  // output strides, in elements
  int red_ndim = 0;
  int64_t red_shape[kMaxDims] = {};
  int64_t red_in[kMaxDims] = {};
  int64_t num_outputs = 1;
  int64_t reduce_len = 1;  // elements folded into each output
};

// `out` holds the kept dims in input order, either alone or with size-1
// placeholders for the reduced dims (keepdim); only its kept strides are read.
ReduceGeometry make_reduce_geometry(const StridedView& out, const StridedView& in, DimMask mask);

// A row-major multi-index over `ndim` dims that keeps the element offsets of
// N stride sets in step with it.
template <int N>
struct Odometer {
  int ndim;
  const int64_t* shape;
  std::array<const int64_t*, N> strides;
  int64_t index[kMaxDims] = {};
  int64_t offset[N] = {};

  Odometer(int ndim, const int64_t* shape, std::array<const int64_t*, N> strides)
      : ndim(ndim), shape(shape), strides(strides) {}

  void seek(int64_t linear) {
    for (int k = 0; k < N; ++k)
      offset[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      index[d] = linear % shape[d];
      linear /= shape[d];
      for (int k = 0; k < N; ++k)
        offset[k] += index[d] * strides[k][d];
    }
  }

  void next() {
    for (int d = ndim - 1; d >= 0; --d) {
      ++index[d];
      for (int k = 0; k < N; ++k)
        offset[k] += strides[k][d];
      if (index[d] < shape[d]) return;
      for (int k = 0; k < N; ++k)
        offset[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
};

// Calls fn(offset, stride, n) for each run along the last reduced dim that
// overlaps the row-major range [begin, end) of the reduced sub-space. Offsets
// are input elements from the output element's base; runs come in row-major
// order, so a running count gives each element's reduced index.
template <typename Fn>
void for_each_reduced_run(const ReduceGeometry& g, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  if (g.red_ndim == 0) {  // nothing left to reduce: each output sees one element
    fn(int64_t(0), int64_t(1), int64_t(1));
    return;
  }
  const int last = g.red_ndim - 1;
  const int64_t len = g.red_shape[last];
  const int64_t stride = g.red_in[last];
  Odometer<1> outer(last, g.red_shape, {g.red_in});
  outer.seek(begin / len);
  int64_t inner = begin % len;
  for (int64_t pos = begin; pos < end;) {
    int64_t n = std::min(len - inner, end - pos);
    fn(outer.offset[0] + inner * stride, stride, n);
    pos += n;
    inner = 0;
    outer.next();
  }
}

// Splits [0, n) into one contiguous range per thread when `work` (elements
// touched) is large enough to pay for a parallel region; fn(begin, end).
template <typename Fn>
void parallel_ranges(int64_t n, int64_t work, Fn&& fn) {
  if (n <= 1 || work < kParallelGrain) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    int64_t threads = omp_threads_in_region();
    int64_t me = omp_thread_id_in_region();
    int64_t chunk = (n + threads - 1) / threads;
    int64_t begin = std::min(n, chunk * me);
    int64_t end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  }
}

// Calls fn(in_offset, out_offset) once per output element, in parallel over
// outputs when the reduction is large.
template <typename Fn>
void for_each_output(const ReduceGeometry& g, Fn&& fn) {
  if (g.num_outputs == 0) return;
  int64_t work = g.num_outputs * std::max<int64_t>(g.reduce_len, 1);
  parallel_ranges(g.num_outputs, work, [&](int64_t begin, int64_t end) {
    Odometer<2> kept(g.kept_ndim, g.kept_shape, {g.kept_in, g.kept_out});
    kept.seek(begin);
    for (int64_t i = begin; i < end; ++i) {
      fn(kept.offset[0], kept.offset[1]);
      kept.next();
    }
  });
}

}  // namespace kiln::cpu
