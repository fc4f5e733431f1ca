// The sampling follows torchvision's CPU kernels (and ONNX Runtime's, which
// agree): a point at or beyond one pixel outside the input reads 0, and the
// four neighbours of any other point are weighted bilinearly, each one that
// lies outside reading 0. The backward differentiates that same function:
// d/dy and d/dx of the bilinear weights for the offsets, the sampled value
// for the mask, and the weights scattered back for x.
#include "kiln/kernels/cpu/deform_conv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/matmul.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kSplitWork = 1 << 14;  // below this, one thread
// Sampling points are worked out once per chunk of positions of a (group,
// tap) and applied to every channel of the group: the channels share them.
constexpr int64_t kChunk = 128;
// Channels per task of the input gradient's scatter (a task owns their planes).
constexpr int64_t kScatterChannels = 8;

// One point's four neighbours: their offsets into a contiguous [H, W] plane
// (`at`, where the input gradient goes) and into x's strided plane (`read`),
// their bilinear weights, zero for a neighbour outside, and the fractional
// parts the derivatives need.
template <typename T>
struct Corners {
  int64_t at[4] = {0, 0, 0, 0};
  int64_t read[4] = {0, 0, 0, 0};
  T weight[4] = {0, 0, 0, 0};
  bool valid[4] = {false, false, false, false};
  T frac_y = 0, frac_x = 0;
  bool inside = false;     // false: the point reads 0 and has no gradient
  bool all_valid = false;  // every neighbour inside: the common case, read without checks
};

template <typename T>
Corners<T> corners_of(T y, T x, const StridedView& image) {
  const int64_t height = image.shape[2], width = image.shape[3];
  Corners<T> c;
  if (!(y > T(-1) && y < T(height) && x > T(-1) && x < T(width))) return c;  // NaN too
  c.inside = true;
  const T y_floor = std::floor(y), x_floor = std::floor(x);
  const int64_t y0 = int64_t(y_floor), x0 = int64_t(x_floor);
  c.frac_y = y - y_floor;
  c.frac_x = x - x_floor;
  const T keep_y = T(1) - c.frac_y, keep_x = T(1) - c.frac_x;
  const T weights[4] = {keep_y * keep_x, keep_y * c.frac_x, c.frac_y * keep_x, c.frac_y * c.frac_x};
  for (int q = 0; q < 4; ++q) {
    const int64_t h = y0 + q / 2, w = x0 + q % 2;
    c.valid[q] = h >= 0 && h < height && w >= 0 && w < width;
    if (!c.valid[q]) continue;
    c.at[q] = h * width + w;
    c.read[q] = h * image.strides[2] + w * image.strides[3];
    c.weight[q] = weights[q];
  }
  c.all_valid = c.valid[0] && c.valid[1] && c.valid[2] && c.valid[3];
  return c;
}

// The four neighbours' values (0 outside) in x's plane.
template <typename T>
void neighbour_values(const Corners<T>& c, const T* plane, T* values) {
  for (int q = 0; q < 4; ++q)
    values[q] = c.valid[q] ? plane[c.read[q]] : T(0);
}

template <typename T>
T interpolate(const Corners<T>& c, const T* plane) {
  if (c.all_valid) {
    return c.weight[0] * plane[c.read[0]] + c.weight[1] * plane[c.read[1]] +
           c.weight[2] * plane[c.read[2]] + c.weight[3] * plane[c.read[3]];
  }
  if (!c.inside) return T(0);
  T v[4];
  neighbour_values(c, plane, v);
  return c.weight[0] * v[0] + c.weight[1] * v[1] + c.weight[2] * v[2] + c.weight[3] * v[3];
}

// The sampling positions of a batch, shared by forward and backward.
template <typename T>
struct Taps {
  const StridedView &x, &offset, &mask;
  const DeformGeometry& g;
  int64_t out_w, taps;  // taps = kh * kw

