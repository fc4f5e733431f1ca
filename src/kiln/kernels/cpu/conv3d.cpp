#include "kiln/kernels/cpu/conv3d.h"

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/onednn.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

int64_t at(const StridedView& v, int64_t a, int64_t b, const int64_t* spatial) {
  return a * v.strides[0] + b * v.strides[1] + spatial[0] * v.strides[2] +
         spatial[1] * v.strides[3] + spatial[2] * v.strides[4];
}

// Calls body(n, oc, o, ic, i, icw, k) for every product term of the forward
// convolution out[n, oc, o] += x[n, ic, i] * w[oc, icw, k] (o, i, k: the
// three spatial positions), for samples [n0, n1) and output channels
// [oc0, oc1).
template <typename Body>
void for_each_term(const int64_t* out_shape, const int64_t* x_shape, const int64_t* w_shape,
                   const Conv3dParams& p, int64_t n0, int64_t n1, int64_t oc0, int64_t oc1,
                   Body body) {
  const int64_t icg = w_shape[1], ocg = out_shape[1] / p.groups;
  int64_t o[3], i[3], k[3];
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t oc = oc0; oc < oc1; ++oc) {
      const int64_t first_ic = (oc / ocg) * icg;
      for (o[0] = 0; o[0] < out_shape[2]; ++o[0])
        for (o[1] = 0; o[1] < out_shape[3]; ++o[1])
          for (o[2] = 0; o[2] < out_shape[4]; ++o[2])
            for (int64_t ic = 0; ic < icg; ++ic)
              for (k[0] = 0; k[0] < w_shape[2]; ++k[0]) {
                i[0] = o[0] * p.stride[0] - p.padding[0] + k[0] * p.dilation[0];
                if (i[0] < 0 || i[0] >= x_shape[2]) continue;
                for (k[1] = 0; k[1] < w_shape[3]; ++k[1]) {
                  i[1] = o[1] * p.stride[1] - p.padding[1] + k[1] * p.dilation[1];
                  if (i[1] < 0 || i[1] >= x_shape[3]) continue;
                  for (k[2] = 0; k[2] < w_shape[4]; ++k[2]) {
                    i[2] = o[2] * p.stride[2] - p.padding[2] + k[2] * p.dilation[2];
                    if (i[2] < 0 || i[2] >= x_shape[4]) continue;
                    body(n, oc, o, first_ic + ic, i, ic, k);
                  }
                }
              }
    }
  }
}

int64_t kernel_volume(const StridedView& w) {
  return w.shape[1] * w.shape[2] * w.shape[3] * w.shape[4];
}

template <typename T>
void forward_reference(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv3dParams& p) {
  const int64_t OC = out.shape[1];
  const int64_t volume = out.shape[2] * out.shape[3] * out.shape[4];
  T* dst = out.ptr<T>();
  const T* src = x.ptr<const T>();
  const T* ker = w.ptr<const T>();
  parallel_for(out.shape[0] * OC, out.numel() * kernel_volume(w) > kParallelGrain,
               [&](int64_t plane) {
                 const int64_t n = plane / OC, oc = plane % OC;
                 const T init = bias.data ? bias.ptr<const T>()[oc * bias.strides[0]] : T(0);
                 T* o_plane = dst + plane * volume;
                 std::fill(o_plane, o_plane + volume, init);
                 for_each_term(out.shape, x.shape, w.shape, p, n, n + 1, oc, oc + 1,
                               [&](int64_t, int64_t, const int64_t* o, int64_t ic, const int64_t* i,
                                   int64_t icw, const int64_t* k) {
                                 o_plane[(o[0] * out.shape[3] + o[1]) * out.shape[4] + o[2]] +=
                                     src[at(x, n, ic, i)] * ker[at(w, oc, icw, k)];
                               });
               });
}

