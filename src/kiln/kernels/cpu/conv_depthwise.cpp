// A depthwise float32 convolution on NCHW (MobileNet's 3x3 and 5x5, stride
// 1 and 2): groups == in channels == out channels, no dilation. oneDNN runs
// these on plain NCHW through im2col + GEMM, one tiny GEMM per channel
// (bench/kernel_choices.cpp measures both: 5-10x slower than this).
//
// Each channel is its own 2-D convolution. Its input plane is copied once,
// zero-padded, into `stride` column phases: phase p holds the padded
// columns p, p + s, p + 2s, ... so that for any kernel column kw the inputs
// of 8 neighbouring output pixels are 8 contiguous floats of phase kw % s,
// starting kw / s in. The lanes hold 8 output pixels of one row (up to 4
// vectors at a time); each step multiplies one broadcast weight into them.
// Every output is bias + the sum over kh, kw in that order, one fma per
// term (the padding contributes w * 0). Rows whose width is not a multiple
// of 8 end with a masked store; the phases are wide enough that the loads
// of the last vector stay inside the buffer.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/lanes.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int kMaxVectors = 4;  // output vectors per step along a row
// Kernels and strides beyond these take oneDNN (no model we run has them).
constexpr int64_t kMaxKernel = 11;
constexpr int64_t kMaxStride = 4;

struct Geometry {
  int64_t C, H, W, OH, OW, KH, KW, sh, sw, ph, pw;
  int64_t rows;         // padded input rows the output reads
  int64_t phase_width;  // floats per row of one phase
  bool relu;            // applied as the results are stored
};

Geometry geometry_of(const StridedView& out, const StridedView& x, const StridedView& w,
                     const Conv2dParams& p) {
  Geometry g{};
  g.C = x.shape[1], g.H = x.shape[2], g.W = x.shape[3];
  g.OH = out.shape[2], g.OW = out.shape[3];
  g.KH = w.shape[2], g.KW = w.shape[3];
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.rows = (g.OH - 1) * g.sh + g.KH;
  const int64_t padded_ow = (g.OW + kLanes - 1) / kLanes * kLanes;
  g.phase_width = padded_ow + (g.KW - 1) / g.sw;
  return g;
}

// The plane of x at (n, c), zero-padded, split into column phases:
// dst[(p * rows + r) * phase_width + j] = x[r - ph][j * sw + p - pw], or 0.
void fill_phases(const Geometry& g, const float* plane, int64_t row_stride, int64_t col_stride,
                 float* dst) {
  std::fill(dst, dst + g.sw * g.rows * g.phase_width, 0.0f);
  for (int64_t p = 0; p < g.sw; ++p) {
    // The columns j of this phase that read inside the row: 0 <= j * sw + p - pw < W.
    const int64_t first = std::max<int64_t>(0, (g.pw - p + g.sw - 1) / g.sw);
    const int64_t end = std::min(g.phase_width, (g.W - 1 + g.pw - p) / g.sw + 1);
    if (g.W - 1 + g.pw - p < 0 || first >= end) continue;
    const int64_t first_col = first * g.sw + p - g.pw;
    for (int64_t r = std::max<int64_t>(0, g.ph); r < std::min(g.rows, g.H + g.ph); ++r) {
      const float* src = plane + (r - g.ph) * row_stride + first_col * col_stride;
      float* row = dst + (p * g.rows + r) * g.phase_width;
      if (g.sw == 1 && col_stride == 1) {
        std::copy(src, src + (end - first), row + first);
        continue;
      }
      const int64_t step = g.sw * col_stride;
      int64_t j = first;
      if (step == 2) {  // stride 2 over a dense row: 8 of every 16 floats at a time
        for (; j + kLanes <= end && 2 * (j - first + kLanes) <= g.W - first_col; j += kLanes) {
          _mm256_storeu_ps(row + j, even_of_16_f32(src + 2 * (j - first)));
        }
      }
      for (; j < end; ++j)
        row[j] = src[(j - first) * step];
    }
  }
}