  int64_t positions() const { return offset.shape[2] * out_w; }
  int64_t per_group() const { return x.shape[1] / g.offset_groups; }
  T offset_at(int64_t n, int64_t channel, int64_t l) const {
    return offset.ptr<T>()[n * offset.strides[0] + channel * offset.strides[1] +
                           (l / out_w) * offset.strides[2] + (l % out_w) * offset.strides[3]];
  }
  T mask_at(int64_t n, int64_t group, int64_t k, int64_t l) const {
    if (!mask.data) return T(1);
    return mask.ptr<T>()[n * mask.strides[0] + (group * taps + k) * mask.strides[1] +
                         (l / out_w) * mask.strides[2] + (l % out_w) * mask.strides[3]];
  }
  // Tap k of offset group `group` at output position l.
  Corners<T> corners(int64_t n, int64_t group, int64_t k, int64_t l) const {
    const int64_t i = k / g.kernel_w, j = k % g.kernel_w;
    const int64_t base_y = (l / out_w) * g.stride_h - g.pad_h + i * g.dilation_h;
    const int64_t base_x = (l % out_w) * g.stride_w - g.pad_w + j * g.dilation_w;
    const int64_t channel = (group * taps + k) * 2;
    const T y = T(base_y) + offset_at(n, channel, l);
    const T x_pos = T(base_x) + offset_at(n, channel + 1, l);
    return corners_of(y, x_pos, x);
  }
  const T* plane(int64_t n, int64_t c) const {
    return x.ptr<T>() + n * x.strides[0] + c * x.strides[1];
  }
};

// Positions [begin, end) of tap k of a group: their corners and masks.
template <typename T>
struct Chunk {
  Corners<T> corners[kChunk];
  T mask[kChunk];
  int64_t begin = 0, end = 0;

  void fill(const Taps<T>& t, int64_t n, int64_t group, int64_t k, int64_t from) {
    begin = from;
    end = std::min(from + kChunk, t.positions());
    for (int64_t l = begin; l < end; ++l) {
      corners[l - begin] = t.corners(n, group, k, l);
      mask[l - begin] = t.mask_at(n, group, k, l);
    }
  }
};

// Row c * taps + k of image n's columns [C * taps, L] for every channel c of
// `group`.
template <typename T>
void im2col_tap(const Taps<T>& t, int64_t n, int64_t group, int64_t k, T* columns) {
  const int64_t positions = t.positions(), per_group = t.per_group();
  Chunk<T> chunk;
  for (int64_t from = 0; from < positions; from += kChunk) {
    chunk.fill(t, n, group, k, from);
    for (int64_t c = group * per_group; c < (group + 1) * per_group; ++c) {
      const T* plane = t.plane(n, c);
      T* row = columns + (c * t.taps + k) * positions;
      for (int64_t l = chunk.begin; l < chunk.end; ++l)
        row[l] = interpolate(chunk.corners[l - chunk.begin], plane) * chunk.mask[l - chunk.begin];
    }
  }
}

// Image n's columns, a task per (group, tap).
template <typename T>
void im2col_image(const Taps<T>& t, int64_t n, T* columns) {
  const int64_t tasks = t.g.offset_groups * t.taps;
  parallel_for(tasks, t.x.shape[1] * t.taps * t.positions() > kSplitWork,
               [&](int64_t task) { im2col_tap(t, n, task / t.taps, task % t.taps, columns); });
}

template <typename T>
void im2col_all(const StridedView& columns, const Taps<T>& t) {
  const int64_t rows = t.x.shape[1] * t.taps, positions = t.positions();
  const int64_t tasks = t.x.shape[0] * t.g.offset_groups * t.taps;
  parallel_for(tasks, t.x.shape[0] * rows * positions > kSplitWork, [&](int64_t task) {
    const int64_t n = task / (t.g.offset_groups * t.taps),
                  rest = task % (t.g.offset_groups * t.taps);
    im2col_tap(t, n, rest / t.taps, rest % t.taps, columns.ptr<T>() + n * rows * positions);
  });
}