// Samples are independent: parallel over n.
template <typename T>
void backward_input_reference(const StridedView& dx, const StridedView& dy, const StridedView& w,
                              const Conv3dParams& p) {
  fill(dx, Scalar(0.0));
  const T* g = dy.ptr<const T>();
  const T* ker = w.ptr<const T>();
  T* out = dx.ptr<T>();
  parallel_for(dy.shape[0], dy.numel() * kernel_volume(w) > kParallelGrain, [&](int64_t n) {
    for_each_term(dy.shape, dx.shape, w.shape, p, n, n + 1, 0, dy.shape[1],
                  [&](int64_t, int64_t oc, const int64_t* o, int64_t ic, const int64_t* i,
                      int64_t icw, const int64_t* k) {
                    out[at(dx, n, ic, i)] += g[at(dy, n, oc, o)] * ker[at(w, oc, icw, k)];
                  });
  });
}

// Output channels are independent: parallel over oc.
template <typename T>
void backward_weight_reference(const StridedView& dw, const StridedView& dy, const StridedView& x,
                               const Conv3dParams& p) {
  fill(dw, Scalar(0.0));
  const T* g = dy.ptr<const T>();
  const T* src = x.ptr<const T>();
  T* out = dw.ptr<T>();
  parallel_for(dy.shape[1], dy.numel() * kernel_volume(dw) > kParallelGrain, [&](int64_t oc) {
    for_each_term(dy.shape, x.shape, dw.shape, p, 0, dy.shape[0], oc, oc + 1,
                  [&](int64_t n, int64_t, const int64_t* o, int64_t ic, const int64_t* i,
                      int64_t icw, const int64_t* k) {
                    out[at(dw, oc, icw, k)] += g[at(dy, n, oc, o)] * src[at(x, n, ic, i)];
                  });
  });
}

// ---- oneDNN (float32) ---------------------------------------------------

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

// The callers' plain layouts (ncdhw, oidhw / goidhw) and the geometry.
struct ConvDescs {
  dnnl::memory::desc src, wei, dst, bias;
  dims strides, dilation, pad_l, pad_r;
};

ConvDescs conv_descs(const int64_t* x_shape, const int64_t* w_shape, const int64_t* y_shape,
                     bool has_bias, const Conv3dParams& p) {
  const auto f32 = dnnl::memory::data_type::f32;
  const int64_t G = p.groups;
  dims wei_dims = G > 1 ? dims{G, w_shape[0] / G, w_shape[1], w_shape[2], w_shape[3], w_shape[4]}
                        : dims(w_shape, w_shape + 5);
  ConvDescs d;
  d.src = dnnl::memory::desc(dims(x_shape, x_shape + 5), f32, tag::ncdhw);
  d.wei = dnnl::memory::desc(wei_dims, f32, G > 1 ? tag::goidhw : tag::oidhw);
  d.dst = dnnl::memory::desc(dims(y_shape, y_shape + 5), f32, tag::ncdhw);
  if (has_bias) d.bias = dnnl::memory::desc({y_shape[1]}, f32, tag::x);
  for (int i = 0; i < 3; ++i) {
    const int64_t eff_kernel = (w_shape[2 + i] - 1) * p.dilation[i] + 1;
    d.strides.push_back(p.stride[i]);
    d.dilation.push_back(p.dilation[i] - 1);  // oneDNN counts from 0 (no gap)
    d.pad_l.push_back(p.padding[i]);
    // The right padding that makes oneDNN's output size y's.
    d.pad_r.push_back((y_shape[2 + i] - 1) * p.stride[i] + eff_kernel - x_shape[2 + i] -
                      p.padding[i]);
  }
  return d;
}

enum class Pass : int64_t { Forward, BackwardData, BackwardWeights };

onednn::Key conv_key(Pass pass, const int64_t* x_shape, const int64_t* w_shape,
                     const int64_t* y_shape, bool has_bias, const Conv3dParams& p) {
  onednn::Key key;
  key.add(int64_t(pass)).add(x_shape, 5).add(w_shape, 5).add(y_shape, 5);
  key.add(p.groups).add(int64_t(has_bias));
  key.add(p.stride, 3).add(p.padding, 3).add(p.dilation, 3);
  return key;
}

