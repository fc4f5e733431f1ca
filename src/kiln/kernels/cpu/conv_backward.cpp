// The two halves of conv2d's backward: the gradient with respect to the
// input (oneDNN's convolution_backward_data) and to the weight
// (convolution_backward_weights) for float32, and direct loops for float64.
#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/onednn.h"

namespace kiln::cpu {
namespace {

// Calls body(n, oc, oh, ow, ic, ih, iw, kh, kw) for every product term of the
// forward convolution out[n, oc, oh, ow] += x[n, ic, ih, iw] * w[oc, ic - first, kh, kw],
// for the samples [n0, n1) and output channels [oc0, oc1).
template <typename Body>
void for_each_term(const int64_t* out_shape, const int64_t* x_shape, const int64_t* w_shape,
                   const Conv2dParams& p, int64_t n0, int64_t n1, int64_t oc0, int64_t oc1,
                   Body body) {
  const int64_t OH = out_shape[2], OW = out_shape[3], H = x_shape[2], W = x_shape[3];
  const int64_t icg = w_shape[1], KH = w_shape[2], KW = w_shape[3];
  const int64_t ocg = out_shape[1] / p.groups;
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t oc = oc0; oc < oc1; ++oc) {
      const int64_t first_ic = (oc / ocg) * icg;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          for (int64_t ic = 0; ic < icg; ++ic) {
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                body(n, oc, oh, ow, first_ic + ic, ih, iw, ic, kh, kw);
              }
            }
          }
        }
      }
    }
  }
}

int64_t at(const StridedView& v, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * v.strides[0] + b * v.strides[1] + c * v.strides[2] + d * v.strides[3];
}

// dx[n, ic, ih, iw] = sum of dy[n, oc, oh, ow] * w[oc, ic', kh, kw] over the
// terms that read x[n, ic, ih, iw]. Samples are independent: parallel over n.
template <typename T>
void backward_input_reference(const StridedView& dx, const StridedView& dy, const StridedView& w,
                              const Conv2dParams& p) {
  fill(dx, Scalar(0.0));
  const T* g = dy.ptr<const T>();
  const T* k = w.ptr<const T>();
  T* out = dx.ptr<T>();
  const int64_t N = dy.shape[0];
#pragma omp parallel for if (dy.numel() * w.shape[1] * w.shape[2] * w.shape[3] > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    for_each_term(dy.shape, dx.shape, w.shape, p, n, n + 1, 0, dy.shape[1],
                  [&](int64_t n_, int64_t oc, int64_t oh, int64_t ow, int64_t ic, int64_t ih,
                      int64_t iw, int64_t icw, int64_t kh, int64_t kw) {
                    out[at(dx, n_, ic, ih, iw)] +=
                        g[at(dy, n_, oc, oh, ow)] * k[at(w, oc, icw, kh, kw)];
                  });
  }
}

// dw[oc, ic', kh, kw] = sum of dy[n, oc, oh, ow] * x[n, ic, ih, iw]. Output
// channels are independent: parallel over oc.
template <typename T>
void backward_weight_reference(const StridedView& dw, const StridedView& dy, const StridedView& x,
                               const Conv2dParams& p) {
  fill(dw, Scalar(0.0));
  const T* g = dy.ptr<const T>();
  const T* src = x.ptr<const T>();
  T* out = dw.ptr<T>();
  const int64_t OC = dy.shape[1];
#pragma omp parallel for if (dy.numel() * dw.shape[1] * dw.shape[2] * dw.shape[3] > kParallelGrain)
  for (int64_t oc = 0; oc < OC; ++oc) {
    for_each_term(dy.shape, x.shape, dw.shape, p, 0, dy.shape[0], oc, oc + 1,
                  [&](int64_t n, int64_t oc_, int64_t oh, int64_t ow, int64_t ic, int64_t ih,
                      int64_t iw, int64_t icw, int64_t kh, int64_t kw) {
                    out[at(dw, oc_, icw, kh, kw)] +=
                        g[at(dy, n, oc_, oh, ow)] * src[at(x, n, ic, ih, iw)];
                  });
  }
}

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

// The memory descriptors and geometry both backward primitives share, all
// in plain layouts (nchw, oihw / goihw) so no reorders are needed.
struct ConvDescs {
  dnnl::memory::desc src, wei, dst;
  dims strides, dilation, pad_l, pad_r;
};

ConvDescs conv_descs(const int64_t* x_shape, const int64_t* w_shape, const int64_t* y_shape,
                     const Conv2dParams& p) {
  const auto f32 = dnnl::memory::data_type::f32;
  const int64_t G = p.groups;
  dims src_dims(x_shape, x_shape + 4), dst_dims(y_shape, y_shape + 4);
  dims wei_dims = G > 1 ? dims{G, w_shape[0] / G, w_shape[1], w_shape[2], w_shape[3]}
                        : dims(w_shape, w_shape + 4);
  ConvDescs d{dnnl::memory::desc(src_dims, f32, tag::nchw),
              dnnl::memory::desc(wei_dims, f32, G > 1 ? tag::goihw : tag::oihw),
              dnnl::memory::desc(dst_dims, f32, tag::nchw),
              {p.stride[0], p.stride[1]},
              // oneDNN counts dilation from 0 (no gap), PyTorch from 1.
              {p.dilation[0] - 1, p.dilation[1] - 1},
              {p.padding[0], p.padding[1]},
              dims(2)};
  // Right padding that makes oneDNN's output-size formula give y's size.
  for (size_t i = 0; i < 2; ++i) {
    const int64_t eff_kernel = (w_shape[2 + i] - 1) * p.dilation[i] + 1;
    d.pad_r[i] = (y_shape[2 + i] - 1) * p.stride[i] + eff_kernel - x_shape[2 + i] - p.padding[i];
  }
  return d;
}

