// A direct float32 convolution for small problems (LeNet's layers at small
// batch), where a oneDNN call's fixed costs (the per-call weight reorder, the
// primitive's setup of its blocked layouts) dominate: bench/kernel_choices.cpp
// sets the two side by side.
//
// The weights are packed per call as [C][KH][KW][OC rounded up to 8] (they
// may change between calls) and the input is copied once into a zero-padded
// plane per channel (no bounds checks in the inner loops). Two register
// blockings, whichever wastes fewer lanes:
//  - rows: with stride 1 along W and rows of at least 8, the lanes hold 8
//    neighbouring output pixels of one row; each step loads two input
//    vectors and multiplies them by one broadcast weight for each of up to
//    6 output channels (12 accumulators). Rows are covered by pairs of
//    vectors, the last pair pulled back to end at the row's end. Results go
//    out as whole rows of the NCHW planes. (LeNet's conv1: 6 channels would
//    fill 6 of 8 lanes of a channel vector; 28 pixels fill 28 of 32 here.)
//  - pixels: the lanes hold 8 output channels; each step broadcasts one
//    input value for each of 4 output pixels (consecutive in the flattened
//    OH x OW plane, so row ends cost nothing) into one or two vectors of
//    channels. The 4 x 8 block is transposed to store 4 pixels per channel.
// Every output is bias + the sum over c, kh, kw in that order, one fma per
// term (the order the reference loop adds in), whichever blocking computes
// it; a pixel computed twice (overlapping tail blocks) gets the same value.
// An activation can be applied to the accumulators before they are stored,
// with the same results as applying it to the output afterwards.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kPixels = 4;   // output pixels per block, pixel blocking
constexpr int kRowChannels = 6;  // output channels per block, row blocking
// A bound on the problems it takes (bench/kernel_choices.cpp: still 2x ahead
// of oneDNN at LeNet batch 64, 15M multiply-adds, one thread).
constexpr int64_t kMaxDirectMacs = int64_t(1) << 26;

struct Geometry {
  int64_t N, C, H, W, OC, OH, OW, KH, KW, sh, sw, ph, pw;
  int64_t PH, PW;  // the padded input plane
  int64_t OCP;     // OC rounded up to whole vectors
};

Geometry geometry_of(const StridedView& out, const StridedView& x, const StridedView& w,
                     const Conv2dParams& p) {
  Geometry g{};
  g.N = x.shape[0], g.C = x.shape[1], g.H = x.shape[2], g.W = x.shape[3];
  g.OC = out.shape[1], g.OH = out.shape[2], g.OW = out.shape[3];
  g.KH = w.shape[2], g.KW = w.shape[3];
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.PH = g.H + 2 * g.ph, g.PW = g.W + 2 * g.pw;
  g.OCP = (g.OC + kLanes - 1) / kLanes * kLanes;
  return g;
}

// Rows when they fill more lanes than channel vectors do: OW of every
// 16-pixel pair against OC of OCP channels.
bool use_rows(const Geometry& g) {
  if (g.sw != 1 || g.OW < kLanes) return false;
  const int64_t row_lanes = (g.OW + 2 * kLanes - 1) / (2 * kLanes) * 2 * kLanes;
  return g.OW * g.OCP > g.OC * row_lanes;
}

