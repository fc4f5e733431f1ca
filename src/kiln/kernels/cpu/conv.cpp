#include "kiln/kernels/cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>

#include "kiln/kernels/cpu/copy.h"
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
  ConvEpilogue epilogue;
};

ConvGeometry conv_geometry(const StridedView& out, const StridedView& x, const StridedView& w,
                           const StridedView& bias, const Conv2dParams& p,
                           const ConvEpilogue& epilogue = {}) {
  const int64_t G = p.groups, OC = w.shape[0];
  ConvGeometry g;
  g.src = dims(x.shape, x.shape + 4);
  g.dst = dims(out.shape, out.shape + 4);
  if (p.channels_last) {  // oneDNN's dims are NCHW whatever the layout
    g.src = {x.shape[0], x.shape[3], x.shape[1], x.shape[2]};
    g.dst = {out.shape[0], out.shape[3], out.shape[1], out.shape[2]};
  }
  g.weights =
      G > 1 ? dims{G, OC / G, w.shape[1], w.shape[2], w.shape[3]} : dims(w.shape, w.shape + 4);
  g.has_bias = bias.data != nullptr;
  g.params = p;
  g.epilogue = epilogue;
  return g;
}

onednn::Key key_of(const ConvGeometry& g) {
  const Conv2dParams& p = g.params;
  onednn::Key key;
  key.add(g.src.data(), 4).add(g.weights.data(), int(g.weights.size())).add(g.dst.data(), 4);
  key.add(p.groups).add(g.has_bias);
  key.add(p.stride, 2).add(p.padding, 2).add(p.dilation, 2).add(p.channels_last);
  const ConvEpilogue& e = g.epilogue;
  key.add(int64_t(e.activation)).add(e.residual).add_double(e.alpha).add_double(e.beta);
  key.add_double(e.scale_after).add_double(e.shift_after);
  return key;
}

