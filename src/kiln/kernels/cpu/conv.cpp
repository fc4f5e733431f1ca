#include "kiln/kernels/cpu/conv.h"

#include <memory>
#include <mutex>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/onednn.h"

namespace kiln::cpu {
namespace {

template <typename T>
void conv2d_reference_typed(const StridedView& out, const StridedView& x, const StridedView& w,
                            const StridedView& bias, const Conv2dParams& p) {
  const int64_t N = out.shape[0], OC = out.shape[1], OH = out.shape[2], OW = out.shape[3];
  const int64_t H = x.shape[2], W = x.shape[3];
  const int64_t icg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t ocg = OC / p.groups;
  const int64_t* xs = x.strides;
  const int64_t* ws = w.strides;
  const bool work_is_large = out.numel() * icg * KH * KW > kParallelGrain;
#pragma omp parallel for if (work_is_large)
  for (int64_t plane = 0; plane < N * OC; ++plane) {
    const int64_t n = plane / OC, oc = plane % OC, first_ic = (oc / ocg) * icg;
    const T init = bias.data ? bias.ptr<const T>()[oc * bias.strides[0]] : T(0);
    T* dst = out.ptr<T>() + plane * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        T acc = init;
        for (int64_t ic = 0; ic < icg; ++ic) {
          const T* src = x.ptr<const T>() + n * xs[0] + (first_ic + ic) * xs[1];
          const T* ker = w.ptr<const T>() + oc * ws[0] + ic * ws[1];
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
              if (iw < 0 || iw >= W) continue;
              acc += src[ih * xs[2] + iw * xs[3]] * ker[kh * ws[2] + kw * ws[3]];
            }
          }
        }
        dst[oh * OW + ow] = acc;
      }
    }
  }
}

using dims = dnnl::memory::dims;

// What a oneDNN convolution is created from (shapes, bias, geometry).
struct ConvGeometry {
  dims src, weights, dst;
  bool has_bias = false;
  Conv2dParams params;
};

ConvGeometry conv_geometry(const StridedView& out, const StridedView& x, const StridedView& w,
                           const StridedView& bias, const Conv2dParams& p) {
  const int64_t G = p.groups, OC = w.shape[0];
  ConvGeometry g;
  g.src = dims(x.shape, x.shape + 4);
  g.dst = dims(out.shape, out.shape + 4);
  g.weights =
      G > 1 ? dims{G, OC / G, w.shape[1], w.shape[2], w.shape[3]} : dims(w.shape, w.shape + 4);
  g.has_bias = bias.data != nullptr;
  g.params = p;
  return g;
}

onednn::Key key_of(const ConvGeometry& g) {
  const Conv2dParams& p = g.params;
  onednn::Key key;
  key.add(g.src.data(), 4).add(g.weights.data(), int(g.weights.size())).add(g.dst.data(), 4);
  key.add(p.groups).add(g.has_bias);
  key.add(p.stride, 2).add(p.padding, 2).add(p.dilation, 2);
  return key;
}

// A convolution primitive plus what it needs around it: the layouts it
// chose (format `any`) and the reorders from and to kiln's plain NCHW ones.
struct ConvEntry {
  dnnl::convolution_forward conv;
  dnnl::memory::desc bias;
  dnnl::memory::desc scratchpad;
  onednn::Reorder weights, src, dst;
};

onednn::PrimitiveCache<ConvEntry>& conv_cache() {
  static onednn::PrimitiveCache<ConvEntry> cache;
  return cache;
}

// oneDNN's blocked layouts for source, destination and weights, with a
// reorder of each per call (weights: once per version in a Conv2dPlan),
// where they pay: on this machine (1 thread) its blocked kernels ran
// ResNet-18's 3x3 and 7x7 layers 1.3-1.7x faster than im2col + GEMM on
// NCHW, source and destination reorders included, but a 1x1 layer gained
// less than its reorders cost. The per-call weight reorder of eager calls
// is paid back only over enough output pixels: a 256x256x3x3 layer at
// 14x14 (196 pixels) gained 14% with it, a 512x512x3x3 one at 7x7 (49)
// lost 48%. The choice depends on the geometry only, so eager calls and
// compiled plans take the same kernel and give the same bits.
constexpr int64_t kMinBlockedPixels = 64;