// Per-thread buffers, reused from call to call.
struct Scratch {
  std::vector<float> weights, bias, input;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// w's [OC][taps] (tap t = (c * KH + kh) * KW + kw) into [taps][OCP], the
// padding channels 0. When each channel's taps are contiguous (a contiguous
// weight tensor), 8 x 8 blocks at a time: element by element, packing
// conv2's 2400 weights cost 2.7 us a call, a third of the convolution.
void pack_weights(const Geometry& g, const StridedView& w, const StridedView& bias, Scratch& s) {
  const int64_t taps = g.C * g.KH * g.KW, ocp = g.OCP, s0 = w.strides[0];
  s.weights.assign(size_t(taps * ocp), 0.0f);
  const float* src = w.ptr<const float>();
  float* dst = s.weights.data();
  const bool flat = w.strides[3] == 1 && w.strides[2] == g.KW && w.strides[1] == g.KH * g.KW;
  int64_t t0 = 0;
  if (flat) {
    for (; t0 + kLanes <= taps; t0 += kLanes) {
      for (int64_t oc0 = 0; oc0 < g.OC; oc0 += kLanes) {
        __m256 r[kLanes];
        for (int64_t i = 0; i < kLanes; ++i) {
          r[i] = oc0 + i < g.OC ? _mm256_loadu_ps(src + (oc0 + i) * s0 + t0) : _mm256_setzero_ps();
        }
        transpose8x8(r);
        for (int64_t j = 0; j < kLanes; ++j)
          _mm256_storeu_ps(dst + (t0 + j) * ocp + oc0, r[j]);
      }
    }
  }
  for (int64_t t = t0; t < taps; ++t) {  // the rest, or all of a strided w
    const int64_t c = t / (g.KH * g.KW), kh = t / g.KW % g.KH, kw = t % g.KW;
    const float* in = src + c * w.strides[1] + kh * w.strides[2] + kw * w.strides[3];
    for (int64_t oc = 0; oc < g.OC; ++oc)
      dst[t * ocp + oc] = in[oc * s0];
  }
  s.bias.assign(size_t(ocp), 0.0f);
  if (!bias.data) return;
  for (int64_t oc = 0; oc < g.OC; ++oc)
    s.bias[size_t(oc)] = bias.ptr<const float>()[oc * bias.strides[0]];
}

// Image n of x, zero-padded: [C][PH][PW].
void pad_input(const Geometry& g, const StridedView& x, int64_t n, float* dst) {
  std::fill(dst, dst + g.C * g.PH * g.PW, 0.0f);
  const float* src = x.ptr<const float>() + n * x.strides[0];
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t h = 0; h < g.H; ++h) {
      float* row = dst + (c * g.PH + h + g.ph) * g.PW + g.pw;
      const float* in = src + c * x.strides[1] + h * x.strides[2];
      if (x.strides[3] == 1) {
        std::copy(in, in + g.W, row);
        continue;
      }
      for (int64_t wi = 0; wi < g.W; ++wi)
        row[wi] = in[wi * x.strides[3]];
    }
  }
}

// The activation on 8 outputs; bit for bit what unary() computes on them.
template <ConvActivation A>
__m256 activate(__m256 v) {
  if constexpr (A == ConvActivation::Sigmoid) return sigmoid_f32x8(v);
  // max returns its second operand when one is NaN: NaN passes and -0 stays
  // -0, as in relu's x < 0 ? 0 : x.
  if constexpr (A == ConvActivation::Relu) return _mm256_max_ps(_mm256_setzero_ps(), v);
  return v;
}

// Row blocking: OCB channels from oc0 on, 8 pixels of row oh from each of
// ow0 and ow1. The accumulators are arrays indexed by constants after
// unrolling, which GCC keeps in registers (12 of them, 2 inputs, 1 weight).
template <int OCB, ConvActivation A>
void row_block(const Geometry& g, const float* input, const float* weights, const float* bias,
               int64_t oh, int64_t oc0, int64_t ow0, int64_t ow1, float* out_image) {
  __m256 acc0[OCB], acc1[OCB];
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o)
    acc0[o] = acc1[o] = _mm256_set1_ps(bias[oc0 + o]);
  const int64_t kh_count = g.KH, kw_count = g.KW, ocp = g.OCP;
  const float* w = weights + oc0;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t kh = 0; kh < kh_count; ++kh) {
      const float* x = input + (c * g.PH + oh * g.sh + kh) * g.PW;
      for (int64_t kw = 0; kw < kw_count; ++kw, w += ocp, ++x) {
        const __m256 x0 = _mm256_loadu_ps(x + ow0), x1 = _mm256_loadu_ps(x + ow1);
#pragma GCC unroll 8
        for (int o = 0; o < OCB; ++o) {
          const __m256 wv = _mm256_broadcast_ss(w + o);
          acc0[o] = _mm256_fmadd_ps(x0, wv, acc0[o]);
          acc1[o] = _mm256_fmadd_ps(x1, wv, acc1[o]);
        }
      }
    }
  }
  const int64_t plane = g.OH * g.OW;
