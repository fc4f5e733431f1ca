// conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d. Every check on shapes
// and attributes lives in the geometry helpers below, which inference and the
// kernel glue share, so the two never disagree about an output size.
#include "kiln/ops/conv_pool.h"

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"

namespace kiln {
namespace conv_pool {
// A one-element list means the same value for height and width.
std::array<int64_t, 2> pair_of(const IntList& values, const char* op, const char* name) {
  KILN_CHECK(values.size() == 1 || values.size() == 2, op, ": ", name,
             " must be a single int or a pair of ints, got ", values);
  return {values[0], values.back()};
}

namespace {

void check_spatial_input(const TensorMeta& x, const char* op) {
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, op,
             ": expected 3-D (unbatched) or 4-D (batched) input, got shape ", x.shape);
}

}  // namespace

// x as [N, C, H, W] (a 3-D input is one sample) and out to match.
cpu::StridedView batched(const cpu::StridedView& v) {
  if (v.ndim == 4) return v;
  cpu::StridedView out = v;
  out.ndim = 4;
  for (int d = 3; d > 0; --d) {
    out.shape[d] = v.shape[d - 1];
    out.strides[d] = v.strides[d - 1];
  }
  out.shape[0] = 1;
  out.strides[0] = 0;
  return out;
}

namespace {

DimList output_shape(const TensorMeta& x, const Dim& channels, const Dim& oh, const Dim& ow) {
  return x.dim() == 4 ? DimList{x.shape[0], channels, oh, ow} : DimList{channels, oh, ow};
}

// ---- conv2d ------------------------------------------------------------

}  // namespace

Dim pooled_size(const Dim& in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                bool ceil_mode) {
  const Dim span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  Dim out = floordiv(span, stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) out -= 1;
  return out;
}

cpu::Conv2dParams conv_params(const Attrs& attrs, const char* op) {
  cpu::Conv2dParams p;
  auto stride = pair_of(attrs.get_ints("stride"), op, "stride");
  auto padding = pair_of(attrs.get_ints("padding"), op, "padding");
  auto dilation = pair_of(attrs.get_ints("dilation"), op, "dilation");
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = stride[size_t(i)];
    p.padding[i] = padding[size_t(i)];
    p.dilation[i] = dilation[size_t(i)];
  }
  p.groups = attrs.get_int("groups");
  KILN_CHECK(p.stride[0] > 0 && p.stride[1] > 0, op, ": non-positive stride is not supported, got ",
             attrs.get_ints("stride"));
  KILN_CHECK(p.padding[0] >= 0 && p.padding[1] >= 0, op,
             ": negative padding is not supported, got ", attrs.get_ints("padding"));
  KILN_CHECK(p.dilation[0] > 0 && p.dilation[1] > 0, op, ": dilation must be positive, got ",
             attrs.get_ints("dilation"));
  KILN_CHECK(p.groups > 0, op, ": non-positive groups is not supported, got ", p.groups);
  return p;
}

