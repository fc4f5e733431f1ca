// Convolutions with few output pixels per filter weight, as one product in
// kiln's GEMM (gemm_f32.h) with the filters as its packed b:
//   out^T[pixel, oc] = patches[pixel, :] · w^T[:, oc]
// The filters fill whole 16-column panels, where the other way round (the
// pixels as columns) would fill 4 or 8 lanes of 16. Two kinds:
//
//  - frames: a 1-D convolution of one input channel with a long kernel, an
//    STFT written as a convolution (openwakeword's melspectrogram: 257
//    filters of 512 taps at a hop of 160; silero VAD's: 258 of 256 at 64).
//    The patch of output t is x[t * hop .. t * hop + K), a row of the
//    signal, so the patches are the rows of a matrix whose row stride is
//    the hop (rows overlap; nothing is copied). oneDNN ran the
//    melspectrogram's as im2col + GEMM in 65 us, this in 24 (one thread).
//  - patches: spatial kernels over at most 16 output pixels (silero VAD's
//    encoder: 129 -> 128 channels, 3 taps, 4 pixels), where oneDNN's fixed
//    costs dominate: the patches (C x KH x KW each, zero where they cross
//    the padding) are copied into a small buffer first. 29.5 us to 6 for
//    silero's largest layer.
//
// The product is transposed into the NCHW output at the end (a few KiB).
// A compiled plan packs w^T once per version of the weight; eager calls
// pack it per call. Both give the same bits (gemm_f32's sums run in the
// same order either way), so eager and compiled agree.
#include <algorithm>
#include <mutex>
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/gemm_f32.h"

namespace kiln::cpu {
namespace {

// frames: below this many taps the frames do not overlap enough for the
// product to pay.
constexpr int64_t kMinFrameTaps = 32;
constexpr int64_t kMinFrameFilters = 8;
// patches: up to 16 output pixels (oneDNN's blocked kernels want 64), more
// filters than kiln's direct kernel takes (16), spatial kernels only (1x1
// convolutions over one pixel are squeeze-and-excitation layers, which
// other kernels own).
constexpr int64_t kMaxPatchPixels = 16;
constexpr int64_t kMinPatchFilters = 17;
constexpr int64_t kMinPatchLength = 16;

bool frames_geometry(const int64_t* out, const int64_t* x, const int64_t* w,
                     const Conv2dParams& p) {
  return p.groups == 1 && x[1] == 1 && x[2] == 1 && w[2] == 1 && out[2] == 1 && p.padding[0] == 0 &&
         p.padding[1] == 0 && p.dilation[1] == 1 && w[3] >= kMinFrameTaps &&
         w[0] >= kMinFrameFilters;
}

bool patches_geometry(const int64_t* out, const int64_t* w, const Conv2dParams& p) {
  return p.groups == 1 && out[2] * out[3] <= kMaxPatchPixels && w[0] >= kMinPatchFilters &&
         w[2] * w[3] > 1 && w[1] * w[2] * w[3] >= kMinPatchLength;
}

// The stride of k = (c, kh, kw) flattened through w[oc, c, kh, kw], when
// one stride walks it; 0 when not.
int64_t flat_k_stride(const StridedView& w) {
  const int64_t s = w.strides[3];
  if (w.shape[2] > 1 && w.strides[2] != w.shape[3] * s) return 0;
  if (w.shape[1] > 1 && w.strides[1] != w.shape[2] * w.shape[3] * s) return 0;
  return s;
}

// b[k][oc] = w[oc, k] with k = (c, kh, kw). Weights whose k one stride does
// not walk (applies() refuses them, but a plan made for other strides may
// meet them) are copied into `storage` first.
GemmB weights_as_b(const StridedView& w, std::vector<float>& storage) {
  const int64_t K = w.shape[1] * w.shape[2] * w.shape[3];
  if (flat_k_stride(w) != 0)
    return GemmB{w.ptr<const float>(), K, w.shape[0], flat_k_stride(w), w.strides[0]};
  storage.resize(size_t(w.shape[0] * K));
  float* dst = storage.data();
  for (int64_t oc = 0; oc < w.shape[0]; ++oc)
    for (int64_t c = 0; c < w.shape[1]; ++c)
      for (int64_t kh = 0; kh < w.shape[2]; ++kh)
        for (int64_t kw = 0; kw < w.shape[3]; ++kw)
          *dst++ = w.ptr<const float>()[oc * w.strides[0] + c * w.strides[1] + kh * w.strides[2] +
                                        kw * w.strides[3]];
  return GemmB{storage.data(), K, w.shape[0], 1, K};
}

const float* contiguous_bias(const StridedView& bias, std::vector<float>& storage) {
  if (!bias.data) return nullptr;
  if (bias.strides[0] == 1) return bias.ptr<const float>();
  storage.resize(size_t(bias.shape[0]));
  for (int64_t i = 0; i < bias.shape[0]; ++i)
    storage[size_t(i)] = bias.ptr<const float>()[i * bias.strides[0]];
  return storage.data();
}

bool is_frames(const StridedView& out, const StridedView& x, const StridedView& w,
               const Conv2dParams& p) {
  return x.strides[3] == 1 && frames_geometry(out.shape, x.shape, w.shape, p);
}

// Every image's patches, [N * OH * OW][C * KH * KW], zero where a tap falls
// in the padding.
void gather_patches(const StridedView& x, const StridedView& w, const StridedView& out,
                    const Conv2dParams& p, std::vector<float>& patches) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t KH = w.shape[2], KW = w.shape[3], OH = out.shape[2], OW = out.shape[3];
  const int64_t K = C * KH * KW;
  patches.assign(size_t(N * OH * OW * K), 0.0f);
  const float* src = x.ptr<const float>();
  const int64_t* xs = x.strides;
  float* row = patches.data();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow, row += K) {
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= H) continue;
            const float* line = src + n * xs[0] + c * xs[1] + ih * xs[2];
            float* dst = row + (c * KH + kh) * KW;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
              if (iw >= 0 && iw < W) dst[kw] = line[iw * xs[3]];
            }
          }
        }
      }
    }
  }
}

