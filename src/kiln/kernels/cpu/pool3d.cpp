#include "kiln/kernels/cpu/pool3d.h"

#include <algorithm>
#include <limits>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

int64_t volume_of(const StridedView& v) {
  return v.shape[2] * v.shape[3] * v.shape[4];
}

int64_t window_volume(const Pool3dParams& p) {
  return p.kernel[0] * p.kernel[1] * p.kernel[2];
}

// Calls body(src, dst) per (n, c) volume: src the input's (strided), dst
// the contiguous output's.
template <typename In, typename Out, typename Body>
void for_each_volume(const StridedView& out, const StridedView& x, int64_t work_per_out,
                     Body body) {
  const int64_t C = out.shape[1], size = volume_of(out);
  parallel_for(out.shape[0] * C, out.numel() * work_per_out > kParallelGrain, [&](int64_t plane) {
    const In* src = x.ptr<In>() + (plane / C) * x.strides[0] + (plane % C) * x.strides[1];
    body(src, out.ptr<Out>() + plane * size);
  });
}

// Calls body(o, out_index) for every output position o of a volume.
template <typename Body>
void for_each_output(const int64_t* out_shape, Body body) {
  int64_t o[3], index = 0;
  for (o[0] = 0; o[0] < out_shape[2]; ++o[0])
    for (o[1] = 0; o[1] < out_shape[3]; ++o[1])
      for (o[2] = 0; o[2] < out_shape[4]; ++o[2])
        body(o, index++);
}

// The input offset (in x's strides) and the dense index in the volume of
// the max of output o's window: NaN wins, ties keep the first, and a window
// of -inf gives its first in-bounds element, as PyTorch. -1: no element.
template <typename T>
struct MaxAt {
  int64_t offset = -1, index = -1;
  T value{};
};

template <typename T>
MaxAt<T> window_max(const T* src, const StridedView& x, const int64_t* o, const Pool3dParams& p) {
  MaxAt<T> best;
  int64_t i[3];
  for (int64_t k0 = 0; k0 < p.kernel[0]; ++k0) {
    i[0] = o[0] * p.stride[0] - p.padding[0] + k0 * p.dilation[0];
    if (i[0] < 0 || i[0] >= x.shape[2]) continue;
    for (int64_t k1 = 0; k1 < p.kernel[1]; ++k1) {
      i[1] = o[1] * p.stride[1] - p.padding[1] + k1 * p.dilation[1];
      if (i[1] < 0 || i[1] >= x.shape[3]) continue;
      for (int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
        i[2] = o[2] * p.stride[2] - p.padding[2] + k2 * p.dilation[2];
        if (i[2] < 0 || i[2] >= x.shape[4]) continue;
        const int64_t offset = i[0] * x.strides[2] + i[1] * x.strides[3] + i[2] * x.strides[4];
        const T v = src[offset];
        if (best.offset < 0 || v > best.value || v != v) {
          best.value = v;
          best.offset = offset;
          best.index = (i[0] * x.shape[3] + i[1]) * x.shape[4] + i[2];
        }
      }
    }
  }
  return best;
}

// One dim of an average window: [lo, hi) clipped to the input, and its
// extent clipped to the padded input (what count_include_pad divides by).
struct Span {
  int64_t lo, hi, padded;
};

Span span_of(int64_t o, int64_t size, const Pool3dParams& p, int d) {
  const int64_t lo = o * p.stride[d] - p.padding[d];
  const int64_t hi = std::min(lo + p.kernel[d], size + p.padding[d]);
  return {std::max<int64_t>(lo, 0), std::min(hi, size), hi - lo};
}

struct AvgWindow {
  Span s[3];
  int64_t count;
};

AvgWindow avg_window(const int64_t* o, const StridedView& x, const Pool3dParams& p) {
  AvgWindow w;
  int64_t padded = 1, inside = 1;
  for (int d = 0; d < 3; ++d) {
    w.s[d] = span_of(o[d], x.shape[2 + d], p, d);
    padded *= w.s[d].padded;
    inside *= std::max<int64_t>(w.s[d].hi - w.s[d].lo, 0);
  }
  w.count = p.count_include_pad ? padded : inside;
  return w;
}

template <typename T>
void max_pool_typed(const StridedView& out, const StridedView& x, const Pool3dParams& p) {
  for_each_volume<const T, T>(out, x, window_volume(p), [&](const T* src, T* dst) {
    for_each_output(out.shape, [&](const int64_t* o, int64_t index) {
      MaxAt<T> best = window_max(src, x, o, p);
      dst[index] = best.offset >= 0                       ? best.value
                   : std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::lowest();
    });
  });
}