namespace {

InferResult infer_conv2d(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1];
  const bool has_bias = args.inputs.size() > 2 && args.inputs[2].defined;
  check_spatial_input(x, "conv2d");
  KILN_CHECK(w.dim() == 4,
             "conv2d: expected 4-D weight [out_channels, in_channels / groups, kH, kW], got shape ",
             w.shape);
  const cpu::Conv2dParams p = conv_params(args.attrs);
  const Dim C = x.shape[x.shape.size() - 3], H = x.shape[x.shape.size() - 2], W = x.shape.back();
  const Dim& OC = w.shape[0];
  // A symbolic number of filters stays symbolic in the output; whether
  // groups divide it is checked once it is a number (each call's static plan).
  KILN_CHECK(!OC.is_static() || OC.static_value() % p.groups == 0,
             "conv2d: given groups=", p.groups, ", expected weight to be divisible by ", p.groups,
             " at dimension 0, but got weight of size ", w.shape, " instead");
  KILN_CHECK(C == w.shape[1] * p.groups, "conv2d: given groups=", p.groups, ", weight of size ",
             w.shape, ", expected input", x.shape, " to have ", w.shape[1] * p.groups,
             " channels, but got ", C, " channels instead");
  if (has_bias) {
    const TensorMeta& b = args.inputs[2];
    KILN_CHECK(b.dim() == 1 && b.shape[0] == OC, "conv2d: given weight of size ", w.shape,
               ", expected bias to be 1-dimensional with ", OC, " elements, but got bias of size ",
               b.shape, " instead");
  }
  const Dim padded_h = H + 2 * p.padding[0], padded_w = W + 2 * p.padding[1];
  const Dim eff_kh = p.dilation[0] * (w.shape[2] - 1) + 1;
  const Dim eff_kw = p.dilation[1] * (w.shape[3] - 1) + 1;
  KILN_CHECK(!definitely_less(padded_h, eff_kh) && !definitely_less(padded_w, eff_kw),
             "conv2d: calculated padded input size per channel: (", padded_h, " x ", padded_w,
             "). Kernel size: (", eff_kh, " x ", eff_kw,
             "). Kernel size can't be greater than actual input size");
  DType dtype = result_type(args.inputs);
  KILN_CHECK_TYPE(is_floating(dtype), "conv2d: expected floating inputs, got ", dtype);
  const Dim oh = floordiv(padded_h - eff_kh, p.stride[0]) + 1;
  const Dim ow = floordiv(padded_w - eff_kw, p.stride[1]) + 1;
  return InferResult{{TensorMeta{dtype, output_shape(x, OC, oh, ow)}},
                     std::vector<DType>(args.inputs.size(), dtype)};
}

cpu::StridedView conv_bias(const KernelArgs& args) {
  return args.inputs.size() > 2 ? args.inputs[2] : cpu::StridedView{};
}

void conv2d_kernel(const KernelArgs& args) {
  cpu::conv2d(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1], conv_bias(args),
              conv_params(args.attrs));
}

// The primitive created once for the plan's fixed geometry.
class PreparedConv2d final : public PreparedKernel {
 public:
  explicit PreparedConv2d(const KernelArgs& args)
      : plan_(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1], conv_bias(args),
              conv_params(args.attrs)) {}

  void run(const KernelArgs& args) const override {
    plan_.run(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1], conv_bias(args));
  }

  bool take_relu() override { return plan_.take_relu(); }

  // The weight, kept in oneDNN's blocked layout across calls.
  int packable_input() const override { return plan_.packs_weights() ? 1 : -1; }
  void run_packed(const KernelArgs& args, uint64_t version) const override {
    plan_.run_packed(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1],
                     conv_bias(args), version);
  }

 private:
  cpu::Conv2dPlan plan_;
};

std::unique_ptr<PreparedKernel> prepare_conv2d(const KernelArgs& args) {
  return std::make_unique<PreparedConv2d>(args);
}

// ---- pooling -----------------------------------------------------------

struct PoolGeometry {
  cpu::Pool2dParams params;
  Dim out_h = 0, out_w = 0;
};