// grad_offset and grad_mask rows of (image, offset group, tap): a sum over
// the group's channels, so one task per row writes it alone.
template <typename T>
void coordinate_grads(const StridedView& grad_offset, const StridedView& grad_mask,
                      const StridedView& grad_columns, const Taps<T>& t) {
  const int64_t batch = t.x.shape[0], channels = t.x.shape[1], groups = t.g.offset_groups;
  const int64_t per_group = t.per_group(), positions = t.positions();
  const int64_t tasks = batch * groups * t.taps;
  parallel_for(tasks, tasks * per_group * positions > kSplitWork, [&](int64_t task) {
    const int64_t n = task / (groups * t.taps), group = (task / t.taps) % groups;
    const int64_t k = task % t.taps;
    T* grad_y = grad_offset.ptr<T>() + (n * groups * t.taps + group * t.taps + k) * 2 * positions;
    T* grad_x = grad_y + positions;
    T* grad_m = grad_mask.data
                    ? grad_mask.ptr<T>() + (n * groups * t.taps + group * t.taps + k) * positions
                    : nullptr;
    for (int64_t l = 0; l < positions; ++l) {
      const Corners<T> c = t.corners(n, group, k, l);
      if (!c.inside) continue;
      const T m = t.mask_at(n, group, k, l);
      const T keep_y = T(1) - c.frac_y, keep_x = T(1) - c.frac_x;
      T dy = 0, dx = 0, dm = 0;
      for (int64_t ch = group * per_group; ch < (group + 1) * per_group; ++ch) {
        const T g =
            grad_columns.ptr<T>()[(n * channels + ch) * t.taps * positions + k * positions + l];
        T v[4];
        neighbour_values(c, t.plane(n, ch), v);
        dy += g * (keep_x * (v[2] - v[0]) + c.frac_x * (v[3] - v[1]));
        dx += g * (keep_y * (v[1] - v[0]) + c.frac_y * (v[3] - v[2]));
        dm +=
            g * (c.weight[0] * v[0] + c.weight[1] * v[1] + c.weight[2] * v[2] + c.weight[3] * v[3]);
      }
      grad_y[l] = dy * m;
      grad_x[l] = dx * m;
      if (grad_m) grad_m[l] = dm;
    }
  });
}

// grad_x: each sample's gradient scattered to its four neighbours. A task
// owns the planes of a few channels of one group of one image, and works
// out each chunk of sampling points once for them.
template <typename T>
void input_grads(const StridedView& grad_x, const StridedView& grad_columns, const Taps<T>& t) {
  const int64_t channels = t.x.shape[1], positions = t.positions(), per_group = t.per_group();
  const int64_t plane_size = t.x.shape[2] * t.x.shape[3];
  const int64_t pieces = (per_group + kScatterChannels - 1) / kScatterChannels;
  const int64_t tasks = t.x.shape[0] * t.g.offset_groups * pieces;
  const bool split = t.x.shape[0] * channels * t.taps * positions > kSplitWork;
  parallel_for(tasks, split, [&](int64_t task) {
    const int64_t n = task / (t.g.offset_groups * pieces);
    const int64_t group = (task / pieces) % t.g.offset_groups, piece = task % pieces;
    const int64_t first = group * per_group + piece * kScatterChannels;
    const int64_t last = std::min(first + kScatterChannels, (group + 1) * per_group);
    Chunk<T> chunk;
    for (int64_t k = 0; k < t.taps; ++k) {
      for (int64_t from = 0; from < positions; from += kChunk) {
        chunk.fill(t, n, group, k, from);
        for (int64_t ch = first; ch < last; ++ch) {
          T* plane = grad_x.ptr<T>() + (n * channels + ch) * plane_size;
          const T* row = grad_columns.ptr<T>() + ((n * channels + ch) * t.taps + k) * positions;
          for (int64_t l = chunk.begin; l < chunk.end; ++l) {
            const Corners<T>& c = chunk.corners[l - chunk.begin];
            if (!c.inside) continue;
            const T g = row[l] * chunk.mask[l - chunk.begin];
            for (int q = 0; q < 4; ++q)
              if (c.valid[q]) plane[c.at[q]] += g * c.weight[q];
          }
        }
      }
    }
  });
}

StridedView contiguous_view(void* data, DType dtype, std::initializer_list<int64_t> shape) {
  StridedView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = int(shape.size());
  int64_t stride = 1;
  int d = v.ndim;
  for (auto it = shape.end(); it != shape.begin();) {
    --it;
    --d;
    v.shape[d] = *it;
    v.strides[d] = stride;
    stride *= *it;
  }
  return v;
}