bool wants_blocked_layout(const ConvGeometry& g) {
  const int64_t taps = g.weights[g.weights.size() - 2] * g.weights.back();
  const int64_t pixels = g.dst[0] * g.dst[2] * g.dst[3];
  return g.params.groups == 1 && taps > 1 && pixels >= kMinBlockedPixels;
}

ConvEntry make_conv(const ConvGeometry& g, bool blocked) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const Conv2dParams& p = g.params;
  ConvEntry entry;
  const dnnl::memory::desc user_src(g.src, f32, tag::nchw), user_dst(g.dst, f32, tag::nchw);
  const dnnl::memory::desc user_wei(g.weights, f32, p.groups > 1 ? tag::goihw : tag::oihw);
  const dnnl::memory::desc any_wei(g.weights, f32, tag::any);
  const dnnl::memory::desc src = blocked ? dnnl::memory::desc(g.src, f32, tag::any) : user_src;
  const dnnl::memory::desc dst = blocked ? dnnl::memory::desc(g.dst, f32, tag::any) : user_dst;
  if (g.has_bias) entry.bias = dnnl::memory::desc({g.dst[1]}, f32, tag::x);
  // oneDNN counts dilation from 0 (no gap), PyTorch from 1.
  dims strides{p.stride[0], p.stride[1]}, dilation{p.dilation[0] - 1, p.dilation[1] - 1};
  dims pad_l{p.padding[0], p.padding[1]};
  // Right padding that makes oneDNN's output-size formula give dst's size.
  dims pad_r(2);
  for (size_t i = 0; i < 2; ++i) {
    int64_t eff_kernel = (g.weights[g.weights.size() - 2 + i] - 1) * p.dilation[i] + 1;
    pad_r[i] = (g.dst[2 + i] - 1) * p.stride[i] + eff_kernel - g.src[2 + i] - p.padding[i];
  }
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::convolution_direct, src, any_wei,
                                       entry.bias, dst, strides, dilation, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, onednn::default_attr(), onednn::engine());
  entry.conv = dnnl::convolution_forward(pd);
  entry.scratchpad = pd.scratchpad_desc();
  entry.weights = onednn::Reorder(user_wei, pd.weights_desc());
  entry.src = onednn::Reorder(user_src, pd.src_desc());
  entry.dst = onednn::Reorder(pd.dst_desc(), user_dst);
  return entry;
}

// Runs the convolution; `packed` holds the weights already in the
// primitive's layout, or is empty (they are reordered now, into a
// per-thread buffer: they may change between calls).
void execute_conv(const ConvEntry& entry, const StridedView& out, const StridedView& x,
                  const StridedView& w, const StridedView& bias,
                  const dnnl::memory& packed = dnnl::memory()) {
  using onednn::ReorderSlot;
  std::vector<float> x_copy, w_copy, bias_copy;
  const float* x_data = onednn::dense_f32(x, x_copy);
  const float* bias_data = bias.data ? onednn::dense_f32(bias, bias_copy) : nullptr;
  dnnl::memory weights = packed;
  if (!weights) weights = entry.weights.run(onednn::dense_f32(w, w_copy), ReorderSlot::Weights);
  dnnl::memory src = entry.src.run(x_data, ReorderSlot::Source);
  dnnl::memory dst = entry.dst.needed()
                         ? onednn::reorder_buffer(entry.dst.from(), ReorderSlot::Destination)
                         : onednn::wrap(entry.dst.to(), out.data);
  onednn::execute(entry.conv, {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_WEIGHTS, weights},
                               {DNNL_ARG_DST, dst},
                               {DNNL_ARG_BIAS,
                                bias_data ? onednn::wrap(entry.bias, bias_data) : dnnl::memory()},
                               {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
  if (entry.dst.needed()) entry.dst.run_into(dst, out.data);
}

// conv2d() takes the loop where oneDNN cannot: float64, or zero input
// channels (the loop gives bias, or 0, there).
bool needs_reference(const StridedView& out, const StridedView& w) {
  return out.dtype != DType::Float32 || w.shape[1] == 0;
}

}  // namespace

void conv2d_reference(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv2dParams& p) {
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    conv2d_reference_typed<T>(out, x, w, bias, p);
  });
}

