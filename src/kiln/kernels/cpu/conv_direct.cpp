// A direct float32 convolution for small problems (LeNet's layers at small
// batch), where a oneDNN call's fixed costs (the per-call weight reorder, the
// primitive's setup of its blocked layouts) dominate: bench/kernel_choices.cpp
// sets the two side by side.
//
// Vectorized over output channels: the weights are packed per call as
// [C][KH][KW][OC rounded up to 8] (they may change between calls), the input
// is copied once into a zero-padded plane per channel (no bounds checks in
// the inner loop), and each step of the inner loop broadcasts one input
// value for each of 4 neighbouring output pixels and multiplies it into one
// or two 8-wide vectors of output channels.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kPixels = 4;  // output pixels per register block
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

// Per-thread buffers, reused from call to call.
struct Scratch {
  std::vector<float> weights, bias, input;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void pack_weights(const Geometry& g, const StridedView& w, const StridedView& bias, Scratch& s) {
  s.weights.assign(size_t(g.C * g.KH * g.KW * g.OCP), 0.0f);
  const float* src = w.ptr<const float>();
  for (int64_t oc = 0; oc < g.OC; ++oc) {
    for (int64_t c = 0; c < g.C; ++c) {
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const float v =
              src[oc * w.strides[0] + c * w.strides[1] + kh * w.strides[2] + kw * w.strides[3]];
          s.weights[size_t(((c * g.KH + kh) * g.KW + kw) * g.OCP + oc)] = v;
        }
      }
    }
  }
  s.bias.assign(size_t(g.OCP), 0.0f);
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

// `P` output pixels (ow .. ow + P - 1 of row oh) for all output channels, in
// OCB vectors each: acc[p][b] = bias + sum over c, kh, kw.
// Writes the accumulators of one pixel (OCB vectors of channels) out to
// the NCHW output, channel by channel.
void store_pixel(const Geometry& g, const __m256* acc, int ocb, float* dst) {
  const int64_t plane = g.OH * g.OW;
  alignas(32) float lanes[kLanes];
  for (int b = 0; b < ocb; ++b) {
    _mm256_store_ps(lanes, acc[b]);
    const int64_t first = b * kLanes, count = std::min(kLanes, g.OC - first);
    for (int64_t k = 0; k < count; ++k)
      dst[(first + k) * plane] = lanes[k];
  }
}

// Four output pixels (ow .. ow + 3 of row oh) for all output channels, in
// OCB vectors each. The accumulators are named variables: as an array, GCC
// kept them in memory.
template <int OCB>
void four_pixels(const Geometry& g, const float* input, const float* weights, const float* bias,
                 int64_t oh, int64_t ow, float* out_image) {
  const int64_t channels = g.C, kh_count = g.KH, kw_count = g.KW, ocp = g.OCP;
  const int64_t pw = g.PW, ph = g.PH, sw = g.sw;
  const float* origin = input + (oh * g.sh) * pw + ow * sw;
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
        const __m256 x1 = _mm256_broadcast_ss(x + sw);
        const __m256 x2 = _mm256_broadcast_ss(x + 2 * sw);
        const __m256 x3 = _mm256_broadcast_ss(x + 3 * sw);
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
  float* dst = out_image + oh * g.OW + ow;
  const __m256 p0[2] = {a00, a01}, p1[2] = {a10, a11}, p2[2] = {a20, a21}, p3[2] = {a30, a31};
  store_pixel(g, p0, OCB, dst);
  store_pixel(g, p1, OCB, dst + 1);
  store_pixel(g, p2, OCB, dst + 2);
  store_pixel(g, p3, OCB, dst + 3);
}

// One output pixel (a row's tail).
template <int OCB>
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
  store_pixel(g, acc, OCB, out_image + oh * g.OW + ow);
}

template <int OCB>
void conv_image(const Geometry& g, const float* input, const Scratch& s, float* out_image) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    int64_t ow = 0;
    for (; ow + kPixels <= g.OW; ow += kPixels)
      four_pixels<OCB>(g, input, s.weights.data(), s.bias.data(), oh, ow, out_image);
    if (ow == g.OW) continue;
    if (g.OW >= kPixels) {
      // The row's tail as one more block of four ending at the row's end:
      // the pixels it shares with the block before get the same values again.
      four_pixels<OCB>(g, input, s.weights.data(), s.bias.data(), oh, g.OW - kPixels, out_image);
      continue;
    }
    for (; ow < g.OW; ++ow)
      one_pixel<OCB>(g, input, s.weights.data(), s.bias.data(), oh, ow, out_image);
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

void conv2d_direct_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p) {
  const Geometry g = geometry_of(out, x, w, p);
  Scratch& packed = scratch();
  pack_weights(g, w, bias, packed);
  const int64_t image_macs = g.OC * g.OH * g.OW * g.C * g.KH * g.KW;
  // Images are independent: split them across threads when there is enough
  // work; each thread pads into its own buffer and reads the packed weights.
  parallel_for(g.N, g.N > 1 && g.N * image_macs > (int64_t(1) << 20), [&](int64_t n) {
    std::vector<float>& input = scratch().input;
    input.resize(size_t(g.C * g.PH * g.PW));
    pad_input(g, x, n, input.data());
    float* out_image = out.ptr<float>() + n * g.OC * g.OH * g.OW;
    if (g.OCP == kLanes) {
      conv_image<1>(g, input.data(), packed, out_image);
    } else {
      conv_image<2>(g, input.data(), packed, out_image);
    }
  });
}

}  // namespace kiln::cpu