#pragma GCC unroll 8
  for (int o = 0; o < OCB; ++o) {
    float* dst = out_image + (oc0 + o) * plane + oh * g.OW;
    // ow1's vector first: where the two overlap, ow0's (equal) values win.
    _mm256_storeu_ps(dst + ow1, activate<A>(acc1[o]));
    _mm256_storeu_ps(dst + ow0, activate<A>(acc0[o]));
  }
}

template <int OCB, ConvActivation A>
void conv_rows_for(const Geometry& g, const float* input, const Scratch& s, int64_t oc0,
                   float* out_image) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ow += 2 * kLanes) {
      // The last pair ends at the row's end (overlapping the one before).
      const int64_t ow0 = std::min(ow, std::max<int64_t>(g.OW - 2 * kLanes, 0));
      const int64_t ow1 = std::min(ow0 + kLanes, g.OW - kLanes);
      row_block<OCB, A>(g, input, s.weights.data(), s.bias.data(), oh, oc0, ow0, ow1, out_image);
    }
  }
}

template <ConvActivation A>
void conv_rows(const Geometry& g, const float* input, const Scratch& s, float* out_image) {
  for (int64_t oc0 = 0; oc0 < g.OC; oc0 += kRowChannels) {
    switch (std::min<int64_t>(kRowChannels, g.OC - oc0)) {
      case 1:
        conv_rows_for<1, A>(g, input, s, oc0, out_image);
        break;
      case 2:
        conv_rows_for<2, A>(g, input, s, oc0, out_image);
        break;
      case 3:
        conv_rows_for<3, A>(g, input, s, oc0, out_image);
        break;
      case 4:
        conv_rows_for<4, A>(g, input, s, oc0, out_image);
        break;
      case 5:
        conv_rows_for<5, A>(g, input, s, oc0, out_image);
        break;
      default:
        conv_rows_for<6, A>(g, input, s, oc0, out_image);
        break;
    }
  }
}