// The product for every image, then the epilogue. `product` runs one GEMM
// into rows [pixel][oc].
template <typename Product>
void run_gemm_conv(const StridedView& out, const StridedView& x, const StridedView& w,
                   const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                   const StridedView& residual, Product&& product) {
  const int64_t N = out.shape[0], OC = out.shape[1], P = out.shape[2] * out.shape[3];
  thread_local std::vector<float> transposed, bias_storage, patches;
  transposed.resize(size_t(N * P * OC));
  GemmRows rows;
  rows.out = transposed.data();
  rows.out_row_stride = OC;
  rows.bias = contiguous_bias(bias, bias_storage);
  if (is_frames(out, x, w, p)) {
    rows.a_row_stride = p.stride[1];
    rows.m = P;
    for (int64_t n = 0; n < N; ++n) {
      rows.a = x.ptr<const float>() + n * x.strides[0];
      rows.out = transposed.data() + n * P * OC;
      product(rows);
    }
  } else {
    gather_patches(x, w, out, p, patches);
    rows.a = patches.data();
    rows.a_row_stride = w.shape[1] * w.shape[2] * w.shape[3];
    rows.m = N * P;
    product(rows);
  }
  float* dst = out.ptr<float>();
  for (int64_t n = 0; n < N; ++n) {
    const float* image = transposed.data() + n * P * OC;
    for (int64_t oc = 0; oc < OC; ++oc) {
      for (int64_t t = 0; t < P; ++t)
        dst[(n * OC + oc) * P + t] = image[t * OC + oc];
    }
  }
  apply_conv_epilogue(out, residual, epilogue);
}

}  // namespace

bool conv2d_frames_geometry(const int64_t* out, const int64_t* x, const int64_t* w,
                            const Conv2dParams& p) {
  return frames_geometry(out, x, w, p);
}

bool conv2d_gemm_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                             const Conv2dParams& p) {
  if (out.dtype != DType::Float32 || p.channels_last || out.numel() == 0) return false;
  if (flat_k_stride(w) == 0) return false;
  return is_frames(out, x, w, p) || patches_geometry(out.shape, w.shape, p);
}

void conv2d_gemm_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                     const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                     const StridedView& residual) {
  thread_local std::vector<float> storage;
  const GemmB b = weights_as_b(w, storage);
  run_gemm_conv(out, x, w, bias, p, epilogue, residual,
                [&](const GemmRows& rows) { gemm_f32(rows, b); });
}

struct GemmConvPack {
  std::mutex mutex;
  std::shared_ptr<const PackedB> packed;
  uint64_t version = 0;

  // w^T packed at `version`; a copy another call may still read is left
  // to it and a new one made.
  std::shared_ptr<const PackedB> at(const StridedView& w, uint64_t at_version) {
    std::lock_guard<std::mutex> lock(mutex);
    if (packed && version == at_version) return packed;
    auto fresh = std::make_shared<PackedB>();
    std::vector<float> storage;
    fresh->pack(weights_as_b(w, storage));
    packed = fresh;
    version = at_version;
    return packed;
  }
};

std::shared_ptr<GemmConvPack> make_gemm_conv_pack() {
  return std::make_shared<GemmConvPack>();
}

void conv2d_gemm_f32_packed(GemmConvPack& pack, uint64_t version, const StridedView& out,
                            const StridedView& x, const StridedView& w, const StridedView& bias,
                            const Conv2dParams& p, const ConvEpilogue& epilogue,
                            const StridedView& residual) {
  const std::shared_ptr<const PackedB> b = pack.at(w, version);
  run_gemm_conv(out, x, w, bias, p, epilogue, residual,
                [&](const GemmRows& rows) { gemm_f32_packed(rows, *b); });
}

}  // namespace kiln::cpu