// A convolution primitive plus what it needs around it: the layouts it
// chose (format `any`) and the reorders from and to kiln's plain NCHW ones.
struct ConvEntry {
  dnnl::convolution_forward conv;
  dnnl::memory::desc bias;
  dnnl::memory::desc scratchpad;
  onednn::Reorder weights, src, dst;
  // The epilogue: the residual goes into the destination before the
  // primitive runs (its `sum` post-op adds it; `residual` reorders it into
  // a blocked destination), and `after` is what the post-ops could not do,
  // applied by kiln's epilogue over the output.
  bool sums_residual = false;
  onednn::Reorder residual;
  ConvEpilogue after;
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

// Winograd's algorithm for 3x3 stride-1 convolutions, in channels-last
// chains only (conv2d_fused {layout=nhwc}, which inference graphs get
// unless exact; eager conv2d and NCHW graphs keep the direct algorithm):
// oneDNN 2.6's F(2x2, 3x3) kernel does 2.25x fewer multiplications and ran
// ResNet-18's layers (64, 256, 512 channels at 56x56, 14x14, 7x7, one
// thread) in 0.5-0.75 of brgconv's time, reorders to and from nChw16c
// included, where brgconv already runs at the FMA peak. It rounds
// differently (sums of transformed tiles; an infinite input gives NaN
// where a direct sum may give inf): ResNet-18's logits stayed within 3e-6
// of PyTorch's, as close as the direct kernels. Channels in multiples of
// 16 (nChw16c without padding) and at least 16 output pixels: at 2x2 it
// ran 2.6x slower.
constexpr int64_t kMinWinogradPixels = 16;

bool runs_winograd(const ConvGeometry& g) {
  const Conv2dParams& p = g.params;
  const int64_t pixels = g.dst[0] * g.dst[2] * g.dst[3];
  return p.channels_last && g.weights.size() == 4 && g.weights[2] == 3 && g.weights[3] == 3 &&
         p.stride[0] == 1 && p.stride[1] == 1 && p.dilation[0] == 1 && p.dilation[1] == 1 &&
         p.groups == 1 && g.src[1] % 16 == 0 && g.dst[1] % 16 == 0 && pixels >= kMinWinogradPixels;
}

// The epilogue as oneDNN post-ops, in order: the residual as `sum` (a
// `binary_add` reading kiln's NCHW residual would spare its reorder into
// the blocked destination, but oneDNN 2.6 then gives up its blocked
// kernels for im2col + GEMM on NCHW: ResNet-18's 64-channel 3x3 layer ran
// 5.6x slower), then the
// activation as eltwise ops where oneDNN 2.6 has them (hardsigmoid as
// linear then clip; hardswish only with PyTorch's constants, 1/6 and 1/2,
// oneDNN's fixed form), then the scale and shift after it as linear. What
// they leave out goes into `after`. oneDNN's
// eltwise functions round differently from kiln's (within float32
// tolerance): the fused op is made only where rounding may change.
dnnl::post_ops post_ops_for(const ConvEpilogue& e, ConvEpilogue& after) {
  using alg = dnnl::algorithm;
  using E = EpilogueActivation;
  dnnl::post_ops ops;
  if (e.residual) ops.append_sum(1.0f);
  const float alpha = float(e.alpha), beta = float(e.beta);
  switch (e.activation) {
    case E::None:
      break;
    case E::Relu:
      ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
      break;
    case E::Clamp:
      ops.append_eltwise(1.0f, alg::eltwise_clip_v2, alpha, beta);
      break;
    case E::HardSigmoid:
      ops.append_eltwise(1.0f, alg::eltwise_linear, alpha, beta);
      ops.append_eltwise(1.0f, alg::eltwise_clip_v2, 0.0f, 1.0f);
      break;
    case E::HardSwish:
      if (alpha == 1.0f / 6.0f && beta == 0.5f) {
        ops.append_eltwise(1.0f, alg::eltwise_hardswish, 0.0f, 0.0f);
      } else {
        after.activation = e.activation;
        after.alpha = e.alpha;
        after.beta = e.beta;
      }
      break;
    case E::Sigmoid:
      ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
      break;
    case E::Silu:
      ops.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f);
      break;
    case E::Tanh:
      ops.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f);
      break;
    case E::LeakyRelu:  // oneDNN's relu has a negative slope; the floor: clip
      ops.append_eltwise(1.0f, alg::eltwise_relu, alpha, 0.0f);
      if (!std::isinf(e.beta)) {
        ops.append_eltwise(1.0f, alg::eltwise_clip_v2, beta,
                           std::numeric_limits<float>::infinity());
      }
      break;
  }
  if (!e.has_affine_after()) return ops;
  if (after.activation != E::None) {  // it must follow the activation left out
    after.scale_after = e.scale_after;
    after.shift_after = e.shift_after;
  } else {
    ops.append_eltwise(1.0f, alg::eltwise_linear, float(e.scale_after), float(e.shift_after));
  }
  return ops;
}

// Winograd's F(2x2, 3x3) only: oneDNN's F(4x4, 3x3) kernel (jit_wino_4x3,
// which it picks for some geometries) was 10x further from the exact sum
// than the direct kernels (128 channels at 12x12: 2.3e-4 on outputs of 25),
// F(2x2, 3x3) about as close. Throws when there is none for the geometry.
void skip_to_small_tiles(dnnl::convolution_forward::primitive_desc& pd) {
  while (std::string_view(pd.impl_info_str()).find("wino_4x3") != std::string_view::npos) {
    if (!pd.next_impl()) throw dnnl::error(dnnl_unimplemented, "no F(2x2, 3x3) kernel");
  }
}

