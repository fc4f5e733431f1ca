// grid_sample's kernel: per output point, the grid's (x, y) unnormalized to
// pixel coordinates, padded (clipped or reflected) and interpolated from
// the 1, 4 or 16 pixels around it. The formulas are PyTorch's
// (aten/src/ATen/native/GridSampler.h), in the input's precision, so
// results agree with F.grid_sample to its rounding.
#include "kiln/kernels/cpu/grid_sample.h"

#include <cmath>
#include <cstdint>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// A coordinate that is not finite, or too far out to be a pixel, reads as
// one far outside (what PyTorch does before it casts to an integer).
template <typename T>
T safe(T coord) {
  constexpr T kFar = T(1 << 30);
  if (!std::isfinite(coord) || coord > kFar || coord < -kFar) return T(-100);
  return coord;
}

template <typename T>
T unnormalize(T coord, int64_t size, bool align_corners) {
  if (align_corners) return (coord + 1) / 2 * T(size - 1);
  return ((coord + 1) * T(size) - 1) / 2;
}

template <typename T>
T clip(T coord, int64_t size) {
  return std::min(T(size - 1), std::max(coord, T(0)));
}

// `coord` reflected at twice_low / 2 and twice_high / 2 until it lies
// between them.
template <typename T>
T reflect(T coord, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return T(0);
  const T low = T(twice_low) / 2, span = T(twice_high - twice_low) / 2;
  coord = std::fabs(coord - low);
  const T extra = std::fmod(coord, span);
  const int64_t flips = int64_t(std::floor(coord / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

template <typename T>
T pad(T coord, int64_t size, const GridSampleParams& p) {
  if (p.padding == GridSamplePadding::Border) return clip(coord, size);
  if (p.padding == GridSamplePadding::Reflection) {
    coord = p.align_corners ? reflect(coord, 0, 2 * (size - 1)) : reflect(coord, -1, 2 * size - 1);
    return clip(coord, size);
  }
  return coord;
}

// One [H, W] plane of x, read with zeros outside it.
template <typename T>
struct Plane {
  const T* data;
  int64_t h, w, stride_h, stride_w;

  T at(int64_t y, int64_t x) const {
    if (y < 0 || y >= h || x < 0 || x >= w) return T(0);
    return data[y * stride_h + x * stride_w];
  }
  // Bicubic's taps are padded one by one.
  T padded(T y, T x, const GridSampleParams& p) const {
    return at(int64_t(safe(pad(y, h, p))), int64_t(safe(pad(x, w, p))));
  }
};

template <typename T>
T bilinear(const Plane<T>& in, T y, T x) {
  const T y0 = std::floor(y), x0 = std::floor(x);
  const T dy = y - y0, dx = x - x0;
  const int64_t iy = int64_t(y0), ix = int64_t(x0);
  return in.at(iy, ix) * (1 - dx) * (1 - dy) + in.at(iy, ix + 1) * dx * (1 - dy) +
         in.at(iy + 1, ix) * (1 - dx) * dy + in.at(iy + 1, ix + 1) * dx * dy;
}

// Keys' cubic convolution with A = -0.75 (PyTorch's and ONNX's).
template <typename T>
T cubic(T v0, T v1, T v2, T v3, T t) {
  constexpr T A = T(-0.75);
  auto near = [](T d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [](T d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  return v0 * far(t + 1) + v1 * near(t) + v2 * near(1 - t) + v3 * far(2 - t);
}

template <typename T>
T bicubic(const Plane<T>& in, T y, T x, const GridSampleParams& p) {
  const T y0 = std::floor(y), x0 = std::floor(x);
  T rows[4];
  for (int i = 0; i < 4; ++i) {
    const T row = y0 - 1 + T(i);
    rows[i] = cubic(in.padded(row, x0 - 1, p), in.padded(row, x0, p), in.padded(row, x0 + 1, p),
                    in.padded(row, x0 + 2, p), x - x0);
  }
  return cubic(rows[0], rows[1], rows[2], rows[3], y - y0);
}

template <typename T>
void sample(const StridedView& out, const StridedView& x, const StridedView& grid,
            const GridSampleParams& p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = grid.shape[1], OW = grid.shape[2];
  const T* in = x.ptr<const T>();
  const T* g = grid.ptr<const T>();
  T* o = out.ptr<T>();
  parallel_for(N * OH, N * OH * OW * C > 4096, [&](int64_t row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const T* point = g + n * grid.strides[0] + oh * grid.strides[1] + ow * grid.strides[2];
      T gx = unnormalize(point[0], W, p.align_corners);
      T gy = unnormalize(point[grid.strides[3]], H, p.align_corners);
      if (p.mode != GridSampleMode::Bicubic) {
        gx = safe(pad(gx, W, p));
        gy = safe(pad(gy, H, p));
      }
      for (int64_t c = 0; c < C; ++c) {
        const Plane<T> plane{in + n * x.strides[0] + c * x.strides[1], H, W, x.strides[2],
                             x.strides[3]};
        T value;
        if (p.mode == GridSampleMode::Nearest) {
          value = plane.at(int64_t(std::nearbyint(gy)), int64_t(std::nearbyint(gx)));
        } else if (p.mode == GridSampleMode::Bilinear) {
          value = bilinear(plane, gy, gx);
        } else {
          value = bicubic(plane, safe(gy), safe(gx), p);
        }
        o[((n * C + c) * OH + oh) * OW + ow] = value;
      }
    }
  });
}

}  // namespace

void grid_sample2d(const StridedView& out, const StridedView& x, const StridedView& grid,
                   const GridSampleParams& p) {
  KILN_ASSERT(x.ndim == 4 && grid.ndim == 4 && out.ndim == 4 && out.is_contiguous(),
              "grid_sample2d: expects 4-D views and a contiguous output");
  if (x.dtype == DType::Float64) return sample<double>(out, x, grid, p);
  sample<float>(out, x, grid, p);
}

}  // namespace kiln::cpu
