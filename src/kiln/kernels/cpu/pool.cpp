#include "kiln/kernels/cpu/pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/onednn.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

// Calls body(plane, src, dst) for every (n, c) plane, in parallel when large.
template <typename T, typename Body>
void for_each_plane(const StridedView& out, const StridedView& x, int64_t work_per_out, Body body) {
  const int64_t C = out.shape[1], planes = out.shape[0] * C;
  const int64_t plane_size = out.shape[2] * out.shape[3];
  const bool work_is_large = out.numel() * work_per_out > kParallelGrain;
  parallel_for(planes, work_is_large, [&](int64_t plane) {
    const T* src = x.ptr<const T>() + (plane / C) * x.strides[0] + (plane % C) * x.strides[1];
    body(src, out.ptr<T>() + plane * plane_size);
  });
}

template <typename T>
void max_pool_reference_typed(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const int64_t sh = x.strides[2], sw = x.strides[3];
  for_each_plane<T>(out, x, p.kernel[0] * p.kernel[1], [&](const T* src, T* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
        for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (iw < 0 || iw >= W) continue;
            const T v = src[ih * sh + iw * sw];
            if (v > best || v != v) best = v;  // NaN wins, as in PyTorch
          }
        }
        dst[oh * OW + ow] = best;
      }
    }
  });
}

// Channels-last: each output pixel's C maxima over its window, a row of C
// at a time (contiguous channels: a loop the compiler vectorizes).
template <typename T>
void max_pool_nhwc_typed(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  const int64_t OH = out.shape[1], OW = out.shape[2], C = out.shape[3];
  const int64_t H = x.shape[1], W = x.shape[2];
  const int64_t* s = x.strides;
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                        : std::numeric_limits<T>::lowest();
  const bool work_is_large = out.numel() * p.kernel[0] * p.kernel[1] > kParallelGrain;
  parallel_for(out.shape[0] * OH, work_is_large, [&](int64_t row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* dst = out.ptr<T>() + (row * OW + ow) * C;
      std::fill_n(dst, C, lowest);
      for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
        const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
        if (ih < 0 || ih >= H) continue;
        for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
          const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
          if (iw < 0 || iw >= W) continue;
          const T* src = x.ptr<const T>() + n * s[0] + ih * s[1] + iw * s[2];
          if (s[3] == 1) {
            for (int64_t c = 0; c < C; ++c) {
              const T v = src[c];
              dst[c] = (v > dst[c] || v != v) ? v : dst[c];  // NaN wins
            }
            continue;
          }
          for (int64_t c = 0; c < C; ++c) {
            const T v = src[c * s[3]];
            dst[c] = (v > dst[c] || v != v) ? v : dst[c];
          }
        }
      }
    }
  });
}

// As max_pool_reference_typed, remembering where each max was; a window's
// first in-bounds element starts it, so a window of -inf points there.
template <typename T>
void max_pool_indices_typed(const StridedView& out, const StridedView& indices,
                            const StridedView& x, const Pool2dParams& p) {
  const int64_t C = out.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = out.shape[2], OW = out.shape[3], sh = x.strides[2], sw = x.strides[3];
  const bool work_is_large = out.numel() * p.kernel[0] * p.kernel[1] > kParallelGrain;
  parallel_for(out.shape[0] * C, work_is_large, [&](int64_t plane) {
    const T* src = x.ptr<const T>() + (plane / C) * x.strides[0] + (plane % C) * x.strides[1];
    T* dst = out.ptr<T>() + plane * OH * OW;
    int64_t* where = indices.ptr<int64_t>() + plane * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t best_at = -1;
        T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
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
        dst[oh * OW + ow] = best;
        where[oh * OW + ow] = best_at;
      }
    }
  });
}