ConvEntry make_conv(const ConvGeometry& g, bool blocked, bool with_post_ops = true,
                    bool winograd = false) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const Conv2dParams& p = g.params;
  ConvEntry entry;
  const tag layout = p.channels_last ? tag::nhwc : tag::nchw;
  const dnnl::memory::desc user_src(g.src, f32, layout), user_dst(g.dst, f32, layout);
  const dnnl::memory::desc user_wei(g.weights, f32, p.groups > 1 ? tag::goihw : tag::oihw);
  const dnnl::memory::desc any_wei(g.weights, f32, tag::any);
  // Channels-last is the layout `any` picks here: no reorder at all.
  // Winograd's kernels take oneDNN's nChw16c (`any`): reordered in and out.
  const bool any = (blocked && !p.channels_last) || winograd;
  const dnnl::memory::desc src = any ? dnnl::memory::desc(g.src, f32, tag::any) : user_src;
  const dnnl::memory::desc dst = any ? dnnl::memory::desc(g.dst, f32, tag::any) : user_dst;
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
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct, src,
      any_wei, entry.bias, dst, strides, dilation, pad_l, pad_r);
  dnnl::primitive_attr attr = onednn::default_attr();
  if (with_post_ops) {
    attr.set_post_ops(post_ops_for(g.epilogue, entry.after));
    entry.sums_residual = g.epilogue.residual;
  } else {
    entry.after = g.epilogue;
  }
  dnnl::convolution_forward::primitive_desc pd(desc, attr, onednn::engine());
  if (winograd) skip_to_small_tiles(pd);
  entry.conv = dnnl::convolution_forward(pd);
  entry.scratchpad = pd.scratchpad_desc();
  entry.weights = onednn::Reorder(user_wei, pd.weights_desc());
  entry.src = onednn::Reorder(user_src, pd.src_desc());
  entry.dst = onednn::Reorder(pd.dst_desc(), user_dst);
  if (entry.sums_residual) entry.residual = onednn::Reorder(user_dst, pd.dst_desc());
  return entry;
}

// make_conv with the epilogue in post-ops where they pay: on the blocked
// layouts, whose jit kernels apply them as they store. On plain NCHW oneDNN
// 2.6 runs a convolution as im2col + GEMM and applies eltwise post-ops
// element by element afterwards: on MobileNetV3's 1x1 layers (16 -> 72
// channels at 56x56, 40 -> 240 at 14x14, one thread) relu made the call 5x
// slower, hardswish 14x, hardsigmoid 20x, where kiln's epilogue over the
// output costs a few percent. So there (and should oneDNN refuse the
// post-ops for a geometry) kiln's epilogue does it all.
ConvEntry make_fused_conv(const ConvGeometry& g) {
  // Channels-last runs oneDNN's jit kernels, which apply post-ops as they
  // store, whatever the geometry.
  const bool blocked = g.params.channels_last || wants_blocked_layout(g);
  const bool with_post_ops = blocked || g.epilogue.empty();
  if (runs_winograd(g)) {
    for (bool post_ops : {with_post_ops, false}) {
      try {
        return make_conv(g, blocked, post_ops, /*winograd=*/true);
      } catch (const dnnl::error&) {  // a geometry or post-op it lacks: direct
      }
    }
  }
  if (!with_post_ops) return make_conv(g, blocked, /*with_post_ops=*/false);
  try {
    return make_conv(g, blocked);
  } catch (const dnnl::error&) {
    return make_conv(g, blocked, /*with_post_ops=*/false);
  }
}

