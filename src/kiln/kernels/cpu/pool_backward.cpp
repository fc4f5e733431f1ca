// Backward of the 2-D pooling ops: each output's gradient goes back to the
// input elements its window read. Plain loops over (n, c) planes (each
// writes only its own plane, so planes run in parallel); float32 and float64.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/pool.h"

namespace kiln::cpu {
namespace {

// Calls body(dy_plane, x_plane, dx_plane) per (n, c) plane; dx is contiguous.
template <typename T, typename Body>
void for_each_plane(const StridedView& dx, const StridedView& dy, const StridedView& x,
                    int64_t work_per_out, Body body) {
  fill(dx, Scalar(0.0));
  const int64_t C = dx.shape[1], planes = dx.shape[0] * C;
  const int64_t plane_size = dx.shape[2] * dx.shape[3];
  const bool work_is_large = dy.numel() * work_per_out > kParallelGrain;
  parallel_for(planes, work_is_large, [&](int64_t plane) {
    const int64_t n = plane / C, c = plane % C;
    const T* g = dy.ptr<const T>() + n * dy.strides[0] + c * dy.strides[1];
    const T* src = x.data ? x.ptr<const T>() + n * x.strides[0] + c * x.strides[1] : nullptr;
    body(g, src, dx.ptr<T>() + plane * plane_size);
  });
}

// The forward's max (NaN wins, ties keep the first) is found again, and the
// gradient goes to that element only. A window of -inf sends it to its first
// in-bounds element, as PyTorch does.
template <typename T>
void max_pool_backward_typed(const StridedView& dx, const StridedView& dy, const StridedView& x,
                             const Pool2dParams& p) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const int64_t sh = x.strides[2], sw = x.strides[3], gh = dy.strides[2], gw = dy.strides[3];
  for_each_plane<T>(dx, dy, x, p.kernel[0] * p.kernel[1], [&](const T* g, const T* src, T* out) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t best_at = -1;
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (iw < 0 || iw >= W) continue;
            const T v = src[ih * sh + iw * sw];
            if (best_at < 0 || v > best || v != v) {
              best = v;
              best_at = ih * W + iw;
            }
          }
        }
        if (best_at >= 0) out[best_at] += g[oh * gh + ow * gw];
      }
    }
  });
}

// Each window element gets the output's gradient divided by the forward's
// divisor (avg_pool_window, shared with the forward).
template <typename T>
void avg_pool_backward_typed(const StridedView& dx, const StridedView& dy, const Pool2dParams& p) {
  const int64_t H = dx.shape[2], W = dx.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const int64_t gh = dy.strides[2], gw = dy.strides[3];
  StridedView none;
  for_each_plane<T>(dx, dy, none, p.kernel[0] * p.kernel[1], [&](const T* g, const T*, T* out) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow win = avg_pool_window(oh, ow, H, W, p);
        const T share = g[oh * gh + ow * gw] / T(win.count);
        for (int64_t ih = win.h0; ih < win.h1; ++ih) {
          for (int64_t iw = win.w0; iw < win.w1; ++iw)
            out[ih * W + iw] += share;
        }
      }
    }
  });
}

// Window i covers [floor(i * H / OH), ceil((i + 1) * H / OH)), as in the forward.
template <typename T>
void adaptive_avg_backward_typed(const StridedView& dx, const StridedView& dy) {
  const int64_t H = dx.shape[2], W = dx.shape[3], OH = dy.shape[2], OW = dy.shape[3];
  const int64_t gh = dy.strides[2], gw = dy.strides[3];
  const int64_t window =
      ((H + OH - 1) / std::max<int64_t>(OH, 1) + 1) * ((W + OW - 1) / std::max<int64_t>(OW, 1) + 1);
  StridedView none;
  for_each_plane<T>(dx, dy, none, window, [&](const T* g, const T*, T* out) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        const T share = g[oh * gh + ow * gw] / T((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw)
            out[ih * W + iw] += share;
        }
      }
    }
  });
}

}  // namespace

void max_pool2d_backward(const StridedView& dx, const StridedView& dy, const StridedView& x,
                         const Pool2dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { max_pool_backward_typed<decltype(t)>(dx, dy, x, p); });
}

void avg_pool2d_backward(const StridedView& dx, const StridedView& dy, const Pool2dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { avg_pool_backward_typed<decltype(t)>(dx, dy, p); });
}

void adaptive_avg_pool2d_backward(const StridedView& dx, const StridedView& dy) {
  visit_floating(dx.dtype, [&](auto t) { adaptive_avg_backward_typed<decltype(t)>(dx, dy); });
}

}  // namespace kiln::cpu