// Even and odd elements of 16 consecutive floats: [x0 x2 .. x14], [x1 x3 .. x15].
void deinterleave(const float* p, __m256& even, __m256& odd) {
  const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
  // Within each 128-bit lane, then the 64-bit pieces back in order.
  const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

// Even and odd elements of 8 consecutive floats: [x0 x2 x4 x6], [x1 x3 x5 x7].
void deinterleave4(const float* p, __m128& even, __m128& odd) {
  const __m128 lo = _mm_loadu_ps(p), hi = _mm_loadu_ps(p + 4);
  even = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  odd = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

// One output row of a 2x2, stride-2 average over rows r0 and r1: each
// output is ((((0 + r0[2i]) + r0[2i+1]) + r1[2i]) + r1[2i+1]) / 4, the same
// operations in the same order as the general loop, eight (or four) at a
// time. A row that is not whole vectors ends with one more vector pulled
// back to end at the row's end: the outputs it shares with the vector before
// get the same values again. (LeNet's rows are 14 and 5 wide: with a scalar
// tail, 6 of 14 and all 5 outputs went one at a time.) Multiplying by 1/4
// rounds exactly as dividing by 4 does: both scale by a power of two.
void avg_pool_2x2_row_f32(const float* r0, const float* r1, float* d, int64_t OW) {
  if (OW >= 8) {
    const __m256 quarter = _mm256_set1_ps(0.25f);
    for (int64_t i = 0; i < OW; i += 8) {
      const int64_t ow = std::min(i, OW - 8);
      __m256 a, b, c, e;
      deinterleave(r0 + 2 * ow, a, b);
      deinterleave(r1 + 2 * ow, c, e);
      __m256 sum = _mm256_add_ps(_mm256_setzero_ps(), a);
      sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(sum, b), c), e);
      _mm256_storeu_ps(d + ow, _mm256_mul_ps(sum, quarter));
    }
    return;
  }
  if (OW >= 4) {
    const __m128 quarter = _mm_set1_ps(0.25f);
    for (int64_t i = 0; i < OW; i += 4) {
      const int64_t ow = std::min(i, OW - 4);
      __m128 a, b, c, e;
      deinterleave4(r0 + 2 * ow, a, b);
      deinterleave4(r1 + 2 * ow, c, e);
      __m128 sum = _mm_add_ps(_mm_setzero_ps(), a);
      sum = _mm_add_ps(_mm_add_ps(_mm_add_ps(sum, b), c), e);
      _mm_storeu_ps(d + ow, _mm_mul_ps(sum, quarter));
    }
    return;
  }
  for (int64_t ow = 0; ow < OW; ++ow) {
    float sum = 0.0f + r0[2 * ow];
    sum = ((sum + r0[2 * ow + 1]) + r1[2 * ow]) + r1[2 * ow + 1];
    d[ow] = sum * 0.25f;
  }
}

// One dim of a pooling window: [lo, hi) clipped to the input, and its
// extent counting padding (what count_include_pad divides by).
struct Span {
  int64_t lo = 0, hi = 0, padded = 0;
};

Span window_1d(int64_t o, int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  const int64_t lo = o * stride - padding;
  const int64_t hi = std::min(lo + kernel, size + padding);
  return {std::max<int64_t>(lo, 0), std::min(hi, size), hi - lo};
}

template <typename T>
void avg_pool_reference_typed(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const int64_t sh = x.strides[2], sw = x.strides[3];
  // Windows are separable: rows and columns worked out once per call, not
  // per output (the integer work cost more than the sums at LeNet's sizes);
  // the counts are avg_pool_window's.
  std::vector<Span> rows(static_cast<size_t>(OH)), cols(static_cast<size_t>(OW));
  for (int64_t oh = 0; oh < OH; ++oh)
    rows[size_t(oh)] = window_1d(oh, H, p.kernel[0], p.stride[0], p.padding[0]);
  for (int64_t ow = 0; ow < OW; ++ow)
    cols[size_t(ow)] = window_1d(ow, W, p.kernel[1], p.stride[1], p.padding[1]);
  const bool all_full = std::all_of(rows.begin(), rows.end(),
                                    [&](const Span& r) {
                                      return r.hi - r.lo == p.kernel[0] && r.padded == p.kernel[0];
                                    }) &&
                        std::all_of(cols.begin(), cols.end(), [&](const Span& c) {
                          return c.hi - c.lo == p.kernel[1] && c.padded == p.kernel[1];
                        });
  if (all_full) {
    // Every window lies inside the input: whole rows at a time, each output
    // summed in the same order as below (window rows, then columns).
    const T count = T(p.kernel[0] * p.kernel[1]);
    const int64_t stride_w = p.stride[1] * sw;
    const bool pairs = std::is_same_v<T, float> && p.kernel[0] == 2 && p.kernel[1] == 2 &&
                       p.stride[1] == 2 && sw == 1;
    for_each_plane<T>(out, x, p.kernel[0] * p.kernel[1], [&](const T* src, T* dst) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* d = dst + oh * OW;
        if constexpr (std::is_same_v<T, float>) {
          if (pairs) {
            const float* r0 = src + rows[size_t(oh)].lo * sh;
            avg_pool_2x2_row_f32(r0, r0 + sh, d, OW);
            continue;
          }
        }
        std::fill(d, d + OW, T(0));
        for (int64_t ih = rows[size_t(oh)].lo; ih < rows[size_t(oh)].hi; ++ih) {
          const T* r = src + ih * sh;
          for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const T* in = r + kw * sw;  // full windows: column ow starts at ow * stride
            for (int64_t ow = 0; ow < OW; ++ow)
              d[ow] += in[ow * stride_w];
          }
        }
        for (int64_t ow = 0; ow < OW; ++ow)
          d[ow] = d[ow] / count;
      }
    });
    return;
  }
  for_each_plane<T>(out, x, p.kernel[0] * p.kernel[1], [&](const T* src, T* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const Span& r = rows[size_t(oh)];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const Span& c = cols[size_t(ow)];
        const int64_t count =
            p.count_include_pad ? r.padded * c.padded : (r.hi - r.lo) * (c.hi - c.lo);
        T sum = 0;
        for (int64_t ih = r.lo; ih < r.hi; ++ih) {
          for (int64_t iw = c.lo; iw < c.hi; ++iw)
            sum += src[ih * sh + iw * sw];
        }
        dst[oh * OW + ow] = sum / T(count);
      }
    }
  });
}

