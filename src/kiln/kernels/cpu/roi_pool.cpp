// The bins are computed as Caffe computes them (and ONNX Runtime and
// torchvision after it), in the input's precision: bin sizes are
// roi_size / pooled_size, a bin spans [floor(i * size), ceil((i + 1) * size))
// from the roi's start, clipped to the input. Bins of neighbouring outputs
// overlap by a pixel where the size is not whole.
#include "kiln/kernels/cpu/roi_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// One roi's window in whole pixels: its image, first row and column, size.
struct RoiWindow {
  int64_t batch, start_h, start_w, height, width;
};

template <typename T>
T roi_value(const StridedView& rois, int64_t r, int64_t k) {
  return rois.ptr<T>()[r * rois.strides[0] + k * rois.strides[1]];
}

// C's round(): half away from zero, as Caffe and ONNX Runtime round.
template <typename T>
int64_t rounded(T coordinate, T scale, int64_t r) {
  const T scaled = coordinate * scale;
  KILN_CHECK(std::isfinite(scaled) && std::fabs(scaled) < T(1 << 30), "max_roi_pool: roi ", r,
             " has a coordinate that is not finite or too large (", double(coordinate), ")");
  return int64_t(std::round(scaled));
}

template <typename T>
RoiWindow window_of(const StridedView& rois, int64_t r, int64_t batch_size, T scale) {
  const T batch = roi_value<T>(rois, r, 0);
  KILN_CHECK(std::isfinite(batch) && batch >= 0 && batch < T(batch_size), "max_roi_pool: roi ", r,
             " names batch index ", double(batch), ", outside the input's ", batch_size, " images");
  RoiWindow w;
  w.batch = int64_t(batch);  // truncated, as ONNX Runtime casts it
  w.start_w = rounded(roi_value<T>(rois, r, 1), scale, r);
  w.start_h = rounded(roi_value<T>(rois, r, 2), scale, r);
  const int64_t end_w = rounded(roi_value<T>(rois, r, 3), scale, r);
  const int64_t end_h = rounded(roi_value<T>(rois, r, 4), scale, r);
  // A malformed roi (end before start) is taken as one pixel.
  w.height = std::max<int64_t>(end_h - w.start_h + 1, 1);
  w.width = std::max<int64_t>(end_w - w.start_w + 1, 1);
  return w;
}

template <typename T>
std::vector<RoiWindow> windows_of(const StridedView& rois, int64_t batch_size, double scale) {
  std::vector<RoiWindow> windows;
  for (int64_t r = 0; r < rois.shape[0]; ++r)
    windows.push_back(window_of<T>(rois, r, batch_size, T(scale)));
  return windows;
}

// [begin, end) of bin `i` of `bins` over `size` pixels from `start`,
// clipped to [0, limit).
template <typename T>
std::pair<int64_t, int64_t> bin_range(int64_t i, int64_t bins, int64_t size, int64_t start,
                                      int64_t limit) {
  const T bin_size = T(size) / T(bins);
  const int64_t begin = int64_t(std::floor(T(i) * bin_size)) + start;
  const int64_t end = int64_t(std::ceil(T(i + 1) * bin_size)) + start;
  return {std::clamp<int64_t>(begin, 0, limit), std::clamp<int64_t>(end, 0, limit)};
}

// Where the maximum of bin (ph, pw) of one [H, W] plane of x lies, as
// h * W + w, or -1 for an empty bin. The first maximum in row-major order
// wins ties (torchvision's argmax); a NaN wins over numbers, as in max.
template <typename T>
int64_t argmax_of_bin(const T* plane, const StridedView& x, const RoiWindow& w, int64_t ph,
                      int64_t pw, const RoiPoolParams& p) {
  const int64_t height = x.shape[2], width = x.shape[3];
  const auto [h0, h1] = bin_range<T>(ph, p.pooled_h, w.height, w.start_h, height);
  const auto [w0, w1] = bin_range<T>(pw, p.pooled_w, w.width, w.start_w, width);
  int64_t best = -1;
  T best_value = T(0);
  for (int64_t h = h0; h < h1; ++h) {
    for (int64_t c = w0; c < w1; ++c) {
      const T value = plane[h * x.strides[2] + c * x.strides[3]];
      if (best >= 0 && !(value > best_value) && !(std::isnan(value) && !std::isnan(best_value)))
        continue;
      best = h * width + c;
      best_value = value;
    }
  }
  return best;
}

