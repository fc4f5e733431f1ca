// conv3d, its backward ops (conv3d_backward_input, conv3d_backward_weight)
// and conv_transpose3d: the 2-D ops' rules over (N, C, D, H, W) inputs (a
// 4-D input is one unbatched sample). Inference and the kernel glue share
// one reading of the attributes; the backward ops check grad_output against
// conv3d's own inference.
#include "kiln/kernels/cpu/conv3d.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/resample.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace conv_pool {

std::array<int64_t, 3> triple_of(const IntList& values, const char* op, const char* name) {
  KILN_CHECK(values.size() == 1 || values.size() == 3, op, ": ", name,
             " must be a single int or a triple of ints, got ", values);
  return {values[0], values[values.size() / 2], values.back()};
}

void check_volume_input(const TensorMeta& x, const char* op) {
  KILN_CHECK(x.dim() == 4 || x.dim() == 5, op,
             ": expected 4-D (unbatched) or 5-D (batched) input, got shape ", x.shape);
}

// x as [N, C, D, H, W] (a 4-D input is one sample).
cpu::StridedView batched5(const cpu::StridedView& v) {
  if (v.ndim == 5) return v;
  cpu::StridedView out = v;
  out.ndim = 5;
  for (int d = 4; d > 0; --d) {
    out.shape[d] = v.shape[d - 1];
    out.strides[d] = v.strides[d - 1];
  }
  out.shape[0] = 1;
  out.strides[0] = 0;
  return out;
}

