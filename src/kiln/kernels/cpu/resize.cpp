// Resize kernels. Per resized axis, the taps (input indices and weights of
// each output index) are computed once, with the formulas of ONNX's
// reference (onnx/reference/ops/op_resize.py) in ONNX Runtime's float
// arithmetic (double for float64 data); then one pass per axis gathers along it. Passes run from
// the last axis to the first (PyTorch's bicubic order: along W, then along H). The (outer) slices
// of a pass are independent and run in parallel, forward and backward (a slice's gradient only
// lands in its own input slice).
#include "kiln/kernels/cpu/resize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

using Mode = ResizeParams::Mode;
using Transform = ResizeParams::Transform;
using Rounding = ResizeParams::Rounding;

// One axis: `width` input indices (clamped into [0, in)) and weights per
// output index, and whether its coordinate fell outside the input
// (tf_crop_and_resize writes extrapolation_value there).
struct AxisTaps {
  int64_t in = 0, out = 0, width = 1;
  bool identity = false;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<char> outside;
  bool any_outside = false;
};

// The spec's x_original, in C: float for float32 (and integer) data, as
// ONNX Runtime and PyTorch compute it, double for float64. `length` is the
// spec's output_width: scale * in when a scale gave it, so a fraction
// there (align_corners and tf_crop_and_resize divide by it, as ONNX's
// reference does; ONNX Runtime divides by the integer size). Rounded per
// operation, without fused multiply-adds (-mfma would contract them), so a
// coordinate that lands on a rounding tie lands where ONNX Runtime's does.
template <typename C>
[[gnu::optimize("fp-contract=off")]] C source_coordinate(int64_t j, const AxisTaps& a, C scale,
                                                         C length, C start, C end,
                                                         Transform transform) {
  const C x = C(j), in = C(a.in), half = C(0.5), one = C(1);
  switch (transform) {
    case Transform::HalfPixel:
      return (x + half) / scale - half;
    case Transform::HalfPixelSymmetric: {
      // ONNX Runtime's arithmetic: the output width from the scale, the
      // half-pixel term in double.
      const C adjustment = C(a.out) / (scale * in), center = in / C(2);
      const C offset = center * (one - adjustment);
      return C(double(offset) + (double(x) + 0.5) / double(scale) - 0.5);
    }
    case Transform::PytorchHalfPixel:  // 0 at an output of 1 (the spec's, ONNX Runtime's)
      return a.out > 1 ? (x + half) / scale - half : C(0);
    case Transform::AlignCorners:
      return length == one ? C(0) : x * (in - one) / (length - one);
    case Transform::Asymmetric:
      return x / scale;
    case Transform::TfHalfPixelForNN:
      return (x + half) / scale;
    case Transform::TfCropAndResize:
      if (length == one) return C(0.5 * (double(start) + double(end)) * double(in - one));
      return start * (in - one) + x * (end - start) * (in - one) / (length - one);
  }
  return C(0);
}

// 0 or 1: which of floor(x) and floor(x) + 1 the rounding picks.
int64_t nearest_step(double fraction, Rounding rounding) {
  switch (rounding) {
    case Rounding::RoundPreferFloor:
      return fraction <= 0.5 ? 0 : 1;
    case Rounding::RoundPreferCeil:
      return fraction < 0.5 ? 0 : 1;
    case Rounding::Floor:
      return 0;
    case Rounding::Ceil:
      return 1;
  }
  return 0;
}

// Keys' cubic convolution kernel with coefficient A, in PyTorch's Horner
// forms (cubic_convolution1 / 2).
double cubic_weight(double t, double A) {
  t = std::abs(t);
  if (t <= 1.0) return ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
  if (t < 2.0) return ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A;
  return 0.0;
}