template <typename T>
void conv_forward(const StridedView& out, const StridedView& x, const StridedView& weight,
                  const Taps<T>& t, const StridedView& bias, int64_t groups) {
  const int64_t batch = x.shape[0], channels = x.shape[1], out_channels = weight.shape[0];
  const int64_t positions = t.positions(), rows = channels * t.taps;
  const int64_t group_rows = rows / groups, group_out = out_channels / groups;
  // The weight as [groups, M / groups, C / groups * taps]: copied contiguous
  // (whatever its strides), small next to the columns.
  std::vector<T> packed(size_t(weight.numel()));
  StridedView w = contiguous_view(packed.data(), weight.dtype, {groups, group_out, group_rows});
  copy_convert(
      contiguous_view(packed.data(), weight.dtype,
                      {weight.shape[0], weight.shape[1], weight.shape[2], weight.shape[3]}),
      weight);
  std::vector<T> columns(size_t(rows * positions));
  StridedView cols = contiguous_view(columns.data(), x.dtype, {groups, group_rows, positions});
  for (int64_t n = 0; n < batch; ++n) {
    im2col_image(t, n, columns.data());
    T* image_out = out.ptr<T>() + n * out_channels * positions;
    StridedView y = contiguous_view(image_out, out.dtype, {groups, group_out, positions});
    if (group_rows == 0) {
      fill(y, 0);  // an empty sum
    } else {
      matmul(y, w, cols, StridedView{});
    }
    if (!bias.data) continue;
    for (int64_t m = 0; m < out_channels; ++m) {
      const T b = bias.ptr<T>()[m * bias.strides[0]];
      std::for_each(image_out + m * positions, image_out + (m + 1) * positions,
                    [b](T& v) { v += b; });
    }
  }
}

template <typename T>
Taps<T> taps_of(const StridedView& x, const StridedView& offset, const StridedView& mask,
                const DeformGeometry& g) {
  return Taps<T>{x, offset, mask, g, offset.shape[3], g.kernel_h * g.kernel_w};
}

void check_views(const StridedView& x, const StridedView& offset, const DeformGeometry& g,
                 const char* op) {
  KILN_CHECK(x.ndim == 4 && offset.ndim == 4 && g.offset_groups > 0 &&
                 x.shape[1] % g.offset_groups == 0 &&
                 offset.shape[1] == 2 * g.offset_groups * g.kernel_h * g.kernel_w,
             op, ": kernel got inconsistent views (x ", x.ndim, "-D, offset ", offset.ndim, "-D)");
}

}  // namespace

void deform_im2col(const StridedView& columns, const StridedView& x, const StridedView& offset,
                   const StridedView& mask, const DeformGeometry& g) {
  check_views(x, offset, g, "deform_im2col");
  if (columns.numel() == 0) return;
  if (x.dtype == DType::Float64) return im2col_all(columns, taps_of<double>(x, offset, mask, g));
  im2col_all(columns, taps_of<float>(x, offset, mask, g));
}

void deform_im2col_backward(const StridedView& grad_x, const StridedView& grad_offset,
                            const StridedView& grad_mask, const StridedView& grad_columns,
                            const StridedView& x, const StridedView& offset,
                            const StridedView& mask, const DeformGeometry& g) {
  check_views(x, offset, g, "deform_im2col_backward");
  fill(grad_x, 0);
  fill(grad_offset, 0);
  if (grad_mask.data) fill(grad_mask, 0);
  if (grad_columns.numel() == 0) return;
  StridedView gc = grad_columns;  // contiguous: dispatch's meta says so
  KILN_CHECK(gc.is_contiguous() && grad_x.is_contiguous() && grad_offset.is_contiguous(),
             "deform_im2col_backward: kernel expects contiguous gradients");
  if (x.dtype == DType::Float64) {
    const Taps<double> t = taps_of<double>(x, offset, mask, g);
    coordinate_grads(grad_offset, grad_mask, gc, t);
    return input_grads(grad_x, gc, t);
  }
  const Taps<float> t = taps_of<float>(x, offset, mask, g);
  coordinate_grads(grad_offset, grad_mask, gc, t);
  input_grads(grad_x, gc, t);
}

void deform_conv2d(const StridedView& out, const StridedView& x, const StridedView& weight,
                   const StridedView& offset, const StridedView& mask, const StridedView& bias,
                   const DeformGeometry& g, int64_t groups) {
  check_views(x, offset, g, "deform_conv2d");
  KILN_CHECK(out.is_contiguous() && weight.ndim == 4 && groups > 0,
             "deform_conv2d: kernel expects a contiguous output and a 4-D weight");
  if (out.numel() == 0) return;
  if (x.dtype == DType::Float64)
    return conv_forward(out, x, weight, taps_of<double>(x, offset, mask, g), bias, groups);
  conv_forward(out, x, weight, taps_of<float>(x, offset, mask, g), bias, groups);
}

}  // namespace kiln::cpu
