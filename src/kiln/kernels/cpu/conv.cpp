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

// A convolution primitive plus what it needs around it: the weight layout it
// chose (format `any`) and the reorder from the user's plain weights.
struct ConvEntry {
  dnnl::convolution_forward conv;
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

ConvEntry make_conv(const dims& src_dims, const dims& wei_dims, const dims& dst_dims, bool has_bias,
                    const Conv2dParams& p) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::memory::desc src(src_dims, f32, tag::nchw), dst(dst_dims, f32, tag::nchw);
  dnnl::memory::desc user_wei(wei_dims, f32, p.groups > 1 ? tag::goihw : tag::oihw);
  dnnl::memory::desc any_wei(wei_dims, f32, tag::any);
  dnnl::memory::desc bias_desc =
      has_bias ? dnnl::memory::desc({dst_dims[1]}, f32, tag::x) : dnnl::memory::desc();
  // oneDNN counts dilation from 0 (no gap), PyTorch from 1.
  dims strides{p.stride[0], p.stride[1]}, dilation{p.dilation[0] - 1, p.dilation[1] - 1};
  dims pad_l{p.padding[0], p.padding[1]};
  // Right padding that makes oneDNN's output-size formula give dst's size.
  dims pad_r(2);
  for (int i = 0; i < 2; ++i) {
    int64_t eff_kernel = (wei_dims[wei_dims.size() - 2 + size_t(i)] - 1) * p.dilation[i] + 1;
    pad_r[size_t(i)] = (dst_dims[2 + size_t(i)] - 1) * p.stride[i] + eff_kernel -
                       src_dims[2 + size_t(i)] - p.padding[i];
  }
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::convolution_direct, src, any_wei, bias_desc,
                                       dst, strides, dilation, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, onednn::default_attr(), onednn::engine());
  ConvEntry entry;
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
  std::vector<float> x_copy, w_copy, bias_copy;
  const float* x_data = onednn::dense_f32(x, x_copy);
  const float* w_data = onednn::dense_f32(w, w_copy);
  const float* bias_data = bias.data ? onednn::dense_f32(bias, bias_copy) : nullptr;
  const int64_t G = p.groups, OC = w.shape[0];
  dims src_dims(x.shape, x.shape + 4), dst_dims(out.shape, out.shape + 4);
  dims wei_dims =
      G > 1 ? dims{G, OC / G, w.shape[1], w.shape[2], w.shape[3]} : dims(w.shape, w.shape + 4);
  onednn::guarded("conv2d", [&] {
    onednn::Key key;
    key.add(x.shape, 4).add(w.shape, 4).add(out.shape, 4).add(G).add(bias.data != nullptr);
    key.add(p.stride, 2).add(p.padding, 2).add(p.dilation, 2);
    ConvEntry entry = conv_cache().get(
        key, [&] { return make_conv(src_dims, wei_dims, dst_dims, bias.data != nullptr, p); });
    dnnl::memory weights = onednn::wrap(entry.user_weights_desc, w_data);
    // Without the storage version the kernel cannot know whether the weights
    // changed since the last call, so a reordered copy is made every call.
    if (entry.needs_reorder) {
      dnnl::memory reordered(entry.weights_desc, onednn::engine());
      entry.weight_reorder.execute(
          onednn::stream(), {{DNNL_ARG_FROM, weights},
                             {DNNL_ARG_TO, reordered},
                             {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.reorder_scratchpad)}});
      weights = reordered;
    }
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, onednn::wrap(dnnl::memory::desc(src_dims, f32, tag::nchw), x_data)},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, onednn::wrap(dnnl::memory::desc(dst_dims, f32, tag::nchw), out.data)},
        {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}};
    if (bias_data) {
      args.emplace(DNNL_ARG_BIAS, onednn::wrap(dnnl::memory::desc({OC}, f32, tag::x), bias_data));
    }
    entry.conv.execute(onednn::stream(), args);
    onednn::stream().wait();
  });
}

void conv2d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  // oneDNN rejects zero input channels; the loop gives bias (or 0) there.
  if (out.dtype != DType::Float32 || w.shape[1] == 0) {
    conv2d_reference(out, x, w, bias, p);
    return;
  }
  conv2d_onednn_f32(out, x, w, bias, p);
}

}  // namespace kiln::cpu