DimList volume_output_shape(const TensorMeta& x, const Dim& channels, const DimList& spatial) {
  DimList shape;
  if (x.dim() == 5) shape.push_back(x.shape[0]);
  shape.push_back(channels);
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

namespace {

Tensor sum_but_channels(const Tensor& g) {
  return g.dim() == 5 ? sum(g, {0, 2, 3, 4}) : sum(g, {1, 2, 3});
}

cpu::Conv3dParams conv3d_params(const Attrs& attrs, const char* op) {
  cpu::Conv3dParams p;
  auto stride = triple_of(attrs.get_ints("stride"), op, "stride");
  auto padding = triple_of(attrs.get_ints("padding"), op, "padding");
  auto dilation = triple_of(attrs.get_ints("dilation"), op, "dilation");
  for (size_t i = 0; i < 3; ++i) {
    KILN_CHECK(stride[i] > 0, op, ": non-positive stride is not supported, got ",
               attrs.get_ints("stride"));
    KILN_CHECK(padding[i] >= 0, op, ": negative padding is not supported, got ",
               attrs.get_ints("padding"));
    KILN_CHECK(dilation[i] > 0, op, ": dilation must be positive, got ",
               attrs.get_ints("dilation"));
    p.stride[i] = stride[i];
    p.padding[i] = padding[i];
    p.dilation[i] = dilation[i];
  }
  p.groups = attrs.get_int("groups");
  KILN_CHECK(p.groups > 0, op, ": non-positive groups is not supported, got ", p.groups);
  return p;
}

void check_groups_divide(const TensorMeta& w, int64_t groups, const char* op) {
  // A symbolic dim stays symbolic; whether groups divide it is checked once
  // it is a number.
  KILN_CHECK(!w.shape[0].is_static() || w.shape[0].static_value() % groups == 0, op,
             ": given groups=", groups, ", expected weight to be divisible by ", groups,
             " at dimension 0, but got weight of size ", w.shape, " instead");
}

void check_bias(const InferArgs& args, const Dim& channels, const char* op) {
  if (args.inputs.size() < 3 || !args.inputs[2].defined) return;
  const TensorMeta& b = args.inputs[2];
  KILN_CHECK(b.dim() == 1 && b.shape[0] == channels, op, ": given weight of size ",
             args.inputs[1].shape, ", expected bias to be 1-dimensional with ", channels,
             " elements, but got bias of size ", b.shape, " instead");
}

DType floating_result(const InferArgs& args, const char* op) {
  const DType dtype = result_type(args.inputs);
  KILN_CHECK_TYPE(is_floating(dtype), op, ": expected floating inputs, got ", dtype);
  return dtype;
}

// ---- conv3d ------------------------------------------------------------

InferResult infer_conv3d(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1];
  check_volume_input(x, "conv3d");
  KILN_CHECK(w.dim() == 5,
             "conv3d: expected 5-D weight [out_channels, in_channels / groups, kD, kH, kW], got "
             "shape ",
             w.shape);
  const cpu::Conv3dParams p = conv3d_params(args.attrs, "conv3d");
  check_groups_divide(w, p.groups, "conv3d");
  const Dim C = x.shape[x.shape.size() - 4];
  KILN_CHECK(C == w.shape[1] * p.groups, "conv3d: given groups=", p.groups, ", weight of size ",
             w.shape, ", expected input", x.shape, " to have ", w.shape[1] * p.groups,
             " channels, but got ", C, " channels instead");
  check_bias(args, w.shape[0], "conv3d");
  DimList spatial;
  for (size_t i = 0; i < 3; ++i) {
    const Dim padded = x.shape[x.shape.size() - 3 + i] + 2 * p.padding[i];
    const Dim eff_kernel = p.dilation[i] * (w.shape[2 + i] - 1) + 1;
    KILN_CHECK(!definitely_less(padded, eff_kernel), "conv3d: calculated padded input size ",
               padded, " in spatial dim ", i, " is less than the (dilated) kernel size ",
               eff_kernel);
    spatial.push_back(floordiv(padded - eff_kernel, p.stride[i]) + 1);
  }
  const DType dtype = floating_result(args, "conv3d");
  return InferResult{{TensorMeta{dtype, volume_output_shape(x, w.shape[0], spatial)}},
                     std::vector<DType>(args.inputs.size(), dtype)};
}

cpu::StridedView bias_of(const KernelArgs& args) {
  return args.inputs.size() > 2 ? args.inputs[2] : cpu::StridedView{};
}

void conv3d_kernel(const KernelArgs& args) {
  cpu::conv3d(batched5(args.outputs[0]), batched5(args.inputs[0]), args.inputs[1], bias_of(args),
              conv3d_params(args.attrs, "conv3d"));
}

DimList conv3d_shape(std::span<const TensorMeta> inputs, const Attrs& attrs) {
  static const OpDef& forward = op("conv3d");
  return infer_meta(forward, inputs, attrs).outputs[0].shape;
}

void check_grad_shape(const InferArgs& args, const DimList& expected) {
  KILN_CHECK(args.inputs[0].shape == expected, args.op.name, ": expected grad_output of shape ",
             expected, " (conv3d's output), got ", args.inputs[0].shape);
}

// dx = conv3d_backward_input(dy, w; input_size = x's shape, conv3d's attributes).
InferResult infer_backward_input(const InferArgs& args) {
  const DType dtype = floating_result(args, args.op.name.c_str());
  TensorMeta metas[2] = {TensorMeta{dtype, args.attrs.get_dims("input_size")}, args.inputs[1]};
  check_grad_shape(args, conv3d_shape(metas, args.attrs));
  return InferResult{{metas[0]}, {dtype, dtype}};
}

void backward_input_kernel(const KernelArgs& args) {
  cpu::conv3d_backward_input(batched5(args.outputs[0]), batched5(args.inputs[0]), args.inputs[1],
                             conv3d_params(args.attrs, "conv3d_backward_input"));
}

// dw = conv3d_backward_weight(dy, x; weight_size = w's shape, conv3d's attributes).
InferResult infer_backward_weight(const InferArgs& args) {
  const DType dtype = floating_result(args, args.op.name.c_str());
  TensorMeta metas[2] = {args.inputs[1], TensorMeta{dtype, args.attrs.get_dims("weight_size")}};
  check_grad_shape(args, conv3d_shape(metas, args.attrs));
  return InferResult{{metas[1]}, {dtype, dtype}};
}

void backward_weight_kernel(const KernelArgs& args) {
  cpu::conv3d_backward_weight(args.outputs[0], batched5(args.inputs[0]), batched5(args.inputs[1]),
                              conv3d_params(args.attrs, "conv3d_backward_weight"));
}

// y = conv(x, w) + b is linear in x and in w: dx is the transposed
// convolution of dy with w, dw the correlation of x with dy, db the sum of
// dy over every dim but the channels.
std::vector<Tensor> conv3d_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const Attrs& a = ctx.attrs();
  const IntList &stride = a.get_ints("stride"), &padding = a.get_ints("padding"),
                &dilation = a.get_ints("dilation");
  const int64_t groups = a.get_int("groups");
  Tensor gx, gw, gb;
  if (ctx.needs_input_grad(0)) {
    gx = conv3d_backward_input(g, ctx.input(1), ctx.input_shape(0), stride, padding, dilation,
                               groups);
  }
  if (ctx.needs_input_grad(1)) {
    gw = conv3d_backward_weight(g, ctx.input(0), ctx.input_shape(1), stride, padding, dilation,
                                groups);
  }
  std::vector<Tensor> grads{gx, gw};
  if (ctx.num_inputs() < 3) return grads;
  if (ctx.needs_input_grad(2)) gb = sum_but_channels(g);
  grads.push_back(gb);
  return grads;
}