__m256i tail_mask(int64_t valid) {
  alignas(32) static const int32_t ramp[kLanes] = {0, 1, 2, 3, 4, 5, 6, 7};
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(valid)),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(ramp)));
}

// Where tap t = kh * KW + kw reads, relative to the output row's first
// input row in the phases: phase kw % sw, row kh, column kw / sw.
std::vector<int64_t> tap_offsets(const Geometry& g) {
  std::vector<int64_t> offsets(size_t(g.KH * g.KW));
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      offsets[size_t(kh * g.KW + kw)] = ((kw % g.sw) * g.rows + kh) * g.phase_width + kw / g.sw;
    }
  }
  return offsets;
}

// Output pixels [ow0, ow0 + 8 * kVectors) of kRows rows from `oh` on (the
// last vector may hang over the row's end: masked). Several rows at once
// give the fmas independent accumulators to hide their latency when a row
// is one or two vectors (MobileNet's 7x7 and 14x14 planes).
template <int kRows, int kVectors>
void block(const Geometry& g, const float* phases, const int64_t* taps, const float* weights,
           float bias, int64_t oh, int64_t ow0, float* out) {
  __m256 acc[kRows][kVectors];
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kVectors; ++i)
      acc[r][i] = _mm256_set1_ps(bias);
  }
  const float* in = phases + oh * g.sh * g.phase_width + ow0;
  const int64_t row_step = g.sh * g.phase_width, count = g.KH * g.KW;
  for (int64_t t = 0; t < count; ++t) {
    const __m256 wv = _mm256_set1_ps(weights[t]);
    const float* tap = in + taps[t];
    for (int r = 0; r < kRows; ++r) {
      for (int i = 0; i < kVectors; ++i) {
        const __m256 x = _mm256_loadu_ps(tap + r * row_step + i * kLanes);
        acc[r][i] = _mm256_fmadd_ps(x, wv, acc[r][i]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    float* out_row = out + (oh + r) * g.OW;
    for (int i = 0; i < kVectors; ++i) {
      // max returns its second operand when one is NaN: NaN passes and -0
      // stays -0, as in relu's x < 0 ? 0 : x.
      const __m256 v = g.relu ? _mm256_max_ps(_mm256_setzero_ps(), acc[r][i]) : acc[r][i];
      const int64_t first = ow0 + i * kLanes;
      if (first + kLanes <= g.OW) {
        _mm256_storeu_ps(out_row + first, v);
      } else {
        _mm256_maskstore_ps(out_row + first, tail_mask(g.OW - first), v);
      }
    }
  }
}

// Rows [oh, oh + kRows), or as many of 4, 2 or 1 as are left, in column
// blocks of kVectors vectors; returns how many rows it did.
template <int kRows, int kVectors>
int64_t rows(const Geometry& g, const float* phases, const int64_t* taps, const float* weights,
             float bias, int64_t oh, int64_t ow0, float* out) {
  if (oh + kRows <= g.OH) {
    block<kRows, kVectors>(g, phases, taps, weights, bias, oh, ow0, out);
    return kRows;
  }
  if constexpr (kRows > 1) {
    return rows<kRows / 2, kVectors>(g, phases, taps, weights, bias, oh, ow0, out);
  }
  return 0;  // unreachable: one row always fits
}

void plane(const Geometry& g, const float* phases, const int64_t* taps, const float* weights,
           float bias, float* out) {
  for (int64_t ow0 = 0; ow0 < g.OW; ow0 += kMaxVectors * kLanes) {
    const int64_t vectors = std::min<int64_t>(kMaxVectors, (g.OW - ow0 + kLanes - 1) / kLanes);
    for (int64_t oh = 0; oh < g.OH;) {
      switch (vectors) {  // about 8 accumulators
        case 4:
          oh += rows<2, 4>(g, phases, taps, weights, bias, oh, ow0, out);
          break;
        case 3:
          oh += rows<2, 3>(g, phases, taps, weights, bias, oh, ow0, out);
          break;
        case 2:
          oh += rows<4, 2>(g, phases, taps, weights, bias, oh, ow0, out);
          break;
        default:
          oh += rows<8, 1>(g, phases, taps, weights, bias, oh, ow0, out);
          break;
      }
    }
  }
}

// The weights of channel c as [KH * KW] contiguous floats (in `copy` when w
// is strided).
const float* channel_weights(const StridedView& w, int64_t c, std::vector<float>& copy) {
  const int64_t KH = w.shape[2], KW = w.shape[3];
  const float* base = w.ptr<const float>() + c * w.strides[0];
  if (w.strides[3] == 1 && w.strides[2] == KW) return base;
  copy.resize(size_t(KH * KW));
  for (int64_t kh = 0; kh < KH; ++kh) {
    for (int64_t kw = 0; kw < KW; ++kw)
      copy[size_t(kh * KW + kw)] = base[kh * w.strides[2] + kw * w.strides[3]];
  }
  return copy.data();
}

}  // namespace

bool conv2d_depthwise_f32_applies(const StridedView& out, const StridedView& x,
                                  const StridedView& w, const Conv2dParams& p) {
  const int64_t C = x.shape[1];
  return out.dtype == DType::Float32 && x.dtype == DType::Float32 && w.dtype == DType::Float32 &&
         p.groups == C && C > 1 && w.shape[0] == C && w.shape[1] == 1 && p.dilation[0] == 1 &&
         p.dilation[1] == 1 && w.shape[2] <= kMaxKernel && w.shape[3] <= kMaxKernel &&
         p.stride[0] <= kMaxStride && p.stride[1] <= kMaxStride && p.padding[0] >= 0 &&
         p.padding[1] >= 0;
}

void conv2d_depthwise_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                          const StridedView& bias, const Conv2dParams& p, bool relu) {
  ConvEpilogue epilogue;
  if (relu) epilogue.activation = EpilogueActivation::Relu;
  conv2d_depthwise_f32(out, x, w, bias, p, epilogue, StridedView{});
}