template <typename T>
void adaptive_avg_reference_typed(const StridedView& out, const StridedView& x) {
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const int64_t sh = x.strides[2], sw = x.strides[3];
  const int64_t window =
      ((H + OH - 1) / std::max<int64_t>(OH, 1) + 1) * ((W + OW - 1) / std::max<int64_t>(OW, 1) + 1);
  for_each_plane<T>(out, x, window, [&](const T* src, T* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        T sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw)
            sum += src[ih * sh + iw * sw];
        }
        dst[oh * OW + ow] = sum / T((h1 - h0) * (w1 - w0));
      }
    }
  });
}

// Right padding that makes oneDNN's output-size formula give out's size (it
// exceeds the left padding when ceil_mode adds a partial last window).
int64_t right_padding(const StridedView& out, const StridedView& x, const Pool2dParams& p, int i) {
  const int64_t eff_kernel = (p.kernel[i] - 1) * p.dilation[i] + 1;
  const int64_t needed =
      (out.shape[2 + i] - 1) * p.stride[i] + eff_kernel - x.shape[2 + i] - p.padding[i];
  return std::max(needed, p.padding[i]);
}

struct PoolEntry {
  dnnl::pooling_v2_forward prim;
  dnnl::memory::desc scratchpad;
};

onednn::PrimitiveCache<PoolEntry>& pool_cache() {
  static onednn::PrimitiveCache<PoolEntry> cache;
  return cache;
}

void pool_onednn_f32(const StridedView& out, const StridedView& x, const Pool2dParams& p,
                     dnnl::algorithm algorithm, const char* op) {
  using dims = dnnl::memory::dims;
  using tag = dnnl::memory::format_tag;
  std::vector<float> x_copy;
  const float* x_data = onednn::dense_f32(x, x_copy);
  dims src_dims(x.shape, x.shape + 4), dst_dims(out.shape, out.shape + 4);
  onednn::guarded(op, [&] {
    const auto f32 = dnnl::memory::data_type::f32;
    dnnl::memory::desc src(src_dims, f32, tag::nchw), dst(dst_dims, f32, tag::nchw);
    onednn::Key key;
    key.add(int64_t(algorithm)).add(x.shape, 4).add(out.shape, 4).add(p.kernel, 2);
    key.add(p.stride, 2).add(p.padding, 2).add(p.dilation, 2);
    PoolEntry entry = pool_cache().get(key, [&] {
      dims pad_r{right_padding(out, x, p, 0), right_padding(out, x, p, 1)};
      // oneDNN counts dilation from 0 (no gap), PyTorch from 1.
      dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, src, dst,
                                          {p.stride[0], p.stride[1]}, {p.kernel[0], p.kernel[1]},
                                          {p.dilation[0] - 1, p.dilation[1] - 1},
                                          {p.padding[0], p.padding[1]}, pad_r);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, onednn::default_attr(), onednn::engine());
      return PoolEntry{dnnl::pooling_v2_forward(pd), pd.scratchpad_desc()};
    });
    entry.prim.execute(onednn::stream(),
                       {{DNNL_ARG_SRC, onednn::wrap(src, x_data)},
                        {DNNL_ARG_DST, onednn::wrap(dst, out.data)},
                        {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
    onednn::stream().wait();
  });
}

// LeNet's pooling: float32, 2x2 windows at stride 2, no padding, every
// window inside the input (no ceil_mode overhang), rows contiguous. Then
// count_include_pad cannot matter and every divisor is 4.
bool is_plain_2x2_f32(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  return out.dtype == DType::Float32 && p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 &&
         p.stride[1] == 2 && p.padding[0] == 0 && p.padding[1] == 0 && p.dilation[0] == 1 &&
         p.dilation[1] == 1 && x.strides[3] == 1 && 2 * out.shape[2] <= x.shape[2] &&
         2 * out.shape[3] <= x.shape[3];
}

// The reference's results without its per-call set-up (two vectors of
// window spans, allocated and checked every call).
void avg_pool_2x2_f32(const StridedView& out, const StridedView& x) {
  const int64_t OH = out.shape[2], OW = out.shape[3], sh = x.strides[2];
  for_each_plane<float>(out, x, 4, [&](const float* src, float* dst) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* r0 = src + 2 * oh * sh;
      avg_pool_2x2_row_f32(r0, r0 + sh, dst + oh * OW, OW);
    }
  });
}

}  // namespace

