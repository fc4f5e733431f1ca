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
// Above this many multiply-adds oneDNN's blocked kernels win.
constexpr int64_t kMaxDirectMacs = int64_t(1) << 23;

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
          const float v = src[oc * w.strides[0] + c * w.strides[1] + kh * w.strides[2] +
                              kw * w.strides[3]];
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
      for (int64_t wi = 0; wi < g.W; ++wi)
        row[wi] = in[wi * x.strides[3]];
    }
  }
}

// `P` output pixels (ow .. ow + P - 1 of row oh) for all output channels, in
// OCB vectors each: acc[p][b] = bias + sum over c, kh, kw.
template <int P, int OCB>
void pixel_block(const Geometry& g, const float* input, const float* weights, const float* bias,
                 int64_t oh, int64_t ow, float* out_image) {
  __m256 acc[P][OCB];
  for (int b = 0; b < OCB; ++b) {
    const __m256 init = _mm256_loadu_ps(bias + b * kLanes);
    for (int p = 0; p < P; ++p)
      acc[p][b] = init;
  }
  const int64_t taps = g.KH * g.KW;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* row = input + (c * g.PH + oh * g.sh + kh) * g.PW + ow * g.sw;
      const float* wrow = weights + (c * taps + kh * g.KW) * g.OCP;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        __m256 wv[OCB];
        for (int b = 0; b < OCB; ++b)
          wv[b] = _mm256_loadu_ps(wrow + kw * g.OCP + b * kLanes);
        for (int p = 0; p < P; ++p) {
          const __m256 xv = _mm256_broadcast_ss(row + p * g.sw + kw);
          for (int b = 0; b < OCB; ++b)
            acc[p][b] = _mm256_fmadd_ps(xv, wv[b], acc[p][b]);
        }
      }
    }
  }
  const int64_t plane = g.OH * g.OW;
  alignas(32) float lanes[kLanes];
  for (int p = 0; p < P; ++p) {
    float* dst = out_image + oh * g.OW + ow + p;
    for (int b = 0; b < OCB; ++b) {
      _mm256_store_ps(lanes, acc[p][b]);
      const int64_t first = b * kLanes, count = std::min(kLanes, g.OC - first);
      for (int64_t k = 0; k < count; ++k)
        dst[(first + k) * plane] = lanes[k];
    }
  }
}

template <int OCB>
void conv_image(const Geometry& g, const float* input, const Scratch& s, float* out_image) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    int64_t ow = 0;
    for (; ow + kPixels <= g.OW; ow += kPixels)
      pixel_block<kPixels, OCB>(g, input, s.weights.data(), s.bias.data(), oh, ow, out_image);
    for (; ow < g.OW; ++ow)
      pixel_block<1, OCB>(g, input, s.weights.data(), s.bias.data(), oh, ow, out_image);
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