template <typename T>
void avg_pool_typed(const StridedView& out, const StridedView& x, const Pool3dParams& p) {
  for_each_volume<const T, T>(out, x, window_volume(p), [&](const T* src, T* dst) {
    for_each_output(out.shape, [&](const int64_t* o, int64_t index) {
      const AvgWindow w = avg_window(o, x, p);
      T sum = 0;
      for (int64_t i0 = w.s[0].lo; i0 < w.s[0].hi; ++i0)
        for (int64_t i1 = w.s[1].lo; i1 < w.s[1].hi; ++i1)
          for (int64_t i2 = w.s[2].lo; i2 < w.s[2].hi; ++i2)
            sum += src[i0 * x.strides[2] + i1 * x.strides[3] + i2 * x.strides[4]];
      dst[index] = sum / T(w.count);
    });
  });
}

// Backward: per (n, c) volume of dx (contiguous), from dy's and x's.
template <typename T, typename Body>
void for_each_grad_volume(const StridedView& dx, const StridedView& dy, const StridedView& x,
                          int64_t work_per_out, Body body) {
  fill(dx, Scalar(0.0));
  const int64_t C = dx.shape[1], size = volume_of(dx);
  parallel_for(dx.shape[0] * C, dy.numel() * work_per_out > kParallelGrain, [&](int64_t plane) {
    const int64_t n = plane / C, c = plane % C;
    const T* g = dy.ptr<const T>() + n * dy.strides[0] + c * dy.strides[1];
    const T* src = x.data ? x.ptr<const T>() + n * x.strides[0] + c * x.strides[1] : nullptr;
    body(g, src, dx.ptr<T>() + plane * size);
  });
}

int64_t grad_offset(const StridedView& dy, const int64_t* o) {
  return o[0] * dy.strides[2] + o[1] * dy.strides[3] + o[2] * dy.strides[4];
}

template <typename T>
void max_pool_backward_typed(const StridedView& dx, const StridedView& dy, const StridedView& x,
                             const Pool3dParams& p) {
  for_each_grad_volume<T>(dx, dy, x, window_volume(p), [&](const T* g, const T* src, T* out) {
    for_each_output(dy.shape, [&](const int64_t* o, int64_t) {
      MaxAt<T> best = window_max(src, x, o, p);
      if (best.index >= 0) out[best.index] += g[grad_offset(dy, o)];
    });
  });
}

template <typename T>
void avg_pool_backward_typed(const StridedView& dx, const StridedView& dy, const Pool3dParams& p) {
  const int64_t H = dx.shape[3], W = dx.shape[4];
  for_each_grad_volume<T>(dx, dy, StridedView{}, window_volume(p),
                          [&](const T* g, const T*, T* out) {
                            for_each_output(dy.shape, [&](const int64_t* o, int64_t) {
                              const AvgWindow w = avg_window(o, dx, p);
                              const T share = g[grad_offset(dy, o)] / T(w.count);
                              for (int64_t i0 = w.s[0].lo; i0 < w.s[0].hi; ++i0)
                                for (int64_t i1 = w.s[1].lo; i1 < w.s[1].hi; ++i1)
                                  for (int64_t i2 = w.s[2].lo; i2 < w.s[2].hi; ++i2)
                                    out[(i0 * H + i1) * W + i2] += share;
                            });
                          });
}

}  // namespace

void max_pool3d(const StridedView& out, const StridedView& x, const Pool3dParams& p) {
  if (out.numel() == 0) return;
  visit_numeric(out.dtype, [&](auto t) { max_pool_typed<decltype(t)>(out, x, p); });
}

void avg_pool3d(const StridedView& out, const StridedView& x, const Pool3dParams& p) {
  if (out.numel() == 0) return;
  visit_floating(out.dtype, [&](auto t) { avg_pool_typed<decltype(t)>(out, x, p); });
}

void max_pool3d_backward(const StridedView& dx, const StridedView& dy, const StridedView& x,
                         const Pool3dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { max_pool_backward_typed<decltype(t)>(dx, dy, x, p); });
}

void avg_pool3d_backward(const StridedView& dx, const StridedView& dy, const Pool3dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { avg_pool_backward_typed<decltype(t)>(dx, dy, p); });
}

}  // namespace kiln::cpu