// Runs the convolution; `packed` holds the weights already in the
// primitive's layout, or is empty (they are reordered now, into a
// per-thread buffer: they may change between calls).
void execute_conv(const ConvEntry& entry, const StridedView& out, const StridedView& x,
                  const StridedView& w, const StridedView& bias, const StridedView& residual,
                  const dnnl::memory& packed = dnnl::memory()) {
  using onednn::ReorderSlot;
  std::vector<float> x_copy, w_copy, bias_copy, residual_copy;
  const float* residual_data =
      residual.data ? contiguous_residual_f32(residual, residual_copy) : nullptr;
  const float* x_data = onednn::dense_f32(x, x_copy);
  const float* bias_data = bias.data ? onednn::dense_f32(bias, bias_copy) : nullptr;
  dnnl::memory weights = packed;
  if (!weights) weights = entry.weights.run(onednn::dense_f32(w, w_copy), ReorderSlot::Weights);
  dnnl::memory src = entry.src.run(x_data, ReorderSlot::Source);
  dnnl::memory dst = entry.dst.needed()
                         ? onednn::reorder_buffer(entry.dst.from(), ReorderSlot::Destination)
                         : onednn::wrap(entry.dst.to(), out.data);
  if (entry.sums_residual && residual_data) {  // the `sum` post-op adds what dst holds
    if (entry.dst.needed()) {
      entry.residual.run_into(onednn::wrap(entry.residual.from(), residual_data), dst);
    } else if (residual_data != out.data) {
      std::memcpy(out.data, residual_data, size_t(out.numel()) * sizeof(float));
    }
  }
  onednn::execute(entry.conv, {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_WEIGHTS, weights},
                               {DNNL_ARG_DST, dst},
                               {DNNL_ARG_BIAS,
                                bias_data ? onednn::wrap(entry.bias, bias_data) : dnnl::memory()},
                               {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
  if (entry.dst.needed()) entry.dst.run_into(dst, out.data);
  apply_conv_epilogue_f32(out.ptr<float>(), entry.after.residual ? residual_data : nullptr,
                          out.numel(), entry.after);
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

// A convolution down a column (images one pixel wide, kernels one tap wide:
// 1-D convolutions written as 2-D, as magika's byte CNN is) is the same
// convolution along a row: [N, C, H, 1] and [N, C, 1, H] are the same
// memory. oneDNN runs rows twice as fast (magika's 256 -> 512 channel,
// 5-tap layer over 512 bytes: 15.1 ms as a column, 7.1 as a row, one
// thread), and kiln's own kernels are made for rows too.
bool is_column_conv(const StridedView& out, const StridedView& x, const StridedView& w,
                    const Conv2dParams& p) {
  return x.shape[3] == 1 && w.shape[3] == 1 && out.shape[3] == 1 && p.padding[1] == 0 &&
         x.shape[2] > 1;
}

StridedView as_row(StridedView v) {
  if (!v.data || v.ndim != 4) return v;
  std::swap(v.shape[2], v.shape[3]);
  std::swap(v.strides[2], v.strides[3]);
  return v;
}

Conv2dParams as_row(Conv2dParams p) {
  std::swap(p.stride[0], p.stride[1]);
  std::swap(p.padding[0], p.padding[1]);
  std::swap(p.dilation[0], p.dilation[1]);
  return p;
}

namespace {

// [N, H, W, C] seen as [N, C, H, W] (strided).
StridedView nchw_view(StridedView v) {
  if (!v.data) return v;
  const int64_t shape[4] = {v.shape[0], v.shape[3], v.shape[1], v.shape[2]};
  const int64_t strides[4] = {v.strides[0], v.strides[3], v.strides[1], v.strides[2]};
  std::copy(shape, shape + 4, v.shape);
  std::copy(strides, strides + 4, v.strides);
  return v;
}

// Channels-last where oneDNN does not run (float64, no input channels): the
// NCHW loop into a buffer, then copied across.
void conv2d_channels_last_reference(const StridedView& out, const StridedView& x,
                                    const StridedView& w, const StridedView& bias,
                                    const StridedView& residual, Conv2dParams p,
                                    const ConvEpilogue& epilogue) {
  p.channels_last = false;
  const StridedView target = nchw_view(out);
  std::vector<double> buffer(size_t(out.numel()));  // room for either dtype
  StridedView dense = target;
  dense.data = buffer.data();
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    dense.strides[d] = stride;
    stride *= dense.shape[d];
  }
  conv2d_reference(dense, nchw_view(x), w, bias, p);
  apply_conv_epilogue(dense, nchw_view(residual), epilogue);
  copy_convert(target, dense);
}

StridedView shape_only(const int64_t* shape) {
  StridedView v;
  v.ndim = 4;
  std::copy(shape, shape + 4, v.shape);
  return v;
}

}  // namespace

bool conv2d_channels_last_runs(const int64_t* out, const int64_t* x, const int64_t* w,
                               const Conv2dParams& p) {
  const StridedView o = shape_only(out), xv = shape_only(x), wv = shape_only(w);
  const bool depthwise = p.groups == x[1] && x[1] > 1 && w[0] == x[1] && w[1] == 1;
  return (p.groups == 1 || depthwise) && w[1] > 0 && !is_column_conv(o, xv, wv, p) &&
         !conv2d_frames_geometry(out, x, w, p) && !conv2d_direct_f32_applies(o, xv, wv, p);
}

bool conv2d_channels_last_starts_chain(const int64_t* out, const int64_t* x, const int64_t* w,
                                       const Conv2dParams& p) {
  if (!conv2d_channels_last_runs(out, x, w, p)) return false;
  const StridedView o = shape_only(out), xv = shape_only(x), wv = shape_only(w);
  Conv2dParams nchw = p;
  nchw.channels_last = false;
  return wants_blocked_layout(conv_geometry(o, xv, wv, StridedView{}, nchw));
}

void conv2d_onednn_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p) {
  const ConvGeometry g = conv_geometry(out, x, w, bias, p);
  onednn::guarded("conv2d", [&] {
    ConvEntry entry =
        conv_cache().get(key_of(g), [&] { return make_conv(g, wants_blocked_layout(g)); });
    execute_conv(entry, out, x, w, bias, StridedView{});
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
                       const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue)
    : params_(p), epilogue_(epilogue), empty_(out.numel() == 0) {
  if (empty_ || needs_reference(out, w)) return;
  matvec_ = conv2d_matvec_f32_applies(out, x, w, p);
  if (matvec_) return;
  if (p.channels_last) {  // oneDNN's kernels only (kiln's are NCHW)
    auto state = std::make_unique<OneDnn>();
    const ConvGeometry g = conv_geometry(out, x, w, bias, p, epilogue);
    onednn::guarded("conv2d", [&] { state->entry = make_fused_conv(g); });
    onednn_ = std::move(state);
    return;
  }
  if (is_column_conv(out, x, w, p)) {
    column_ = true;
    params_ = as_row(p);
    init(as_row(out), as_row(x), as_row(w), bias);
    return;
  }
  init(out, x, w, bias);
}

void Conv2dPlan::init(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias) {
  const Conv2dParams& p = params_;
  const ConvEpilogue& epilogue = epilogue_;
  if (conv2d_gemm_f32_applies(out, x, w, p)) {
    gemm_ = make_gemm_conv_pack();
    return;
  }
  depthwise_ = conv2d_depthwise_f32_applies(out, x, w, p);
  direct_ = !depthwise_ && conv2d_direct_f32_applies(out, x, w, p);
  if (depthwise_ || direct_) return;
  auto state = std::make_unique<OneDnn>();
  const ConvGeometry g = conv_geometry(out, x, w, bias, p, epilogue);
  onednn::guarded("conv2d", [&] { state->entry = make_fused_conv(g); });
  onednn_ = std::move(state);
}

Conv2dPlan::~Conv2dPlan() = default;

void Conv2dPlan::run(const StridedView& out, const StridedView& x, const StridedView& w,
                     const StridedView& bias, const StridedView& residual) const {
  if (empty_) return;
  if (column_) return run_as_given(as_row(out), as_row(x), as_row(w), bias, as_row(residual));
  run_as_given(out, x, w, bias, residual);
}

void Conv2dPlan::run_as_given(const StridedView& out, const StridedView& x, const StridedView& w,
                              const StridedView& bias, const StridedView& residual) const {
  // take_relu() gave relu to a plan without an epilogue of its own.
  ConvEpilogue epilogue = epilogue_;
  if (relu_) epilogue.activation = EpilogueActivation::Relu;
  if (matvec_) {
    conv2d_matvec_f32(out, x, w, bias, params_, epilogue, residual);
    return;
  }
  if (gemm_) return conv2d_gemm_f32(out, x, w, bias, params_, epilogue, residual);
  if (depthwise_) {
    conv2d_depthwise_f32(out, x, w, bias, params_, epilogue, residual);
    return;
  }
  if (direct_) {
    conv2d_direct_f32(out, x, w, bias, params_, epilogue, residual);
    return;
  }
  if (!onednn_ && params_.channels_last) {
    conv2d_channels_last_reference(out, x, w, bias, residual, params_, epilogue_);
    return;
  }
  if (!onednn_) {
    conv2d_reference(out, x, w, bias, params_);
    apply_conv_epilogue(out, residual, epilogue_);
    return;
  }
  onednn::guarded("conv2d", [&] { execute_conv(onednn_->entry, out, x, w, bias, residual); });
}

bool Conv2dPlan::take_relu() {
  relu_ = !empty_ && (depthwise_ || direct_) && epilogue_.empty();
  return relu_;
}

bool Conv2dPlan::packs_weights() const {
  return gemm_ || (onednn_ && onednn_->entry.weights.needed());
}

void Conv2dPlan::run_packed(const StridedView& out, const StridedView& x, const StridedView& w,
                            const StridedView& bias, uint64_t version,
                            const StridedView& residual) const {
  if (!packs_weights()) {
    run(out, x, w, bias, residual);
    return;
  }
  const bool row = column_;
  if (gemm_) {
    return conv2d_gemm_f32_packed(*gemm_, version, row ? as_row(out) : out, row ? as_row(x) : x,
                                  row ? as_row(w) : w, bias, params_, epilogue_,
                                  row ? as_row(residual) : residual);
  }
  onednn::guarded("conv2d", [&] {
    std::shared_ptr<const OneDnn::Packed> packed = onednn_->packed_at(row ? as_row(w) : w, version);
    execute_conv(onednn_->entry, row ? as_row(out) : out, row ? as_row(x) : x, row ? as_row(w) : w,
                 bias, row ? as_row(residual) : residual, packed->weights);
  });
}

void conv2d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  if (p.channels_last) return conv2d_fused(out, x, w, bias, StridedView{}, p, ConvEpilogue{});
  if (!needs_reference(out, w) && is_column_conv(out, x, w, p))
    return conv2d(as_row(out), as_row(x), as_row(w), bias, as_row(p));
  if (needs_reference(out, w)) {
    conv2d_reference(out, x, w, bias, p);
    return;
  }
  if (conv2d_matvec_f32_applies(out, x, w, p)) {
    conv2d_matvec_f32(out, x, w, bias, p);
    return;
  }
  if (conv2d_gemm_f32_applies(out, x, w, p)) return conv2d_gemm_f32(out, x, w, bias, p);
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

void conv2d_fused(const StridedView& out, const StridedView& x, const StridedView& w,
                  const StridedView& bias, const StridedView& residual, const Conv2dParams& p,
                  const ConvEpilogue& epilogue) {
  if (out.numel() == 0) return;
  if (p.channels_last && needs_reference(out, w))
    return conv2d_channels_last_reference(out, x, w, bias, residual, p, epilogue);
  if (!p.channels_last && !needs_reference(out, w) && is_column_conv(out, x, w, p)) {
    return conv2d_fused(as_row(out), as_row(x), as_row(w), bias, as_row(residual), as_row(p),
                        epilogue);
  }
  if (needs_reference(out, w)) {
    conv2d_reference(out, x, w, bias, p);
    apply_conv_epilogue(out, residual, epilogue);
    return;
  }
  if (conv2d_matvec_f32_applies(out, x, w, p)) {
    conv2d_matvec_f32(out, x, w, bias, p, epilogue, residual);
    return;
  }
  if (conv2d_gemm_f32_applies(out, x, w, p))
    return conv2d_gemm_f32(out, x, w, bias, p, epilogue, residual);
  if (!p.channels_last && conv2d_depthwise_f32_applies(out, x, w, p)) {
    conv2d_depthwise_f32(out, x, w, bias, p, epilogue, residual);
    return;
  }
  if (!p.channels_last && conv2d_direct_f32_applies(out, x, w, p)) {
    conv2d_direct_f32(out, x, w, bias, p, epilogue, residual);
    return;
  }
  const ConvGeometry g = conv_geometry(out, x, w, bias, p, epilogue);
  onednn::guarded("conv2d", [&] {
    ConvEntry entry = conv_cache().get(key_of(g), [&] { return make_fused_conv(g); });
    execute_conv(entry, out, x, w, bias, residual);
  });
}

}  // namespace kiln::cpu