// Linear and cubic taps around coordinate x. The filter has support
// `radius` (1 linear, 2 cubic), stretched by 1 / scale when antialiasing a
// downscale; its n taps are the n input indices nearest x, the lower ones
// on a tie (so an integer x reads [x - n/2, x + n/2 - 1]).
void interpolation_taps(double x, double scale, const ResizeParams& p, AxisTaps& a, int64_t j) {
  const bool cubic = p.mode == Mode::Cubic;
  const double radius = cubic ? 2.0 : 1.0;
  const double stretch = p.antialias ? std::min(scale, 1.0) : 1.0;
  const int64_t start = int64_t(std::floor(-radius / stretch)) + 1;
  const int64_t n = 2 - 2 * start;
  const double floor_x = std::floor(x);
  const bool integer = x == floor_x;
  const double ratio = integer ? 1.0 : x - floor_x;
  const int64_t first = integer ? int64_t(floor_x) - n / 2 : int64_t(floor_x) - n / 2 + 1;
  double* w = &a.weight[size_t(j * a.width)];
  int64_t* index = &a.index[size_t(j * a.width)];
  double sum = 0.0;
  for (int64_t t = 0; t < n; ++t) {
    const double arg = stretch * (double(start + t) - ratio);
    w[t] = cubic ? cubic_weight(arg, p.cubic_coeff_a) : std::max(0.0, 1.0 - std::abs(arg));
    sum += w[t];
  }
  if (p.antialias) {
    for (int64_t t = 0; t < n; ++t)
      w[t] /= sum;
  }
  if (p.exclude_outside) {
    sum = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t i = first + t;
      if (i < 0 || i >= a.in) w[t] = 0.0;
      sum += w[t];
    }
    for (int64_t t = 0; t < n && sum != 0.0; ++t)
      w[t] /= sum;
  }
  for (int64_t t = 0; t < n; ++t)
    index[t] = std::clamp<int64_t>(first + t, 0, a.in - 1);
}

int64_t tap_count(const ResizeParams& p, double scale) {
  if (p.mode == Mode::Nearest) return 1;
  const double radius = p.mode == Mode::Cubic ? 2.0 : 1.0;
  const double stretch = p.antialias ? std::min(scale, 1.0) : 1.0;
  return 2 - 2 * (int64_t(std::floor(-radius / stretch)) + 1);
}

// Whether every output index reads exactly its own input index (taps
// that clamp to it add up their weights).
bool reads_itself(const AxisTaps& a) {
  if (a.in != a.out || a.any_outside) return false;
  for (int64_t j = 0; j < a.out; ++j) {
    double own = 0.0;
    for (int64_t t = 0; t < a.width; ++t) {
      const size_t k = size_t(j * a.width + t);
      if (a.index[k] == j) {
        own += a.weight[k];
      } else if (a.weight[k] != 0.0) {
        return false;
      }
    }
    if (own != 1.0) return false;
  }
  return true;
}

template <typename C>
AxisTaps axis_taps(int64_t in, int64_t out, int d, int rank, const ResizeParams& p) {
  AxisTaps a;
  a.in = in;
  a.out = out;
  const bool given = !p.scales.empty();
  const C scale = given ? C(p.scales[size_t(d)]) : C(out) / C(in);
  const C length = given ? scale * C(in) : C(out);
  const bool crop = p.transform == Transform::TfCropAndResize;
  const C start = crop && !p.roi.empty() ? C(p.roi[size_t(d)]) : C(0);
  const C end = crop && !p.roi.empty() ? C(p.roi[size_t(d + rank)]) : C(1);
  // An axis whose size and scale stay is left alone (as ONNX's reference
  // and ONNX Runtime do, even where tf_half_pixel_for_nn would shift it).
  if (in == out && std::abs(double(scale) - 1.0) <= 1e-9 && start == C(0) && end == C(1)) {
    a.identity = true;
    return a;
  }
  a.width = tap_count(p, double(scale));
  a.index.assign(size_t(out * a.width), 0);
  a.weight.assign(size_t(out * a.width), 1.0);
  a.outside.assign(size_t(out), 0);
  for (int64_t j = 0; j < out; ++j) {
    const C x = source_coordinate<C>(j, a, scale, length, start, end, p.transform);
    if (crop && (x < C(0) || x > C(in - 1))) {
      a.outside[size_t(j)] = 1;
      a.any_outside = true;
    }
    if (p.mode != Mode::Nearest) {
      interpolation_taps(double(x), double(scale), p, a, j);
      continue;
    }
    const C floor_x = std::floor(x);
    const int64_t step = x == floor_x ? 0 : nearest_step(double(x - floor_x), p.rounding);
    a.index[size_t(j)] = std::clamp<int64_t>(int64_t(floor_x) + step, 0, in - 1);
  }
  a.identity = reads_itself(a);
  return a;
}