PoolGeometry pool_geometry(const InferArgs& args, const char* op, bool has_dilation) {
  const TensorMeta& x = args.inputs[0];
  const Attrs& attrs = args.attrs;
  check_spatial_input(x, op);
  const IntList& stride_attr = attrs.get_ints("stride");
  auto kernel = pair_of(attrs.get_ints("kernel_size"), op, "kernel_size");
  auto stride = stride_attr.empty() ? kernel : pair_of(stride_attr, op, "stride");
  auto padding = pair_of(attrs.get_ints("padding"), op, "padding");
  auto dilation = has_dilation ? pair_of(attrs.get_ints("dilation"), op, "dilation")
                               : std::array<int64_t, 2>{1, 1};
  KILN_CHECK(kernel[0] > 0 && kernel[1] > 0, op,
             ": kernel_size must be greater than zero, but got ", attrs.get_ints("kernel_size"));
  KILN_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride must be greater than zero, but got ",
             stride_attr);
  KILN_CHECK(dilation[0] > 0 && dilation[1] > 0, op,
             ": dilation must be greater than zero, but got ", attrs.get_ints("dilation"));
  PoolGeometry g;
  for (size_t i = 0; i < 2; ++i) {
    KILN_CHECK(padding[i] >= 0, op, ": padding must be non-negative, got ",
               attrs.get_ints("padding"));
    const int64_t eff_kernel = (kernel[i] - 1) * dilation[i] + 1;
    KILN_CHECK(padding[i] <= eff_kernel / 2, op,
               ": pad should be at most half of effective kernel size, but got pad=", padding[i],
               ", kernel_size=", kernel[i], " and dilation=", dilation[i]);
    g.params.kernel[i] = kernel[i];
    g.params.stride[i] = stride[i];
    g.params.padding[i] = padding[i];
    g.params.dilation[i] = dilation[i];
  }
  const bool ceil_mode = attrs.get_bool("ceil_mode");
  const Dim C = x.shape[x.shape.size() - 3], H = x.shape[x.shape.size() - 2], W = x.shape.back();
  g.out_h = pooled_size(H, kernel[0], padding[0], stride[0], dilation[0], ceil_mode);
  g.out_w = pooled_size(W, kernel[1], padding[1], stride[1], dilation[1], ceil_mode);
  KILN_CHECK(!definitely_less(g.out_h, 1) && !definitely_less(g.out_w, 1), op,
             ": given input size: (", C, "x", H, "x", W, "). Calculated output size: (", C, "x",
             g.out_h, "x", g.out_w, "). Output size is too small");
  if (attrs.has("count_include_pad"))
    g.params.count_include_pad = attrs.get_bool("count_include_pad");
  return g;
}

InferResult infer_pool(const InferArgs& args, const char* op, bool has_dilation) {
  const TensorMeta& x = args.inputs[0];
  PoolGeometry g = pool_geometry(args, op, has_dilation);
  return InferResult{
      {TensorMeta{x.dtype, output_shape(x, x.shape[x.shape.size() - 3], g.out_h, g.out_w)}}, {}};
}

InferResult infer_max_pool2d(const InferArgs& args) {
  check_not_bool(args, 0);
  return infer_pool(args, "max_pool2d", true);
}

InferResult infer_avg_pool2d(const InferArgs& args) {
  check_floating(args, 0);
  return infer_pool(args, "avg_pool2d", false);
}

}  // namespace

// The kernel glue re-derives the geometry from the input's meta; it is
// cheap and keeps one definition of every size.
cpu::Pool2dParams params_for(const OpDef& def, const cpu::StridedView& x, const Attrs& attrs,
                             bool has_dilation) {
  TensorMeta meta{x.dtype, DimList(x.shape, x.shape + x.ndim)};
  return pool_geometry(InferArgs{def, {&meta, 1}, attrs}, def.name.c_str(), has_dilation).params;
}

namespace {

void max_pool2d_kernel(const KernelArgs& args) {
  static const OpDef& def = op("max_pool2d");
  cpu::max_pool2d(batched(args.outputs[0]), batched(args.inputs[0]),
                  params_for(def, args.inputs[0], args.attrs, true));
}

void avg_pool2d_kernel(const KernelArgs& args) {
  static const OpDef& def = op("avg_pool2d");
  cpu::avg_pool2d(batched(args.outputs[0]), batched(args.inputs[0]),
                  params_for(def, args.inputs[0], args.attrs, false));
}

InferResult infer_adaptive_avg_pool2d(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  check_spatial_input(x, "adaptive_avg_pool2d");
  check_floating(args, 0);
  auto size = pair_of(args.attrs.get_ints("output_size"), "adaptive_avg_pool2d", "output_size");
  KILN_CHECK(
      size[0] >= 0 && size[1] >= 0,
      "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0, got ",
      args.attrs.get_ints("output_size"));
  const Dim H = x.shape[x.shape.size() - 2], W = x.shape.back();
  KILN_CHECK(!definitely_less(H, 1) && !definitely_less(W, 1),
             "adaptive_avg_pool2d: expected input to have non-zero size for "
             "non-batch dimensions, but input has shape ",
             x.shape);
  const Dim C = x.shape[x.shape.size() - 3];
  return InferResult{{TensorMeta{x.dtype, output_shape(x, C, size[0], size[1])}}, {}};
}

void adaptive_avg_pool2d_kernel(const KernelArgs& args) {
  cpu::adaptive_avg_pool2d(batched(args.outputs[0]), batched(args.inputs[0]));
}

}  // namespace
}  // namespace conv_pool