// The primitive's own layouts: `any` lets oneDNN pick blocked ones (its
// direct kernels); on plain NCDHW it falls back to im2col + gemm, 10-20x
// slower in 3-D.
struct Layouts {
  dnnl::memory::desc src, wei, dst;
};

ConvDescs any_layouts(const ConvDescs& d) {
  ConvDescs any = d;
  any.src = dnnl::memory::desc(d.src.dims(), d.src.data_type(), tag::any);
  any.wei = dnnl::memory::desc(d.wei.dims(), d.wei.data_type(), tag::any);
  any.dst = dnnl::memory::desc(d.dst.dims(), d.dst.data_type(), tag::any);
  return any;
}

dnnl::convolution_forward::primitive_desc forward_desc(const ConvDescs& d, dnnl::prop_kind kind) {
  dnnl::convolution_forward::desc desc(kind, dnnl::algorithm::convolution_direct, d.src, d.wei,
                                       d.bias, d.dst, d.strides, d.dilation, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, onednn::default_attr(), onednn::engine());
}

struct ConvEntry {
  dnnl::primitive prim;
  ConvDescs descs;  // the callers' plain layouts
  Layouts chosen;   // the primitive's
  dnnl::memory::desc scratchpad;
};

onednn::PrimitiveCache<ConvEntry>& conv_cache() {
  static onednn::PrimitiveCache<ConvEntry> cache;
  return cache;
}

ConvEntry make_entry(Pass pass, const ConvDescs& plain) {
  const ConvDescs d = any_layouts(plain);
  if (pass == Pass::Forward) {
    auto pd = forward_desc(d, dnnl::prop_kind::forward_inference);
    return ConvEntry{dnnl::convolution_forward(pd),
                     plain,
                     {pd.src_desc(), pd.weights_desc(), pd.dst_desc()},
                     pd.scratchpad_desc()};
  }
  ConvDescs no_bias = d;
  no_bias.bias = dnnl::memory::desc();
  auto hint = forward_desc(no_bias, dnnl::prop_kind::forward_training);
  if (pass == Pass::BackwardData) {
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei,
                                               d.dst, d.strides, d.dilation, d.pad_l, d.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(desc, onednn::default_attr(),
                                                       onednn::engine(), hint);
    return ConvEntry{dnnl::convolution_backward_data(pd),
                     plain,
                     {pd.diff_src_desc(), pd.weights_desc(), pd.diff_dst_desc()},
                     pd.scratchpad_desc()};
  }
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.src, d.wei,
                                                d.dst, d.strides, d.dilation, d.pad_l, d.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, onednn::default_attr(),
                                                        onednn::engine(), hint);
  return ConvEntry{dnnl::convolution_backward_weights(pd),
                   plain,
                   {pd.src_desc(), pd.diff_weights_desc(), pd.diff_dst_desc()},
                   pd.scratchpad_desc()};
}

ConvEntry entry_for(Pass pass, const int64_t* x_shape, const int64_t* w_shape,
                    const int64_t* y_shape, bool has_bias, const Conv3dParams& p) {
  return conv_cache().get(conv_key(pass, x_shape, w_shape, y_shape, has_bias, p), [&] {
    return make_entry(pass, conv_descs(x_shape, w_shape, y_shape, has_bias, p));
  });
}

void reorder(const dnnl::memory& from, const dnnl::memory& to) {
  dnnl::reorder::primitive_desc pd(onednn::engine(), from.get_desc(), onednn::engine(),
                                   to.get_desc(), onednn::default_attr());
  onednn::execute(dnnl::reorder(pd),
                  {{DNNL_ARG_FROM, from},
                   {DNNL_ARG_TO, to},
                   {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(pd.scratchpad_desc())}});
}

// An input in the primitive's layout: the caller's data as is, or reordered.
dnnl::memory input_in(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
                      const void* data) {
  dnnl::memory given = onednn::wrap(plain, data);
  if (plain == chosen) return given;
  dnnl::memory converted(chosen, onednn::engine());
  reorder(given, converted);
  return converted;
}

