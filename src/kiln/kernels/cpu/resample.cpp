// Upsampling kernels. The source indices and weights of each output row and
// column are computed once per call (they depend on one coordinate only);
// the (n, c) planes are independent and run in parallel, forward and
// backward (a plane's gradient only lands in its own input plane).
#include "kiln/kernels/cpu/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

// PyTorch's nearest_idx / nearest_exact_idx, float index math included:
// sizes that are equal or exactly double keep their shortcut (for
// "nearest", as PyTorch keeps it for backward compatibility).
int64_t nearest_source(int64_t dst, int64_t in, int64_t out, double scale, bool exact) {
  if (!exact && out == in) return dst;
  if (!exact && out == 2 * in) return dst >> 1;
  const float s = scale > 0.0 ? float(1.0 / scale) : float(in) / float(out);
  const float src =
      exact ? std::floor(float((double(dst) + 0.5) * double(s))) : std::floor(float(dst) * s);
  return std::min(int64_t(src), in - 1);
}

std::vector<int64_t> nearest_sources(int64_t in, int64_t out, double scale, bool exact) {
  std::vector<int64_t> sources(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i)
    sources[size_t(i)] = nearest_source(i, in, out, scale, exact);
  return sources;
}

// The two inputs output i interpolates between and their weights.
template <typename T>
struct LinearTaps {
  std::vector<int64_t> first, second;
  std::vector<T> first_weight, second_weight;
};

// PyTorch's area_pixel_compute_scale, area_pixel_compute_source_index and
// guard_index_and_lambda, in T (float for float32, as PyTorch's opmath).
// Equal sizes copy, whatever scale the caller gave (PyTorch's shortcut: a
// scale factor of 1.2 on a size of 2 keeps the size and the values).
template <typename T>
LinearTaps<T> linear_taps(int64_t in, int64_t out, bool align_corners, double scale) {
  LinearTaps<T> taps;
  if (in == out) {
    for (int64_t i = 0; i < out; ++i) {
      taps.first.push_back(i);
      taps.second.push_back(i);
      taps.first_weight.push_back(T(1));
      taps.second_weight.push_back(T(0));
    }
    return taps;
  }
  T s;
  if (align_corners) {
    s = out > 1 ? T(in - 1) / T(out - 1) : T(0);
  } else {
    s = scale > 0.0 ? T(1.0 / scale) : T(in) / T(out);
  }
  for (int64_t i = 0; i < out; ++i) {
    T real = align_corners ? s * T(i) : s * (T(i) + T(0.5)) - T(0.5);
    if (!align_corners && real < T(0)) real = T(0);
    const int64_t first = std::min(int64_t(std::floor(real)), in - 1);
    const T lambda = std::min(std::max(real - T(first), T(0)), T(1));
    taps.first.push_back(first);
    taps.second.push_back(first + (first < in - 1 ? 1 : 0));
    taps.first_weight.push_back(T(1) - lambda);
    taps.second_weight.push_back(lambda);
  }
  return taps;
}

// Calls body(in_plane, out_plane) per (n, c) plane, where `in` is the
// strided side and `out` the contiguous one.
template <typename TIn, typename TOut, typename Body>
void for_each_plane(const StridedView& in, const StridedView& out, int64_t work_per_plane,
                    Body body) {
  const int64_t C = in.shape[1], planes = in.shape[0] * C;
  const int64_t out_plane = out.shape[2] * out.shape[3];
  parallel_for(planes, planes * work_per_plane > kParallelGrain, [&](int64_t plane) {
    const int64_t n = plane / C, c = plane % C;
    body(in.ptr<TIn>() + n * in.strides[0] + c * in.strides[1],
         out.ptr<TOut>() + plane * out_plane);
  });
}

template <typename T>
void nearest_forward(const StridedView& out, const StridedView& x, const UpsampleParams& p) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const std::vector<int64_t> rows = nearest_sources(H, OH, p.scales[0], p.exact);
  const std::vector<int64_t> cols = nearest_sources(W, OW, p.scales[1], p.exact);
  const int64_t sh = x.strides[2], sw = x.strides[3];
  for_each_plane<const T, T>(x, out, OH * OW, [&](const T* src, T* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const T* row = src + rows[size_t(oh)] * sh;
      for (int64_t ow = 0; ow < OW; ++ow)
        *dst++ = row[cols[size_t(ow)] * sw];
    }
  });
}