// Stores channels first .. first + 7 (those below OC) of 4 consecutive
// output positions: a0..a3 hold the 8 channels of one position each.
void store_transposed(const Geometry& g, __m256 a0, __m256 a1, __m256 a2, __m256 a3, int64_t first,
                      float* dst) {
  // Within each 128-bit half, a 4x4 transpose: r_i = [channel i | channel i + 4].
  const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
  const __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
  const __m256 r[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                       _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
  const int64_t plane = g.OH * g.OW, count = std::min(kLanes, g.OC - first);
  float* d = dst + first * plane;
  for (int i = 0; i < 4 && i < count; ++i)
    _mm_storeu_ps(d + i * plane, _mm256_castps256_ps128(r[i]));
  for (int i = 4; i < count; ++i)
    _mm_storeu_ps(d + i * plane, _mm256_extractf128_ps(r[i - 4], 1));
}

// Pixel blocking: the 4 output positions p .. p + 3 of the flattened plane,
// all channels in OCB vectors. The accumulators are named variables: as an
// array, GCC kept them in memory.
template <int OCB, ConvActivation A>
void four_pixels(const Geometry& g, const float* input, const float* weights, const float* bias,
                 int64_t p, float* out_image) {
  int64_t at[kPixels];  // each position's window origin in the padded plane
  for (int64_t j = 0; j < kPixels; ++j)
    at[j] = ((p + j) / g.OW * g.sh) * g.PW + (p + j) % g.OW * g.sw;
  const int64_t d1 = at[1] - at[0], d2 = at[2] - at[0], d3 = at[3] - at[0];
  const int64_t channels = g.C, kh_count = g.KH, kw_count = g.KW, ocp = g.OCP;
  const int64_t pw = g.PW, ph = g.PH;
  const float* origin = input + at[0];
  const __m256 b0 = _mm256_loadu_ps(bias);
  const __m256 b1 = OCB > 1 ? _mm256_loadu_ps(bias + kLanes) : _mm256_setzero_ps();
  __m256 a00 = b0, a10 = b0, a20 = b0, a30 = b0;
  __m256 a01 = b1, a11 = b1, a21 = b1, a31 = b1;
  const float* w = weights;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kh = 0; kh < kh_count; ++kh) {
      const float* x = origin + (c * ph + kh) * pw;
      for (int64_t kw = 0; kw < kw_count; ++kw, w += ocp, ++x) {
        const __m256 w0 = _mm256_loadu_ps(w);
        const __m256 x0 = _mm256_broadcast_ss(x);
        const __m256 x1 = _mm256_broadcast_ss(x + d1);
        const __m256 x2 = _mm256_broadcast_ss(x + d2);
        const __m256 x3 = _mm256_broadcast_ss(x + d3);
        a00 = _mm256_fmadd_ps(x0, w0, a00);
        a10 = _mm256_fmadd_ps(x1, w0, a10);
        a20 = _mm256_fmadd_ps(x2, w0, a20);
        a30 = _mm256_fmadd_ps(x3, w0, a30);
        if constexpr (OCB > 1) {
          const __m256 w1 = _mm256_loadu_ps(w + kLanes);
          a01 = _mm256_fmadd_ps(x0, w1, a01);
          a11 = _mm256_fmadd_ps(x1, w1, a11);
          a21 = _mm256_fmadd_ps(x2, w1, a21);
          a31 = _mm256_fmadd_ps(x3, w1, a31);
        }
      }
    }
  }
  float* dst = out_image + p;
  store_transposed(g, activate<A>(a00), activate<A>(a10), activate<A>(a20), activate<A>(a30), 0,
                   dst);
  if constexpr (OCB > 1) {
    store_transposed(g, activate<A>(a01), activate<A>(a11), activate<A>(a21), activate<A>(a31),
                     kLanes, dst);
  }
}

// One output position (planes of fewer than 4), channel by channel.
template <int OCB, ConvActivation A>
void one_pixel(const Geometry& g, const float* input, const float* weights, const float* bias,
               int64_t oh, int64_t ow, float* out_image) {
  __m256 acc[2] = {_mm256_loadu_ps(bias),
                   OCB > 1 ? _mm256_loadu_ps(bias + kLanes) : _mm256_setzero_ps()};
  const float* w = weights;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* x = input + (c * g.PH + oh * g.sh + kh) * g.PW + ow * g.sw;
      for (int64_t kw = 0; kw < g.KW; ++kw, w += g.OCP) {
        const __m256 xv = _mm256_broadcast_ss(x + kw);
        for (int b = 0; b < OCB; ++b)
          acc[b] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w + b * kLanes), acc[b]);
      }
    }
  }
  alignas(32) float lanes[2 * kLanes];
  for (int b = 0; b < OCB; ++b)
    _mm256_store_ps(lanes + b * kLanes, activate<A>(acc[b]));
  // OC is at most OCB * kLanes (the caller's choice of OCB); the bound says
  // so to the compiler too, which otherwise sees lanes read past the stores.
  for (int64_t oc = 0; oc < std::min<int64_t>(g.OC, OCB * kLanes); ++oc)
    out_image[oc * g.OH * g.OW + oh * g.OW + ow] = lanes[oc];
}

template <int OCB, ConvActivation A>
void conv_pixels(const Geometry& g, const float* input, const Scratch& s, float* out_image) {
  const int64_t count = g.OH * g.OW;
  if (count < kPixels) {
    for (int64_t p = 0; p < count; ++p)
      one_pixel<OCB, A>(g, input, s.weights.data(), s.bias.data(), p / g.OW, p % g.OW, out_image);
    return;
  }
  for (int64_t p = 0; p < count; p += kPixels) {
    // The last block ends at the plane's end (overlapping the one before).
    four_pixels<OCB, A>(g, input, s.weights.data(), s.bias.data(), std::min(p, count - kPixels),
                        out_image);
  }
}