// Coordinates in float, except for float64 data.
template <typename T>
std::vector<AxisTaps> all_taps(const int64_t* in, const int64_t* out, int rank,
                               const ResizeParams& p) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  std::vector<AxisTaps> taps;
  for (int d = 0; d < rank; ++d)
    taps.push_back(axis_taps<C>(in[d], out[d], d, rank, p));
  return taps;
}

// The resized axes in the order the forward passes take them.
std::vector<int> pass_order(const std::vector<AxisTaps>& taps) {
  std::vector<int> order;
  for (int d = int(taps.size()) - 1; d >= 0; --d)
    if (!taps[size_t(d)].identity) order.push_back(d);
  return order;
}

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d)
    n *= shape[d];
  return n;
}

template <typename T>
std::vector<T> weights_as(const AxisTaps& a) {
  return std::vector<T>(a.weight.begin(), a.weight.end());
}

// dst [outer, out, inner] from src [outer, in, inner] along the middle axis.
template <typename T>
void gather_pass(const T* src, T* dst, int64_t outer, int64_t inner, const AxisTaps& a) {
  const int64_t in = a.in, out = a.out, k = a.width;
  const std::vector<T> weight = weights_as<T>(a);
  parallel_for(outer, outer * out * inner * k > kParallelGrain, [&](int64_t o) {
    const T* from = src + o * in * inner;
    T* to = dst + o * out * inner;
    for (int64_t j = 0; j < out; ++j, to += inner) {
      const int64_t* index = a.index.data() + j * k;
      const T* row = from + index[0] * inner;
      if (k == 1) {  // nearest: a copy, for any dtype
        std::copy(row, row + inner, to);
        continue;
      }
      if constexpr (std::is_floating_point_v<T>) {
        const T* w = weight.data() + j * k;
        for (int64_t i = 0; i < inner; ++i)
          to[i] = row[i] * w[0];
        for (int64_t t = 1; t < k; ++t) {
          const T* next = from + index[t] * inner;
          for (int64_t i = 0; i < inner; ++i)
            to[i] += next[i] * w[t];
        }
      }
    }
  });
}

// The outputs of one row of plane_pass for interpolation, with kr x kc
// taps; KR / KC fix them at compile time (linear's 2, cubic's 4) so the
// loops unroll, 0 leaves them to the taps.
template <typename T, int KR, int KC>
void interpolate_row(const T* plane, int64_t W, const int64_t* ri, const T* rw, int64_t kr_run,
                     const AxisTaps& cols, const T* col_weight, T* to) {
  const int64_t kr = KR ? KR : kr_run, kc = KC ? KC : cols.width;
  for (int64_t ow = 0; ow < cols.out; ++ow) {
    const int64_t* ci = cols.index.data() + ow * kc;
    const T* cw = col_weight + ow * kc;
    T sum = T(0);
    for (int64_t r = 0; r < kr; ++r) {
      const T* row = plane + ri[r] * W;
      T along_w = row[ci[0]] * cw[0];
      for (int64_t c = 1; c < kc; ++c)
        along_w += row[ci[c]] * cw[c];
      sum = r == 0 ? along_w * rw[0] : sum + along_w * rw[r];
    }
    to[ow] = sum;
  }
}

// Nearest columns that read input column ow / 2 for output ow (an upscale
// by 2 in the modes that floor, the feature pyramids of detectors).
bool reads_each_twice(const AxisTaps& a) {
  for (int64_t o = 0; o < a.out; ++o)
    if (a.index[size_t(o)] != o / 2) return false;
  return true;
}

// to[o] = row[o / 2] for o < n: each element written twice.
template <typename T>
void double_each(const T* row, T* to, int64_t n) {
  int64_t o = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; o + 8 <= n; o += 8) {
      const __m128 v = _mm_loadu_ps(row + o / 2);
      _mm_storeu_ps(to + o, _mm_unpacklo_ps(v, v));
      _mm_storeu_ps(to + o + 4, _mm_unpackhi_ps(v, v));
    }
  }
  for (; o < n; ++o)
    to[o] = row[o / 2];
}

