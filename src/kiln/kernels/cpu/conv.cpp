#include "kiln/kernels/cpu/conv.h"

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

// A convolution primitive plus what it needs around it: the weight layout it
// chose (format `any`) and the reorder from the user's plain weights.
struct ConvEntry {
  dnnl::convolution_forward conv;
  dnnl::memory::desc src, dst, bias;
  dnnl::memory::desc weights_desc;
  dnnl::memory::desc user_weights_desc;
  dnnl::memory::desc scratchpad;
  bool needs_reorder = false;
  dnnl::reorder weight_reorder;
  dnnl::memory::desc reorder_scratchpad;
};

onednn::PrimitiveCache<ConvEntry>& conv_cache() {
  static onednn::PrimitiveCache<ConvEntry> cache;
  return cache;
}

ConvEntry make_conv(const ConvGeometry& g) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  const Conv2dParams& p = g.params;
  ConvEntry entry;
  entry.src = dnnl::memory::desc(g.src, f32, tag::nchw);
  entry.dst = dnnl::memory::desc(g.dst, f32, tag::nchw);
  dnnl::memory::desc user_wei(g.weights, f32, p.groups > 1 ? tag::goihw : tag::oihw);
  dnnl::memory::desc any_wei(g.weights, f32, tag::any);
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
                                       dnnl::algorithm::convolution_direct, entry.src, any_wei,
                                       entry.bias, entry.dst, strides, dilation, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, onednn::default_attr(), onednn::engine());
  entry.conv = dnnl::convolution_forward(pd);
  entry.weights_desc = pd.weights_desc();
  entry.user_weights_desc = user_wei;
  entry.scratchpad = pd.scratchpad_desc();
  if (pd.weights_desc() != user_wei) {
    dnnl::reorder::primitive_desc reorder_pd(onednn::engine(), user_wei, onednn::engine(),
                                             pd.weights_desc(), onednn::default_attr());
    entry.needs_reorder = true;
    entry.weight_reorder = dnnl::reorder(reorder_pd);
    entry.reorder_scratchpad = reorder_pd.scratchpad_desc();
  }
  return entry;
}

void execute_conv(const ConvEntry& entry, const StridedView& out, const StridedView& x,
                  const StridedView& w, const StridedView& bias) {
  std::vector<float> x_copy, w_copy, bias_copy;
  const float* x_data = onednn::dense_f32(x, x_copy);
  const float* w_data = onednn::dense_f32(w, w_copy);
  const float* bias_data = bias.data ? onednn::dense_f32(bias, bias_copy) : nullptr;
  dnnl::memory weights = onednn::wrap(entry.user_weights_desc, w_data);
  // The weights may change between calls (an optimizer step), so they are
  // reordered every call, into a per-thread buffer.
  if (entry.needs_reorder) {
    dnnl::memory reordered = onednn::reorder_buffer(entry.weights_desc);
    onednn::execute(entry.weight_reorder,
                    {{DNNL_ARG_FROM, weights},
                     {DNNL_ARG_TO, reordered},
                     {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.reorder_scratchpad)}});
    weights = reordered;
  }
  onednn::execute(entry.conv, {{DNNL_ARG_SRC, onednn::wrap(entry.src, x_data)},
                               {DNNL_ARG_WEIGHTS, weights},
                               {DNNL_ARG_DST, onednn::wrap(entry.dst, out.data)},
                               {DNNL_ARG_BIAS,
                                bias_data ? onednn::wrap(entry.bias, bias_data) : dnnl::memory()},
                               {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
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
    ConvEntry entry = conv_cache().get(key_of(g), [&] { return make_conv(g); });
    execute_conv(entry, out, x, w, bias);
  });
}

struct Conv2dPlan::OneDnn {
  ConvEntry entry;
};

Conv2dPlan::Conv2dPlan(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p)
    : params_(p), empty_(out.numel() == 0) {
  if (empty_ || needs_reference(out, w)) return;
  depthwise_ = conv2d_depthwise_f32_applies(out, x, w, p);
  direct_ = !depthwise_ && conv2d_direct_f32_applies(out, x, w, p);
  if (depthwise_ || direct_) return;
  auto state = std::make_unique<OneDnn>();
  onednn::guarded("conv2d", [&] { state->entry = make_conv(conv_geometry(out, x, w, bias, p)); });
  onednn_ = std::move(state);
}

Conv2dPlan::~Conv2dPlan() = default;

void Conv2dPlan::run(const StridedView& out, const StridedView& x, const StridedView& w,
                     const StridedView& bias) const {
  if (empty_) return;
  if (depthwise_) {
    conv2d_depthwise_f32(out, x, w, bias, params_);
    return;
  }
  if (direct_) {
    conv2d_direct_f32(out, x, w, bias, params_);
    return;
  }
  if (!onednn_) {
    conv2d_reference(out, x, w, bias, params_);
    return;
  }
  onednn::guarded("conv2d", [&] { execute_conv(onednn_->entry, out, x, w, bias); });
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