template <ConvActivation A>
void conv_image(const Geometry& g, const float* input, const Scratch& s, float* out_image) {
  if (use_rows(g)) {
    conv_rows<A>(g, input, s, out_image);
  } else if (g.OCP == kLanes) {
    conv_pixels<1, A>(g, input, s, out_image);
  } else {
    conv_pixels<2, A>(g, input, s, out_image);
  }
}

}  // namespace

bool conv2d_direct_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                               const Conv2dParams& p) {
  if (out.dtype != DType::Float32 || p.groups != 1 || p.dilation[0] != 1 || p.dilation[1] != 1) {
    return false;
  }
  const int64_t OC = out.shape[1], C = x.shape[1];
  const int64_t macs = out.numel() * C * w.shape[2] * w.shape[3];
  return OC <= 2 * kLanes && C > 0 && macs <= kMaxDirectMacs;
}

namespace {

// act in registers, then `after` over each image (residual: of the output's
// shape, contiguous, or null).
void run_direct(const StridedView& out, const StridedView& x, const StridedView& w,
                const StridedView& bias, const Conv2dParams& p, ConvActivation act,
                const float* residual, const ConvEpilogue& after) {
  const Geometry g = geometry_of(out, x, w, p);
  Scratch& packed = scratch();
  pack_weights(g, w, bias, packed);
  const int64_t image_macs = g.OC * g.OH * g.OW * g.C * g.KH * g.KW;
  const int64_t image_size = g.OC * g.OH * g.OW;
  // Images are independent: split them across threads when there is enough
  // work; each thread pads into its own buffer and reads the packed weights.
  parallel_for(g.N, g.N > 1 && g.N * image_macs > (int64_t(1) << 20), [&](int64_t n) {
    std::vector<float>& input = scratch().input;
    // (Row blocks read 8 floats from ow + kw, ow <= OW - 8: within the
    // padded row, so the plane needs no slack.)
    input.resize(size_t(g.C * g.PH * g.PW));
    pad_input(g, x, n, input.data());
    float* out_image = out.ptr<float>() + n * image_size;
    switch (act) {
      case ConvActivation::None:
        conv_image<ConvActivation::None>(g, input.data(), packed, out_image);
        break;
      case ConvActivation::Relu:
        conv_image<ConvActivation::Relu>(g, input.data(), packed, out_image);
        break;
      case ConvActivation::Sigmoid:
        conv_image<ConvActivation::Sigmoid>(g, input.data(), packed, out_image);
        break;
    }
    apply_conv_epilogue_f32(out_image, residual ? residual + n * image_size : nullptr, image_size,
                            after);
  });
}

// The activation the direct kernel applies in registers for `epilogue`
// (relu or sigmoid without a residual), else None.
ConvActivation in_register(const ConvEpilogue& epilogue, bool has_residual) {
  if (has_residual) return ConvActivation::None;
  if (epilogue.activation == EpilogueActivation::Relu) return ConvActivation::Relu;
  if (epilogue.activation == EpilogueActivation::Sigmoid) return ConvActivation::Sigmoid;
  return ConvActivation::None;
}

}  // namespace

void conv2d_direct_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p, ConvActivation act) {
  run_direct(out, x, w, bias, p, act, nullptr, ConvEpilogue{});
}

void conv2d_direct_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                       const StridedView& residual) {
  std::vector<float> residual_copy;
  const float* residual_data =
      residual.data ? contiguous_residual_f32(residual, residual_copy) : nullptr;
  const ConvActivation act = in_register(epilogue, residual_data != nullptr);
  ConvEpilogue after = epilogue;
  if (act != ConvActivation::None) after.activation = EpilogueActivation::None;
  run_direct(out, x, w, bias, p, act, residual_data, after);
}

}  // namespace kiln::cpu