void conv2d_depthwise_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                          const StridedView& bias, const Conv2dParams& p,
                          const ConvEpilogue& epilogue, const StridedView& residual) {
  Geometry g = geometry_of(out, x, w, p);
  std::vector<float> residual_copy;
  const float* residual_data =
      residual.data ? contiguous_residual_f32(residual, residual_copy) : nullptr;
  // relu alone goes into the stores; anything else runs over each plane
  // after it is computed, while it is still in cache.
  g.relu = epilogue.activation == EpilogueActivation::Relu && !residual_data;
  ConvEpilogue rest = epilogue;  // what the stores leave to the pass over each plane
  if (g.relu) rest.activation = EpilogueActivation::None;
  const bool plane_epilogue =
      residual_data || rest.activation != EpilogueActivation::None || rest.has_affine_after();
  const int64_t N = x.shape[0], planes = N * g.C, plane_size = g.OH * g.OW;
  const int64_t work = out.numel() * g.KH * g.KW;
  const std::vector<int64_t> taps = tap_offsets(g);
  parallel_for(planes, work > (int64_t(1) << 18) && max_threads() > 1, [&](int64_t index) {
    thread_local std::vector<float> phases, weight_copy;
    const int64_t n = index / g.C, c = index % g.C;
    phases.resize(size_t(g.sw * g.rows * g.phase_width + kLanes));
    const float* in = x.ptr<const float>() + n * x.strides[0] + c * x.strides[1];
    fill_phases(g, in, x.strides[2], x.strides[3], phases.data());
    const float b = bias.data ? bias.ptr<const float>()[c * bias.strides[0]] : 0.0f;
    float* out_plane = out.ptr<float>() + index * plane_size;
    plane(g, phases.data(), taps.data(), channel_weights(w, c, weight_copy), b, out_plane);
    if (plane_epilogue) {
      apply_conv_epilogue_f32(out_plane,
                              residual_data ? residual_data + index * plane_size : nullptr,
                              plane_size, rest);
    }
  });
}

}  // namespace kiln::cpu