// Both of the last two axes in one pass, dst [planes, OH, OW] from src
// [planes, H, W], with no buffer between them (the common [N, C, H, W]
// case). Each output sums its taps along W per input row, then the rows
// along H: the arithmetic of a W pass followed by an H pass.
template <typename T>
void plane_pass(const T* src, T* dst, int64_t planes, const AxisTaps& rows, const AxisTaps& cols) {
  const int64_t H = rows.in, W = cols.in, OH = rows.out, OW = cols.out;
  const int64_t kr = rows.width, kc = cols.width;
  const std::vector<T> row_weight = weights_as<T>(rows), col_weight = weights_as<T>(cols);
  const bool doubles_columns = kc == 1 && reads_each_twice(cols);
  parallel_for(planes, planes * OH * OW * kr * kc > kParallelGrain, [&](int64_t p) {
    const T* plane = src + p * H * W;
    T* to = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh, to += OW) {
      const int64_t* ri = rows.index.data() + oh * kr;
      if (kr == 1 && kc == 1) {  // nearest: a gather, for any dtype
        // An upscale reads each input row for several output rows: the
        // gather is done once and copied.
        if (oh > 0 && ri[0] == ri[-1]) {
          std::copy(to - OW, to, to);
          continue;
        }
        const T* row = plane + ri[0] * W;
        if (doubles_columns) {
          double_each(row, to, OW);
          continue;
        }
        for (int64_t ow = 0; ow < OW; ++ow)
          to[ow] = row[cols.index[size_t(ow)]];
        continue;
      }
      if constexpr (std::is_floating_point_v<T>) {
        const T* rw = row_weight.data() + oh * kr;
        const T* cw = col_weight.data();
        if (kr == 2 && kc == 2) {
          interpolate_row<T, 2, 2>(plane, W, ri, rw, kr, cols, cw, to);
        } else if (kr == 4 && kc == 4) {
          interpolate_row<T, 4, 4>(plane, W, ri, rw, kr, cols, cw, to);
        } else {
          interpolate_row<T, 0, 0>(plane, W, ri, rw, kr, cols, cw, to);
        }
      }
    }
  });
}

// The adjoint: dst [outer, in, inner] from src [outer, out, inner].
template <typename T>
void scatter_pass(const T* src, T* dst, int64_t outer, int64_t inner, const AxisTaps& a) {
  const int64_t in = a.in, out = a.out, k = a.width;
  const std::vector<T> weight = weights_as<T>(a);
  parallel_for(outer, outer * out * inner * k > kParallelGrain, [&](int64_t o) {
    T* to = dst + o * in * inner;
    std::fill(to, to + in * inner, T(0));
    const T* from = src + o * out * inner;
    for (int64_t j = 0; j < out; ++j, from += inner) {
      for (int64_t t = 0; t < k; ++t) {
        const T w = weight[size_t(j * k + t)];
        T* row = to + a.index[size_t(j * k + t)] * inner;
        for (int64_t i = 0; i < inner; ++i)
          row[i] += w * from[i];
      }
    }
  });
}

// Sets the slabs of `data` (of `shape`) whose index along an axis fell
// outside the input to `value`.
template <typename T>
void fill_outside(T* data, const std::vector<int64_t>& shape, const std::vector<AxisTaps>& taps,
                  T value) {
  for (size_t d = 0; d < taps.size(); ++d) {
    const AxisTaps& a = taps[d];
    if (!a.any_outside) continue;
    const int64_t outer = product(shape, 0, d), inner = product(shape, d + 1, shape.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < a.out; ++j)
        if (a.outside[size_t(j)]) std::fill_n(data + (o * a.out + j) * inner, inner, value);
  }
}