template <typename T>
void forward(const StridedView& out, const StridedView& x, const StridedView& rois,
             const RoiPoolParams& p) {
  const int64_t channels = x.shape[1], width = x.shape[3], bins = p.pooled_h * p.pooled_w;
  const std::vector<RoiWindow> windows = windows_of<T>(rois, x.shape[0], p.spatial_scale);
  const int64_t planes = int64_t(windows.size()) * channels;
  parallel_for(planes, planes * bins > 4096, [&](int64_t rc) {
    const RoiWindow& w = windows[size_t(rc / channels)];
    const T* plane = x.ptr<T>() + w.batch * x.strides[0] + (rc % channels) * x.strides[1];
    T* dst = out.ptr<T>() + rc * bins;
    for (int64_t ph = 0; ph < p.pooled_h; ++ph) {
      for (int64_t pw = 0; pw < p.pooled_w; ++pw) {
        const int64_t at = argmax_of_bin(plane, x, w, ph, pw, p);
        dst[ph * p.pooled_w + pw] =
            at < 0 ? T(0) : plane[(at / width) * x.strides[2] + (at % width) * x.strides[3]];
      }
    }
  });
}

// A thread owns a channel, so no two threads add into one pixel.
template <typename T>
void backward(const StridedView& grad_x, const StridedView& grad_out, const StridedView& x,
              const StridedView& rois, const RoiPoolParams& p) {
  const int64_t channels = x.shape[1], plane_size = x.shape[2] * x.shape[3];
  std::fill_n(grad_x.ptr<T>(), grad_x.numel(), T(0));
  const std::vector<RoiWindow> windows = windows_of<T>(rois, x.shape[0], p.spatial_scale);
  const int64_t work = int64_t(windows.size()) * channels * p.pooled_h * p.pooled_w;
  parallel_for(channels, work > 4096, [&](int64_t c) {
    for (size_t r = 0; r < windows.size(); ++r) {
      const RoiWindow& w = windows[r];
      const T* plane = x.ptr<T>() + w.batch * x.strides[0] + c * x.strides[1];
      T* grad_plane = grad_x.ptr<T>() + (w.batch * channels + c) * plane_size;
      const T* g = grad_out.ptr<T>() + int64_t(r) * grad_out.strides[0] + c * grad_out.strides[1];
      for (int64_t ph = 0; ph < p.pooled_h; ++ph) {
        for (int64_t pw = 0; pw < p.pooled_w; ++pw) {
          const int64_t at = argmax_of_bin(plane, x, w, ph, pw, p);
          if (at >= 0) grad_plane[at] += g[ph * grad_out.strides[2] + pw * grad_out.strides[3]];
        }
      }
    }
  });
}

}  // namespace

void max_roi_pool(const StridedView& out, const StridedView& x, const StridedView& rois,
                  const RoiPoolParams& p) {
  KILN_CHECK(x.ndim == 4 && rois.ndim == 2 && out.is_contiguous(),
             "max_roi_pool: kernel expects x [N, C, H, W], rois [R, 5] and a contiguous output");
  if (out.numel() == 0) return;
  if (x.dtype == DType::Float64) return forward<double>(out, x, rois, p);
  forward<float>(out, x, rois, p);
}

void max_roi_pool_backward(const StridedView& grad_x, const StridedView& grad_out,
                           const StridedView& x, const StridedView& rois, const RoiPoolParams& p) {
  KILN_CHECK(x.ndim == 4 && rois.ndim == 2 && grad_x.is_contiguous(),
             "max_roi_pool_backward: kernel expects x [N, C, H, W], rois [R, 5] and a "
             "contiguous gradient");
  if (grad_x.numel() == 0) return;
  if (x.dtype == DType::Float64) return backward<double>(grad_x, grad_out, x, rois, p);
  backward<float>(grad_x, grad_out, x, rois, p);
}

}  // namespace kiln::cpu
