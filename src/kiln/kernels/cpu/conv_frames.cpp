// A 1-D convolution of one input channel with a long kernel: an STFT written
// as a convolution (openwakeword's melspectrogram: 257 filters of 512 taps
// at a hop of 160; silero VAD's: 258 of 128 at 64). Each output frame t
// reads the taps x[t * hop .. t * hop + K), a row of the signal, so the
// frames are the rows of a matrix whose row stride is the hop (rows overlap;
// nothing is copied), and the convolution is the product
//   out^T[t, oc] = frames[t, :] · w^T[:, oc]
// in kiln's GEMM (gemm_f32.h) with w^T as its packed b: the filters fill
// whole 16-column panels, where the other way round (frames as columns)
// would fill 8 of 16 lanes for 8 frames. oneDNN ran these as im2col + GEMM
// at about a third of this speed (65 us against 24 for the 257 x 512 one
// over 8 frames, one thread). The product is transposed into the NCHW
// output at the end (a few KiB).
//
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

// Below this many taps the direct and oneDNN kernels keep the convolution:
// the frames do not overlap enough for the product to pay.
constexpr int64_t kMinFrameTaps = 32;
constexpr int64_t kMinFrameFilters = 8;

GemmB weights_as_b(const StridedView& w) {
  // b[k][oc] = w[oc, 0, 0, k]
  return GemmB{w.ptr<const float>(), w.shape[3], w.shape[0], w.strides[3], w.strides[0]};
}

const float* contiguous_bias(const StridedView& bias, std::vector<float>& storage) {
  if (!bias.data) return nullptr;
  if (bias.strides[0] == 1) return bias.ptr<const float>();
  storage.resize(size_t(bias.shape[0]));
  for (int64_t i = 0; i < bias.shape[0]; ++i)
    storage[size_t(i)] = bias.ptr<const float>()[i * bias.strides[0]];
  return storage.data();
}

// The product for every image, then the epilogue. `product` runs one image's
// GEMM into rows [t][oc].
template <typename Product>
void run_frames(const StridedView& out, const StridedView& x, const StridedView& bias,
                const Conv2dParams& p, const ConvEpilogue& epilogue, const StridedView& residual,
                Product&& product) {
  const int64_t N = out.shape[0], OC = out.shape[1], OW = out.shape[3];
  thread_local std::vector<float> transposed, bias_storage;
  transposed.resize(size_t(OW * OC));
  GemmRows rows;
  rows.out = transposed.data();
  rows.out_row_stride = OC;
  rows.a_row_stride = p.stride[1];
  rows.bias = contiguous_bias(bias, bias_storage);
  rows.m = OW;
  float* dst = out.ptr<float>();
  for (int64_t n = 0; n < N; ++n) {
    rows.a = x.ptr<const float>() + n * x.strides[0];
    product(rows);
    float* image = dst + n * OC * OW;
    for (int64_t oc = 0; oc < OC; ++oc) {
      for (int64_t t = 0; t < OW; ++t)
        image[oc * OW + t] = transposed[size_t(t * OC + oc)];
    }
  }
  apply_conv_epilogue(out, residual, epilogue);
}

}  // namespace

bool conv2d_frames_geometry(const int64_t* out, const int64_t* x, const int64_t* w,
                            const Conv2dParams& p) {
  return p.groups == 1 && x[1] == 1 && x[2] == 1 && w[2] == 1 && out[2] == 1 && p.padding[0] == 0 &&
         p.padding[1] == 0 && p.dilation[1] == 1 && w[3] >= kMinFrameTaps &&
         w[0] >= kMinFrameFilters;
}

bool conv2d_frames_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                               const Conv2dParams& p) {
  return out.dtype == DType::Float32 && !p.channels_last && out.numel() > 0 && x.strides[3] == 1 &&
         conv2d_frames_geometry(out.shape, x.shape, w.shape, p);
}

void conv2d_frames_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                       const StridedView& residual) {
  const GemmB b = weights_as_b(w);
  run_frames(out, x, bias, p, epilogue, residual, [&](const GemmRows& rows) { gemm_f32(rows, b); });
}

struct FramesPack {
  std::mutex mutex;
  std::shared_ptr<const PackedB> packed;
  uint64_t version = 0;

  // w^T packed at `version`; a copy another call may still read is left
  // to it and a new one made.
  std::shared_ptr<const PackedB> at(const StridedView& w, uint64_t at_version) {
    std::lock_guard<std::mutex> lock(mutex);
    if (packed && version == at_version) return packed;
    auto fresh = std::make_shared<PackedB>();
    fresh->pack(weights_as_b(w));
    packed = fresh;
    version = at_version;
    return packed;
  }
};

std::shared_ptr<FramesPack> make_frames_pack() {
  return std::make_shared<FramesPack>();
}

void conv2d_frames_f32_packed(FramesPack& pack, uint64_t version, const StridedView& out,
                              const StridedView& x, const StridedView& w, const StridedView& bias,
                              const Conv2dParams& p, const ConvEpilogue& epilogue,
                              const StridedView& residual) {
  const std::shared_ptr<const PackedB> b = pack.at(w, version);
  run_frames(out, x, bias, p, epilogue, residual,
             [&](const GemmRows& rows) { gemm_f32_packed(rows, *b); });
}

}  // namespace kiln::cpu