void register_conv_pool_ops(OpRegistry& registry) {
  using namespace conv_pool;
  registry.add(OpDef{.name = "conv2d",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = {{"stride", AttrKind::Ints, IntList{1, 1}},
                               {"padding", AttrKind::Ints, IntList{0, 0}},
                               {"dilation", AttrKind::Ints, IntList{1, 1}},
                               {"groups", AttrKind::Int, int64_t(1)}},
                     .infer = infer_conv2d,
                     .cpu = conv2d_kernel,
                     .grad = conv2d_grad,
                     .prepare = prepare_conv2d,
                     .kind = OpKind::Opaque,
                     .onnx = {"Conv"}});
  registry.add(OpDef{.name = "max_pool2d",
                     .attrs = {{"kernel_size", AttrKind::Ints, {}},
                               {"stride", AttrKind::Ints, IntList{}},
                               {"padding", AttrKind::Ints, IntList{0, 0}},
                               {"dilation", AttrKind::Ints, IntList{1, 1}},
                               {"ceil_mode", AttrKind::Bool, false}},
                     .infer = infer_max_pool2d,
                     .cpu = max_pool2d_kernel,
                     .grad = max_pool2d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"MaxPool"}});
  registry.add(OpDef{.name = "avg_pool2d",
                     .attrs = {{"kernel_size", AttrKind::Ints, {}},
                               {"stride", AttrKind::Ints, IntList{}},
                               {"padding", AttrKind::Ints, IntList{0, 0}},
                               {"ceil_mode", AttrKind::Bool, false},
                               {"count_include_pad", AttrKind::Bool, true}},
                     .infer = infer_avg_pool2d,
                     .cpu = avg_pool2d_kernel,
                     .grad = avg_pool2d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"AveragePool"}});
  // ONNX has GlobalAveragePool for output_size [1, 1]; other sizes need the
  // exporter to lower to AveragePool when the windows are even.
  registry.add(OpDef{.name = "adaptive_avg_pool2d",
                     .attrs = {{"output_size", AttrKind::Ints, {}}},
                     .infer = infer_adaptive_avg_pool2d,
                     .cpu = adaptive_avg_pool2d_kernel,
                     .grad = adaptive_avg_pool2d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"GlobalAveragePool"}});
  register_backward_ops(registry);
  register_conv_transpose_ops(registry);
  register_conv3d_ops(registry);
  register_pool3d_ops(registry);
  register_max_pool_indices_ops(registry);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride, IntList padding,
              IntList dilation, int64_t groups) {
  static const OpDef& conv_op = op("conv2d");
  return dispatch1(
      conv_op, {x, w, b},
      conv_pool::conv_attrs(std::move(stride), std::move(padding), std::move(dilation), groups));
}

Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  static const OpDef& pool_op = op("max_pool2d");
  return dispatch1(pool_op, {x},
                   conv_pool::max_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), std::move(dilation), ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  static const OpDef& pool_op = op("avg_pool2d");
  return dispatch1(pool_op, {x},
                   conv_pool::avg_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), ceil_mode, count_include_pad));
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size) {
  static const OpDef& pool_op = op("adaptive_avg_pool2d");
  return dispatch1(pool_op, {x}, {{"output_size", std::move(output_size)}});
}

}  // namespace kiln
