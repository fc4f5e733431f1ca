// float32 max pooling over NCHW planes with contiguous rows, in two passes
// (max is separable): each input row's maxima over the window's columns,
// then each output row as the max of its window rows' maxima. Columns whose
// windows lie inside the row take no bounds checks, and at strides 1 and 2
// both passes go eight outputs at a time. The general loop (pool.cpp)
// checked bounds and NaN per element and reloaded the parameters after each
// store: ResNet-18's 3x3 stride-2 pool over 64x112x112 took 4.7 ms there
// (bench/kernel_choices.cpp, `pool`).
//
// The result is the general loop's, bit for bit: a window's max is exact
// in any order; among equal values (+0 and -0) the first in row-major order
// stays, as both passes keep the first of equals and the first row holding
// the max holds that element; and a window holding a NaN gives NaN (as in
// PyTorch), tracked apart since vmaxps drops NaNs of its first operand.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kiln/kernels/cpu/lanes.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/pool.h"

namespace kiln::cpu {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kMaxWindowRows = 64;  // taller windows take the general loop

struct RowGeometry {
  int64_t width = 0;  // input row length
  int64_t out_width = 0;
  int64_t stride = 1, padding = 0, dilation = 1, kernel = 1;
  // Outputs [interior_begin, interior_end) read no column outside the row.
  int64_t interior_begin = 0, interior_end = 0;
  // Of those, outputs [interior_begin, vector_end) may be done eight at a
  // time: the loads of a block of eight stay inside the row (a stride-2
  // block loads 16 floats, one past its last window's column).
  int64_t vector_end = 0;
};

RowGeometry row_geometry(int64_t width, int64_t out_width, const Pool2dParams& p) {
  RowGeometry g{width, out_width, p.stride[1], p.padding[1], p.dilation[1], p.kernel[1]};
  const int64_t reach = (g.kernel - 1) * g.dilation;  // last tap's offset in the window
  // ow * stride - padding >= 0  and  ow * stride - padding + reach < width
  g.interior_begin = std::min(out_width, (g.padding + g.stride - 1) / g.stride);
  const int64_t last = width - 1 - reach + g.padding;  // ow * stride <= last
  g.interior_end = last < 0 ? g.interior_begin : std::min(out_width, last / g.stride + 1);
  g.interior_end = std::max(g.interior_end, g.interior_begin);
  g.vector_end = g.interior_begin;
  if (g.stride == 1 || g.stride == 2) {
    // A block starting at ow loads columns ow*stride - padding + kw*dilation
    // + [0, 8*stride); they must end inside the row.
    const int64_t span = 8 * g.stride;
    const int64_t fits = width - span - reach + g.padding;  // ow * stride <= fits
    const int64_t block_starts_end = fits < 0 ? 0 : fits / g.stride + 1;
    const int64_t usable = std::min(g.interior_end, block_starts_end + 7);
    g.vector_end = std::max(g.interior_begin, usable);
  }
  return g;
}

// (v > best || v != v) ? v : best, without branches: on real data the
// comparison goes either way and a branch mispredicts (small planes, whose
// rows are too short for the eight-wide blocks, ran at half speed).
inline float max_keeping_nan(float best, float v) {
  const __m128 vv = _mm_set_ss(v);
  const __m128 larger = _mm_max_ss(vv, _mm_set_ss(best));  // v > best ? v : best
  return _mm_cvtss_f32(_mm_blendv_ps(larger, vv, _mm_cmpunord_ss(vv, vv)));
}

// Output `ow` of one input row's horizontal pass, bounds checked.
float edge_output(const float* row, const RowGeometry& g, int64_t ow) {
  float best = kMinusInf;
  for (int64_t kw = 0; kw < g.kernel; ++kw) {
    const int64_t iw = ow * g.stride - g.padding + kw * g.dilation;
    if (iw < 0 || iw >= g.width) continue;
    best = max_keeping_nan(best, row[iw]);
  }
  return best;
}

const __m256 kNaNs = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());