// An output: written in place when the layouts agree, else into a buffer
// that finish_output() reorders into the caller's memory.
dnnl::memory output_in(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
                       void* data) {
  if (plain == chosen) return onednn::wrap(plain, data);
  return dnnl::memory(chosen, onednn::engine());
}

void finish_output(const dnnl::memory& computed, const dnnl::memory::desc& plain, void* data) {
  if (computed.get_desc() == plain) return;
  reorder(computed, onednn::wrap(plain, data));
}

void forward_onednn(const StridedView& out, const StridedView& x, const StridedView& w,
                    const StridedView& bias, const Conv3dParams& p) {
  std::vector<float> x_copy, w_copy, bias_copy;
  const float* x_data = onednn::dense_f32(x, x_copy);
  const float* w_data = onednn::dense_f32(w, w_copy);
  const float* bias_data = bias.data ? onednn::dense_f32(bias, bias_copy) : nullptr;
  onednn::guarded("conv3d", [&] {
    ConvEntry e = entry_for(Pass::Forward, x.shape, w.shape, out.shape, bias_data != nullptr, p);
    dnnl::memory src = input_in(e.descs.src, e.chosen.src, x_data);
    dnnl::memory wei = input_in(e.descs.wei, e.chosen.wei, w_data);
    dnnl::memory dst = output_in(e.descs.dst, e.chosen.dst, out.data);
    onednn::execute(e.prim, {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_WEIGHTS, wei},
                             {DNNL_ARG_DST, dst},
                             {DNNL_ARG_BIAS,
                              bias_data ? onednn::wrap(e.descs.bias, bias_data) : dnnl::memory()},
                             {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(e.scratchpad)}});
    finish_output(dst, e.descs.dst, out.data);
  });
}

void backward_input_onednn(const StridedView& dx, const StridedView& dy, const StridedView& w,
                           const Conv3dParams& p) {
  std::vector<float> dy_copy, w_copy;
  const float* dy_data = onednn::dense_f32(dy, dy_copy);
  const float* w_data = onednn::dense_f32(w, w_copy);
  onednn::guarded("conv3d_backward_input", [&] {
    ConvEntry e = entry_for(Pass::BackwardData, dx.shape, w.shape, dy.shape, false, p);
    dnnl::memory diff_dst = input_in(e.descs.dst, e.chosen.dst, dy_data);
    dnnl::memory wei = input_in(e.descs.wei, e.chosen.wei, w_data);
    dnnl::memory diff_src = output_in(e.descs.src, e.chosen.src, dx.data);
    onednn::execute(e.prim, {{DNNL_ARG_DIFF_SRC, diff_src},
                             {DNNL_ARG_WEIGHTS, wei},
                             {DNNL_ARG_DIFF_DST, diff_dst},
                             {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(e.scratchpad)}});
    finish_output(diff_src, e.descs.src, dx.data);
  });
}

void backward_weight_onednn(const StridedView& dw, const StridedView& dy, const StridedView& x,
                            const Conv3dParams& p) {
  std::vector<float> dy_copy, x_copy;
  const float* dy_data = onednn::dense_f32(dy, dy_copy);
  const float* x_data = onednn::dense_f32(x, x_copy);
  onednn::guarded("conv3d_backward_weight", [&] {
    ConvEntry e = entry_for(Pass::BackwardWeights, x.shape, dw.shape, dy.shape, false, p);
    dnnl::memory src = input_in(e.descs.src, e.chosen.src, x_data);
    dnnl::memory diff_dst = input_in(e.descs.dst, e.chosen.dst, dy_data);
    dnnl::memory diff_wei = output_in(e.descs.wei, e.chosen.wei, dw.data);
    onednn::execute(e.prim, {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_DIFF_WEIGHTS, diff_wei},
                             {DNNL_ARG_DIFF_DST, diff_dst},
                             {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(e.scratchpad)}});
    finish_output(diff_wei, e.descs.wei, dw.data);
  });
}