// ---- conv_transpose3d --------------------------------------------------

constexpr const char* kTranspose = "conv_transpose3d";

// output_padding, checked against the stride and dilation as PyTorch does.
std::array<int64_t, 3> output_padding_of(const Attrs& attrs, const cpu::Conv3dParams& p) {
  auto output_padding = triple_of(attrs.get_ints("output_padding"), kTranspose, "output_padding");
  for (size_t i = 0; i < 3; ++i) {
    KILN_CHECK(output_padding[i] >= 0, kTranspose,
               ": negative output_padding is not supported, got ",
               attrs.get_ints("output_padding"));
    KILN_CHECK(output_padding[i] < p.stride[i] || output_padding[i] < p.dilation[i], kTranspose,
               ": output padding must be smaller than either stride or dilation, but got "
               "output_padding ",
               attrs.get_ints("output_padding"), ", stride ", attrs.get_ints("stride"),
               " and dilation ", attrs.get_ints("dilation"));
  }
  return output_padding;
}

InferResult infer_conv_transpose3d(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1];
  check_volume_input(x, kTranspose);
  KILN_CHECK(w.dim() == 5, kTranspose,
             ": expected 5-D weight [in_channels, out_channels / groups, kD, kH, kW], got shape ",
             w.shape);
  const cpu::Conv3dParams p = conv3d_params(args.attrs, kTranspose);
  const auto output_padding = output_padding_of(args.attrs, p);
  check_groups_divide(w, p.groups, kTranspose);
  const Dim C = x.shape[x.shape.size() - 4];
  KILN_CHECK(C == w.shape[0], kTranspose, ": given transposed=1, weight of size ", w.shape,
             ", expected input", x.shape, " to have ", w.shape[0], " channels, but got ", C,
             " channels instead");
  const Dim OC = w.shape[1] * p.groups;
  check_bias(args, OC, kTranspose);
  DimList spatial;
  for (size_t i = 0; i < 3; ++i) {
    const Dim in = x.shape[x.shape.size() - 3 + i];
    const Dim out = (in - 1) * p.stride[i] - 2 * p.padding[i] +
                    p.dilation[i] * (w.shape[2 + i] - 1) + output_padding[i] + 1;
    KILN_CHECK(!definitely_less(out, 1), kTranspose, ": given input size ", x.shape,
               ", the calculated output size ", out, " in spatial dim ", i, " is too small");
    spatial.push_back(out);
  }
  const DType dtype = floating_result(args, kTranspose);
  return InferResult{{TensorMeta{dtype, volume_output_shape(x, OC, spatial)}},
                     std::vector<DType>(args.inputs.size(), dtype)};
}

void conv_transpose3d_kernel(const KernelArgs& args) {
  cpu::conv_transpose3d(batched5(args.outputs[0]), batched5(args.inputs[0]), args.inputs[1],
                        bias_of(args), conv3d_params(args.attrs, kTranspose));
}

// y = conv_transpose(x, w) + b is conv3d's input gradient: dx is conv3d of
// dy with w, dw conv3d's weight gradient with x in the role of its output
// gradient, db the sum of dy over all dims but the channels. An
// output_padding of at least the stride gives dy rows conv3d maps past x's
// last: dx drops them, and x gets zero rows there for dw.
std::vector<Tensor> conv_transpose3d_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const Attrs& a = ctx.attrs();
  const IntList &stride = a.get_ints("stride"), &padding = a.get_ints("padding"),
                &dilation = a.get_ints("dilation");
  const int64_t groups = a.get_int("groups");
  const cpu::Conv3dParams p = conv3d_params(a, kTranspose);
  const auto output_padding = output_padding_of(a, p);
  const IntList x_shape = ctx.input_shape(0);
  const int64_t rank = int64_t(x_shape.size());
  IntList extra(3);
  bool any_extra = false;
  for (size_t i = 0; i < 3; ++i) {
    extra[i] = output_padding[i] / p.stride[i];
    any_extra = any_extra || extra[i] > 0;
  }
  Tensor gx, gw, gb;
  if (ctx.needs_input_grad(0)) {
    gx = conv3d(g, ctx.input(1), {}, stride, padding, dilation, groups);
    for (size_t i = 0; i < 3; ++i) {
      const int64_t dim = rank - 3 + int64_t(i);
      if (extra[i] > 0) gx = narrow(gx, dim, 0, x_shape[size_t(dim)]);
    }
  }
  if (ctx.needs_input_grad(1)) {
    Tensor x = ctx.input(0);
    if (any_extra) x = pad(x, {0, extra[2], 0, extra[1], 0, extra[0]});
    gw = conv3d_backward_weight(x, g, ctx.input_shape(1), stride, padding, dilation, groups);
  }
  std::vector<Tensor> grads{gx, gw};
  if (ctx.num_inputs() < 3) return grads;
  if (ctx.needs_input_grad(2)) gb = sum_but_channels(g);
  grads.push_back(gb);
  return grads;
}

}  // namespace