StridedView contiguous_view(void* data, DType dtype, int ndim, const int64_t* shape) {
  StridedView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

// Runs the passes over `order` (axes), from src of shape `shape` into
// `final` (contiguous); `pass` is gather_pass or scatter_pass, `sizes` the
// size each axis ends with.
template <typename T, typename Pass>
void run_passes(const T* src, std::vector<int64_t> shape, const std::vector<int>& order,
                const std::vector<int64_t>& sizes, const std::vector<AxisTaps>& taps, T* final,
                Pass pass) {
  if (order.empty()) {
    std::copy(src, src + product(shape, 0, shape.size()), final);
    return;
  }
  std::vector<T> buffers[2];
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t d = size_t(order[n]);
    const int64_t outer = product(shape, 0, d), inner = product(shape, d + 1, shape.size());
    shape[d] = sizes[d];
    T* dst = final;
    if (n + 1 < order.size()) {
      buffers[n % 2].resize(size_t(product(shape, 0, shape.size())));
      dst = buffers[n % 2].data();
    }
    pass(src, dst, outer, inner, taps[d]);
    src = dst;
  }
}

template <typename T>
void resize_forward(const StridedView& out, const StridedView& x, const ResizeParams& p) {
  const std::vector<AxisTaps> taps = all_taps<T>(x.shape, out.shape, x.ndim, p);
  std::vector<T> contiguous;
  const T* src = x.ptr<T>();
  if (!x.is_contiguous()) {
    contiguous.resize(size_t(x.numel()));
    copy_convert(contiguous_view(contiguous.data(), x.dtype, x.ndim, x.shape), x);
    src = contiguous.data();
  }
  const std::vector<int64_t> in_shape(x.shape, x.shape + x.ndim);
  const std::vector<int64_t> out_shape(out.shape, out.shape + out.ndim);
  const std::vector<int> order = pass_order(taps);
  const size_t rank = in_shape.size();
  if (order.size() == 2 && order[0] == int(rank) - 1 && order[1] == int(rank) - 2) {
    plane_pass<T>(src, out.ptr<T>(), product(in_shape, 0, rank - 2), taps[rank - 2],
                  taps[rank - 1]);
  } else {
    run_passes<T>(src, in_shape, order, out_shape, taps, out.ptr<T>(), gather_pass<T>);
  }
  fill_outside(out.ptr<T>(), out_shape, taps, T(p.extrapolation_value));
}

template <typename T>
void resize_adjoint(const StridedView& dx, const StridedView& dy, const ResizeParams& p) {
  const std::vector<AxisTaps> taps = all_taps<T>(dx.shape, dy.shape, dx.ndim, p);
  // Extrapolated outputs read no input: their gradient stops here.
  std::vector<T> grad(size_t(dy.numel()));
  copy_convert(contiguous_view(grad.data(), dy.dtype, dy.ndim, dy.shape), dy);
  const std::vector<int64_t> in_shape(dx.shape, dx.shape + dx.ndim);
  const std::vector<int64_t> out_shape(dy.shape, dy.shape + dy.ndim);
  fill_outside(grad.data(), out_shape, taps, T(0));
  std::vector<int> order = pass_order(taps);
  std::reverse(order.begin(), order.end());
  run_passes<T>(grad.data(), out_shape, order, in_shape, taps, dx.ptr<T>(), scatter_pass<T>);
}

}  // namespace

std::vector<double> read_doubles(const StridedView& values) {
  std::vector<double> out;
  if (!values.data) return out;
  const int64_t n = values.numel();
  visit_floating(values.dtype, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = 0; i < n; ++i)
      out.push_back(double(values.ptr<T>()[offset_of(values, i)]));
  });
  return out;
}

void resize(const StridedView& out, const StridedView& x, const ResizeParams& p) {
  if (out.numel() == 0) return;
  if (p.mode == Mode::Nearest) {
    // bool as bytes (std::vector<bool> has no data()).
    visit_dtype(out.dtype, [&](auto t) {
      using T = decltype(t);
      resize_forward<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>(out, x, p);
    });
    return;
  }
  visit_floating(out.dtype, [&](auto t) { resize_forward<decltype(t)>(out, x, p); });
}

void resize_backward(const StridedView& dx, const StridedView& dy, const ResizeParams& p) {
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) {
    fill(dx, Scalar(0.0));
    return;
  }
  visit_floating(dx.dtype, [&](auto t) { resize_adjoint<decltype(t)>(dx, dy, p); });
}

}  // namespace kiln::cpu