// Eight outputs of the horizontal pass from `ow` on, every load inside the row.
__m256 vector_block(const float* row, const RowGeometry& g, int64_t ow) {
  __m256 best = _mm256_set1_ps(kMinusInf);
  __m256 nan = _mm256_setzero_ps();
  const float* start = row + ow * g.stride - g.padding;
  for (int64_t kw = 0; kw < g.kernel; ++kw) {
    const float* at = start + kw * g.dilation;
    const __m256 v = g.stride == 1 ? _mm256_loadu_ps(at) : even_of_16_f32(at);
    best = _mm256_max_ps(v, best);  // v > best ? v : best: the first of equals stays
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  return _mm256_blendv_ps(best, kNaNs, nan);
}

// The horizontal pass: dst[ow] = max over the window's columns of `row`.
void horizontal_max(const float* row, const RowGeometry& g, float* dst) {
  for (int64_t ow = 0; ow < g.interior_begin; ++ow)
    dst[ow] = edge_output(row, g, ow);
  int64_t ow = g.interior_begin;
  for (; ow + 8 <= g.vector_end; ow += 8)
    _mm256_storeu_ps(dst + ow, vector_block(row, g, ow));
  for (; ow < g.interior_end; ++ow) {
    float best = kMinusInf;
    const float* start = row + ow * g.stride - g.padding;
    for (int64_t kw = 0; kw < g.kernel; ++kw)
      best = max_keeping_nan(best, start[kw * g.dilation]);
    dst[ow] = best;
  }
  for (; ow < g.out_width; ++ow)
    dst[ow] = edge_output(row, g, ow);
}

// The vertical pass: dst[ow] = max over the window's rows of their
// horizontal maxima, in row order (so the first of equals stays).
void vertical_max(const float* const* rows, int64_t num_rows, int64_t width, float* dst) {
  int64_t ow = 0;
  for (; ow + 8 <= width; ow += 8) {
    __m256 best = _mm256_set1_ps(kMinusInf);
    __m256 nan = _mm256_setzero_ps();
    for (int64_t r = 0; r < num_rows; ++r) {
      const __m256 v = _mm256_loadu_ps(rows[r] + ow);
      best = _mm256_max_ps(v, best);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    _mm256_storeu_ps(dst + ow, _mm256_blendv_ps(best, kNaNs, nan));
  }
  for (; ow < width; ++ow) {
    float best = kMinusInf;
    for (int64_t r = 0; r < num_rows; ++r)
      best = max_keeping_nan(best, rows[r][ow]);
    dst[ow] = best;
  }
}

}  // namespace

bool max_pool2d_f32_applies(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  return out.dtype == DType::Float32 && x.strides[3] == 1 && out.numel() > 0 &&
         p.kernel[0] <= kMaxWindowRows;
}

void max_pool2d_f32(const StridedView& out, const StridedView& x, const Pool2dParams& p) {
  const int64_t C = out.shape[1], H = x.shape[2], OH = out.shape[2], OW = out.shape[3];
  const RowGeometry g = row_geometry(x.shape[3], OW, p);
  const int64_t planes = out.shape[0] * C;
  const bool split = out.numel() * p.kernel[0] * p.kernel[1] > kParallelGrain;
  parallel_for(planes, split, [&](int64_t plane) {
    const float* src =
        x.ptr<const float>() + (plane / C) * x.strides[0] + (plane % C) * x.strides[1];
    float* dst = out.ptr<float>() + plane * OH * OW;
    // The horizontal maxima of every input row (max is separable: a window's
    // max is the max of its rows' maxima), then each output row from them.
    thread_local std::vector<float> row_maxima;
    row_maxima.resize(size_t(H * OW));
    for (int64_t ih = 0; ih < H; ++ih)
      horizontal_max(src + ih * x.strides[2], g, row_maxima.data() + ih * OW);
    const float* rows[kMaxWindowRows];
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t num_rows = 0;
      for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
        const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
        if (ih >= 0 && ih < H) rows[num_rows++] = row_maxima.data() + ih * OW;
      }
      vertical_max(rows, num_rows, OW, dst + oh * OW);
    }
  });
}

}  // namespace kiln::cpu