template <typename T>
void nearest_backward(const StridedView& dx, const StridedView& dy, const UpsampleParams& p) {
  fill(dx, Scalar(0.0));
  const int64_t H = dx.shape[2], W = dx.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const std::vector<int64_t> rows = nearest_sources(H, OH, p.scales[0], p.exact);
  const std::vector<int64_t> cols = nearest_sources(W, OW, p.scales[1], p.exact);
  const int64_t gh = dy.strides[2], gw = dy.strides[3];
  for_each_plane<const T, T>(dy, dx, OH * OW, [&](const T* g, T* grad_in) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      T* row = grad_in + rows[size_t(oh)] * W;
      for (int64_t ow = 0; ow < OW; ++ow)
        row[cols[size_t(ow)]] += g[oh * gh + ow * gw];
    }
  });
}

template <typename T>
void bilinear_forward(const StridedView& out, const StridedView& x, const UpsampleParams& p) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const LinearTaps<T> rows = linear_taps<T>(H, OH, p.align_corners, p.scales[0]);
  const LinearTaps<T> cols = linear_taps<T>(W, OW, p.align_corners, p.scales[1]);
  const int64_t sh = x.strides[2], sw = x.strides[3];
  for_each_plane<const T, T>(x, out, 4 * OH * OW, [&](const T* src, T* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const size_t r = size_t(oh);
      const T* top = src + rows.first[r] * sh;
      const T* bottom = src + rows.second[r] * sh;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t c = size_t(ow);
        const int64_t left = cols.first[c] * sw, right = cols.second[c] * sw;
        const T w0 = cols.first_weight[c], w1 = cols.second_weight[c];
        // PyTorch's order: interpolate along w in each row, then along h.
        *dst++ = (top[left] * w0 + top[right] * w1) * rows.first_weight[r] +
                 (bottom[left] * w0 + bottom[right] * w1) * rows.second_weight[r];
      }
    }
  });
}

template <typename T>
void bilinear_backward(const StridedView& dx, const StridedView& dy, const UpsampleParams& p) {
  fill(dx, Scalar(0.0));
  const int64_t H = dx.shape[2], W = dx.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const LinearTaps<T> rows = linear_taps<T>(H, OH, p.align_corners, p.scales[0]);
  const LinearTaps<T> cols = linear_taps<T>(W, OW, p.align_corners, p.scales[1]);
  const int64_t gh = dy.strides[2], gw = dy.strides[3];
  for_each_plane<const T, T>(dy, dx, 4 * OH * OW, [&](const T* g, T* grad_in) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const size_t r = size_t(oh);
      T* top = grad_in + rows.first[r] * W;
      T* bottom = grad_in + rows.second[r] * W;
      const T h0 = rows.first_weight[r], h1 = rows.second_weight[r];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t c = size_t(ow);
        const int64_t left = cols.first[c], right = cols.second[c];
        const T w0 = cols.first_weight[c], w1 = cols.second_weight[c];
        const T value = g[oh * gh + ow * gw];
        top[left] += h0 * w0 * value;
        top[right] += h0 * w1 * value;
        bottom[left] += h1 * w0 * value;
        bottom[right] += h1 * w1 * value;
      }
    }
  });
}

}  // namespace

void upsample_nearest2d(const StridedView& out, const StridedView& x, const UpsampleParams& p) {
  if (out.numel() == 0) return;
  visit_floating(out.dtype, [&](auto t) { nearest_forward<decltype(t)>(out, x, p); });
}

void upsample_bilinear2d(const StridedView& out, const StridedView& x, const UpsampleParams& p) {
  if (out.numel() == 0) return;
  visit_floating(out.dtype, [&](auto t) { bilinear_forward<decltype(t)>(out, x, p); });
}

void upsample_nearest2d_backward(const StridedView& dx, const StridedView& dy,
                                 const UpsampleParams& p) {
  if (dx.numel() == 0) return;
  visit_floating(dx.dtype, [&](auto t) { nearest_backward<decltype(t)>(dx, dy, p); });
}

void upsample_bilinear2d_backward(const StridedView& dx, const StridedView& dy,
                                  const UpsampleParams& p) {
  if (dx.numel() == 0) return;
  visit_floating(dx.dtype, [&](auto t) { bilinear_backward<decltype(t)>(dx, dy, p); });
}

}  // namespace kiln::cpu