void register_conv3d_ops(OpRegistry& registry) {
  const std::vector<AttrSpec> conv_attrs = {{"stride", AttrKind::Ints, IntList{1, 1, 1}},
                                            {"padding", AttrKind::Ints, IntList{0, 0, 0}},
                                            {"dilation", AttrKind::Ints, IntList{1, 1, 1}},
                                            {"groups", AttrKind::Int, int64_t(1)}};
  auto with = [](std::vector<AttrSpec> specs, AttrSpec first) {
    specs.insert(specs.begin(), std::move(first));
    return specs;
  };
  registry.add(OpDef{.name = "conv3d",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = conv_attrs,
                     .infer = infer_conv3d,
                     .cpu = conv3d_kernel,
                     .grad = conv3d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"Conv"}});
  registry.add(OpDef{
      .name = "conv3d_backward_input",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = with(conv_attrs, {"input_size", AttrKind::Ints, {}}),
      .infer = infer_backward_input,
      .cpu = backward_input_kernel,
      .onnx = onnx_not_exportable("a backward op of conv3d: ONNX models hold forward graphs")});
  registry.add(OpDef{
      .name = "conv3d_backward_weight",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = with(conv_attrs, {"weight_size", AttrKind::Ints, {}}),
      .infer = infer_backward_weight,
      .cpu = backward_weight_kernel,
      .onnx = onnx_not_exportable("a backward op of conv3d: ONNX models hold forward graphs")});
  registry.add(OpDef{.name = kTranspose,
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = {{"stride", AttrKind::Ints, IntList{1, 1, 1}},
                               {"padding", AttrKind::Ints, IntList{0, 0, 0}},
                               {"output_padding", AttrKind::Ints, IntList{0, 0, 0}},
                               {"groups", AttrKind::Int, int64_t(1)},
                               {"dilation", AttrKind::Ints, IntList{1, 1, 1}}},
                     .infer = infer_conv_transpose3d,
                     .cpu = conv_transpose3d_kernel,
                     .grad = conv_transpose3d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"ConvTranspose"}});
}

}  // namespace conv_pool

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride, IntList padding,
              IntList dilation, int64_t groups) {
  static const OpDef& conv_op = op("conv3d");
  return dispatch1(
      conv_op, {x, w, b},
      conv_pool::conv_attrs(std::move(stride), std::move(padding), std::move(dilation), groups));
}

Tensor conv3d_backward_input(const Tensor& grad_out, const Tensor& w, IntList input_size,
                             IntList stride, IntList padding, IntList dilation, int64_t groups) {
  static const OpDef& backward_op = op("conv3d_backward_input");
  return dispatch1(
      backward_op, {grad_out, w},
      conv_pool::conv_backward_attrs("input_size", std::move(input_size), std::move(stride),
                                     std::move(padding), std::move(dilation), groups));
}

Tensor conv3d_backward_weight(const Tensor& grad_out, const Tensor& x, IntList weight_size,
                              IntList stride, IntList padding, IntList dilation, int64_t groups) {
  static const OpDef& backward_op = op("conv3d_backward_weight");
  return dispatch1(
      backward_op, {grad_out, x},
      conv_pool::conv_backward_attrs("weight_size", std::move(weight_size), std::move(stride),
                                     std::move(padding), std::move(dilation), groups));
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
                        IntList padding, IntList output_padding, int64_t groups, IntList dilation) {
  static const OpDef& transpose_op = op("conv_transpose3d");
  return dispatch1(transpose_op, {x, w, b},
                   {{"stride", std::move(stride)},
                    {"padding", std::move(padding)},
                    {"output_padding", std::move(output_padding)},
                    {"groups", groups},
                    {"dilation", std::move(dilation)}});
}

}  // namespace kiln