void conv2d_onednn_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p) {
  const ConvGeometry g = conv_geometry(out, x, w, bias, p);
  onednn::guarded("conv2d", [&] {
    ConvEntry entry =
        conv_cache().get(key_of(g), [&] { return make_conv(g, wants_blocked_layout(g)); });
    execute_conv(entry, out, x, w, bias);
  });
}

// The plan's primitive, and its weights packed into the primitive's layout
// at a version of the weight tensor (see run_packed).
struct Conv2dPlan::OneDnn {
  struct Packed {
    uint64_t version = 0;
    dnnl::memory weights;
  };
  ConvEntry entry;
  mutable std::mutex mutex;
  mutable std::shared_ptr<const Packed> packed;

  // The weights at `version`, reordered now if the copy is older. A copy
  // another call may still read is left to it and a new one made.
  std::shared_ptr<const Packed> packed_at(const StridedView& w, uint64_t version) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (packed && packed->version == version) return packed;
    auto fresh = std::make_shared<Packed>();
    fresh->version = version;
    fresh->weights = dnnl::memory(entry.weights.to(), onednn::engine());
    std::vector<float> w_copy;
    entry.weights.run_into(onednn::wrap(entry.weights.from(), onednn::dense_f32(w, w_copy)),
                           fresh->weights);
    packed = fresh;
    return packed;
  }
};

Conv2dPlan::Conv2dPlan(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p)
    : params_(p), empty_(out.numel() == 0) {
  if (empty_ || needs_reference(out, w)) return;
  depthwise_ = conv2d_depthwise_f32_applies(out, x, w, p);
  direct_ = !depthwise_ && conv2d_direct_f32_applies(out, x, w, p);
  if (depthwise_ || direct_) return;
  auto state = std::make_unique<OneDnn>();
  const ConvGeometry g = conv_geometry(out, x, w, bias, p);
  onednn::guarded("conv2d", [&] { state->entry = make_conv(g, wants_blocked_layout(g)); });
  onednn_ = std::move(state);
}

Conv2dPlan::~Conv2dPlan() = default;

void Conv2dPlan::run(const StridedView& out, const StridedView& x, const StridedView& w,
                     const StridedView& bias) const {
  if (empty_) return;
  if (depthwise_) {
    conv2d_depthwise_f32(out, x, w, bias, params_, relu_);
    return;
  }
  if (direct_) {
    conv2d_direct_f32(out, x, w, bias, params_,
                      relu_ ? ConvActivation::Relu : ConvActivation::None);
    return;
  }
  if (!onednn_) {
    conv2d_reference(out, x, w, bias, params_);
    return;
  }
  onednn::guarded("conv2d", [&] { execute_conv(onednn_->entry, out, x, w, bias); });
}

bool Conv2dPlan::take_relu() {
  relu_ = !empty_ && (depthwise_ || direct_);
  return relu_;
}

bool Conv2dPlan::packs_weights() const {
  return onednn_ && onednn_->entry.weights.needed();
}

void Conv2dPlan::run_packed(const StridedView& out, const StridedView& x, const StridedView& w,
                            const StridedView& bias, uint64_t version) const {
  if (!packs_weights()) {
    run(out, x, w, bias);
    return;
  }
  onednn::guarded("conv2d", [&] {
    std::shared_ptr<const OneDnn::Packed> packed = onednn_->packed_at(w, version);
    execute_conv(onednn_->entry, out, x, w, bias, packed->weights);
  });
}

void conv2d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  if (needs_reference(out, w)) {
    conv2d_reference(out, x, w, bias, p);
    return;
  }
  if (conv2d_depthwise_f32_applies(out, x, w, p)) {
    conv2d_depthwise_f32(out, x, w, bias, p);
    return;
  }
  if (conv2d_direct_f32_applies(out, x, w, p)) {
    conv2d_direct_f32(out, x, w, bias, p);
    return;
  }
  conv2d_onednn_f32(out, x, w, bias, p);
}

}  // namespace kiln::cpu