void max_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  visit_numeric(out.dtype, [&](auto tag) { max_pool_reference_typed<decltype(tag)>(out, x, p); });
}

void max_pool2d_with_indices(const StridedView& out, const StridedView& indices,
                             const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  visit_numeric(out.dtype,
                [&](auto tag) { max_pool_indices_typed<decltype(tag)>(out, indices, x, p); });
}

void max_pool2d_nhwc(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  visit_numeric(out.dtype, [&](auto tag) { max_pool_nhwc_typed<decltype(tag)>(out, x, p); });
}

void avg_pool2d_reference(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  visit_floating(out.dtype, [&](auto tag) { avg_pool_reference_typed<decltype(tag)>(out, x, p); });
}

void adaptive_avg_pool2d_reference(const StridedView& out, const StridedView& x) {
  visit_floating(out.dtype, [&](auto tag) { adaptive_avg_reference_typed<decltype(tag)>(out, x); });
}

void max_pool2d_onednn(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  pool_onednn_f32(out, x, p, dnnl::algorithm::pooling_max, "max_pool2d");
}

bool avg_pool2d_onednn_matches(const StridedView& out, const StridedView& x,
                               const Pool2dParams& p) {
  // oneDNN's include-padding divisor counts ceil_mode's overhang past the
  // padding too; PyTorch's does not, so those shapes must take the loop.
  const bool overhangs =
      right_padding(out, x, p, 0) > p.padding[0] || right_padding(out, x, p, 1) > p.padding[1];
  return out.dtype == DType::Float32 && !(p.count_include_pad && overhangs);
}

void avg_pool2d_onednn(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  const auto algorithm = p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                             : dnnl::algorithm::pooling_avg_exclude_padding;
  pool_onednn_f32(out, x, p, algorithm, "avg_pool2d");
}

// Our loops, not oneDNN, for plain NCHW pooling: bench/kernel_choices
// measures oneDNN's NCHW pooling at about 3x slower than these loops (LeNet's
// 2x2 pools at batch 1 and 64), since its fast paths want blocked layouts.
void max_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  if (max_pool2d_f32_applies(out, x, p)) return max_pool2d_f32(out, x, p);
  max_pool2d_reference(out, x, p);
}

void avg_pool2d(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  if (out.numel() == 0) return;
  if (is_plain_2x2_f32(out, x, p)) {
    avg_pool_2x2_f32(out, x);
    return;
  }
  avg_pool2d_reference(out, x, p);
}

void adaptive_avg_pool2d(const StridedView& out, const StridedView& x) {
  if (out.numel() == 0) return;
  if (global_avg_pool2d_f32_applies(out, x)) return global_avg_pool2d_f32(out, x);
  const int64_t H = x.shape[2], W = x.shape[3], OH = out.shape[2], OW = out.shape[3];
  const bool divides = H % OH == 0 && W % OW == 0;
  if (out.dtype != DType::Float32 || !divides) {
    adaptive_avg_pool2d_reference(out, x);
    return;
  }
  // Evenly dividing windows are plain average pooling without padding.
  Pool2dParams p;
  p.kernel[0] = p.stride[0] = H / OH;
  p.kernel[1] = p.stride[1] = W / OW;
  pool_onednn_f32(out, x, p, dnnl::algorithm::pooling_avg_exclude_padding, "adaptive_avg_pool2d");
}

}  // namespace kiln::cpu