dnnl::convolution_forward::primitive_desc forward_hint(const ConvDescs& d) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, d.src, d.wei, d.dst,
                                       d.strides, d.dilation, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, onednn::default_attr(), onednn::engine());
}

onednn::Key conv_key(int64_t which, const int64_t* x_shape, const int64_t* w_shape,
                     const int64_t* y_shape, const Conv2dParams& p) {
  onednn::Key key;
  key.add(which).add(x_shape, 4).add(w_shape, 4).add(y_shape, 4).add(p.groups);
  key.add(p.stride, 2).add(p.padding, 2).add(p.dilation, 2);
  return key;
}

struct BackwardDataEntry {
  dnnl::convolution_backward_data prim;
  ConvDescs descs;
  dnnl::memory::desc scratchpad;
};

struct BackwardWeightsEntry {
  dnnl::convolution_backward_weights prim;
  ConvDescs descs;
  dnnl::memory::desc scratchpad;
};

onednn::PrimitiveCache<BackwardDataEntry>& data_cache() {
  static onednn::PrimitiveCache<BackwardDataEntry> cache;
  return cache;
}

onednn::PrimitiveCache<BackwardWeightsEntry>& weights_cache() {
  static onednn::PrimitiveCache<BackwardWeightsEntry> cache;
  return cache;
}

void backward_input_onednn_f32(const StridedView& dx, const StridedView& dy, const StridedView& w,
                               const Conv2dParams& p) {
  std::vector<float> dy_copy, w_copy;
  const float* dy_data = onednn::dense_f32(dy, dy_copy);
  const float* w_data = onednn::dense_f32(w, w_copy);
  onednn::guarded("conv2d_backward_input", [&] {
    auto entry = data_cache().get(conv_key(0, dx.shape, w.shape, dy.shape, p), [&] {
      ConvDescs d = conv_descs(dx.shape, w.shape, dy.shape, p);
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei,
                                                 d.dst, d.strides, d.dilation, d.pad_l, d.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, onednn::default_attr(),
                                                         onednn::engine(), forward_hint(d));
      return BackwardDataEntry{dnnl::convolution_backward_data(pd), d, pd.scratchpad_desc()};
    });
    entry.prim.execute(onednn::stream(),
                       {{DNNL_ARG_DIFF_SRC, onednn::wrap(entry.descs.src, dx.data)},
                        {DNNL_ARG_WEIGHTS, onednn::wrap(entry.descs.wei, w_data)},
                        {DNNL_ARG_DIFF_DST, onednn::wrap(entry.descs.dst, dy_data)},
                        {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
    onednn::stream().wait();
  });
}

void backward_weight_onednn_f32(const StridedView& dw, const StridedView& dy, const StridedView& x,
                                const Conv2dParams& p) {
  std::vector<float> dy_copy, x_copy;
  const float* dy_data = onednn::dense_f32(dy, dy_copy);
  const float* x_data = onednn::dense_f32(x, x_copy);
  onednn::guarded("conv2d_backward_weight", [&] {
    auto entry = weights_cache().get(conv_key(1, x.shape, dw.shape, dy.shape, p), [&] {
      ConvDescs d = conv_descs(x.shape, dw.shape, dy.shape, p);
      dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                    d.wei, d.dst, d.strides, d.dilation, d.pad_l,
                                                    d.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, onednn::default_attr(),
                                                            onednn::engine(), forward_hint(d));
      return BackwardWeightsEntry{dnnl::convolution_backward_weights(pd), d, pd.scratchpad_desc()};
    });
    entry.prim.execute(onednn::stream(),
                       {{DNNL_ARG_SRC, onednn::wrap(entry.descs.src, x_data)},
                        {DNNL_ARG_DIFF_WEIGHTS, onednn::wrap(entry.descs.wei, dw.data)},
                        {DNNL_ARG_DIFF_DST, onednn::wrap(entry.descs.dst, dy_data)},
                        {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
    onednn::stream().wait();
  });
}

// oneDNN rejects empty tensors (a zero batch, zero channels); the loops give
// the zeros those shapes call for.
bool onednn_can_take(const StridedView& a, const StridedView& b, const StridedView& c) {
  return a.dtype == DType::Float32 && a.numel() > 0 && b.numel() > 0 && c.numel() > 0;
}

}  // namespace

void conv2d_backward_input_reference(const StridedView& dx, const StridedView& dy,
                                     const StridedView& w, const Conv2dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { backward_input_reference<decltype(t)>(dx, dy, w, p); });
}

void conv2d_backward_weight_reference(const StridedView& dw, const StridedView& dy,
                                      const StridedView& x, const Conv2dParams& p) {
  visit_floating(dw.dtype, [&](auto t) { backward_weight_reference<decltype(t)>(dw, dy, x, p); });
}

void conv2d_backward_input(const StridedView& dx, const StridedView& dy, const StridedView& w,
                           const Conv2dParams& p) {
  if (!onednn_can_take(dx, dy, w)) {
    conv2d_backward_input_reference(dx, dy, w, p);
    return;
  }
  backward_input_onednn_f32(dx, dy, w, p);
}

void conv2d_backward_weight(const StridedView& dw, const StridedView& dy, const StridedView& x,
                            const Conv2dParams& p) {
  if (!onednn_can_take(dw, dy, x)) {
    conv2d_backward_weight_reference(dw, dy, x, p);
    return;
  }
  backward_weight_onednn_f32(dw, dy, x, p);
}

}  // namespace kiln::cpu