// oneDNN takes float32 and rejects empty tensors (a zero batch, zero
// channels); the loops give what those shapes call for.
bool onednn_can_take(const StridedView& a, const StridedView& b, const StridedView& c) {
  return a.dtype == DType::Float32 && a.numel() > 0 && b.numel() > 0 && c.numel() > 0;
}

// out[n, c, ...] += bias[c]; out is contiguous.
template <typename T>
void add_channel_bias(const StridedView& out, const StridedView& bias) {
  const int64_t C = out.shape[1], volume = out.shape[2] * out.shape[3] * out.shape[4];
  const T* b = bias.ptr<const T>();
  parallel_for(out.shape[0] * C, out.numel() > kParallelGrain, [&](int64_t plane) {
    const T value = b[(plane % C) * bias.strides[0]];
    T* dst = out.ptr<T>() + plane * volume;
    for (int64_t i = 0; i < volume; ++i)
      dst[i] += value;
  });
}

}  // namespace

void conv3d_reference(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv3dParams& p) {
  visit_floating(out.dtype, [&](auto t) { forward_reference<decltype(t)>(out, x, w, bias, p); });
}

void conv3d_backward_input_reference(const StridedView& dx, const StridedView& dy,
                                     const StridedView& w, const Conv3dParams& p) {
  visit_floating(dx.dtype, [&](auto t) { backward_input_reference<decltype(t)>(dx, dy, w, p); });
}

void conv3d_backward_weight_reference(const StridedView& dw, const StridedView& dy,
                                      const StridedView& x, const Conv3dParams& p) {
  visit_floating(dw.dtype, [&](auto t) { backward_weight_reference<decltype(t)>(dw, dy, x, p); });
}

void conv3d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv3dParams& p) {
  if (out.numel() == 0) return;
  if (!onednn_can_take(out, x, w)) return conv3d_reference(out, x, w, bias, p);
  forward_onednn(out, x, w, bias, p);
}

void conv3d_backward_input(const StridedView& dx, const StridedView& dy, const StridedView& w,
                           const Conv3dParams& p) {
  if (!onednn_can_take(dx, dy, w)) return conv3d_backward_input_reference(dx, dy, w, p);
  backward_input_onednn(dx, dy, w, p);
}

void conv3d_backward_weight(const StridedView& dw, const StridedView& dy, const StridedView& x,
                            const Conv3dParams& p) {
  if (!onednn_can_take(dw, dy, x)) return conv3d_backward_weight_reference(dw, dy, x, p);
  backward_weight_onednn(dw, dy, x, p);
}

// An output_padding of at least the stride (allowed when the dilation is
// larger) gives out rows no element of x reaches, and oneDNN wants the
// sizes consistent: x gets the rows conv3d from out's size would give, as
// zeros, which add nothing.
void conv_transpose3d(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv3dParams& p) {
  if (out.numel() == 0) return;
  StridedView padded = x;
  bool missing = false;
  for (int d = 0; d < 3; ++d) {
    const int64_t reach =
        out.shape[2 + d] + 2 * p.padding[d] - p.dilation[d] * (w.shape[2 + d] - 1);
    padded.shape[2 + d] = std::max((reach - 1) / p.stride[d] + 1, x.shape[2 + d]);
    missing = missing || padded.shape[2 + d] != x.shape[2 + d];
  }
  std::vector<char> buffer;
  if (missing) {
    for (int d = 4; d >= 0; --d)
      padded.strides[d] = d == 4 ? 1 : padded.strides[d + 1] * padded.shape[d + 1];
    buffer.resize(size_t(padded.numel()) * element_size(x.dtype));
    padded.data = buffer.data();
    fill(padded, Scalar(0.0));
    StridedView window = padded;
    for (int d = 2; d < 5; ++d)
      window.shape[d] = x.shape[d];
    copy_convert(window, x);
  }
  conv3d_backward_input(out, padded, w, p);
  if (!bias.data) return;
  visit_floating(out.dtype, [&](auto t) { add_channel_bias<decltype(t)>(out, bias); });
}

}  // namespace kiln::cpu
