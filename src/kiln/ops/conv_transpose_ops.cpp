// conv_transpose2d: the transposed convolution. Its kernel is conv2d's
// input-gradient kernel (cpu::conv2d_backward_input) plus a bias, and its
// backward is conv2d itself (for the input) and conv2d's weight gradient.
#include "kiln/kernels/cpu/conv_transpose.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/resample.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace conv_pool {
namespace {

constexpr const char* kOp = "conv_transpose2d";

// output_padding, checked against the stride and dilation as PyTorch does:
// a larger one would add output rows no input element reaches.
std::array<int64_t, 2> output_padding_of(const Attrs& attrs, const cpu::Conv2dParams& p) {
  auto output_padding = pair_of(attrs.get_ints("output_padding"), kOp, "output_padding");
  KILN_CHECK(output_padding[0] >= 0 && output_padding[1] >= 0, kOp,
             ": negative output_padding is not supported, got ", attrs.get_ints("output_padding"));
  bool fits = true;
  for (size_t i = 0; i < 2; ++i)
    fits = fits && (output_padding[i] < p.stride[i] || output_padding[i] < p.dilation[i]);
  KILN_CHECK(fits, kOp,
             ": output padding must be smaller than either stride or dilation, but got "
             "output_padding_height: ",
             output_padding[0], " output_padding_width: ", output_padding[1],
             " stride_height: ", p.stride[0], " stride_width: ", p.stride[1],
             " dilation_height: ", p.dilation[0], " dilation_width: ", p.dilation[1]);
  return output_padding;
}

InferResult infer_conv_transpose2d(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1];
  const bool has_bias = args.inputs.size() > 2 && args.inputs[2].defined;
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, kOp,
             ": expected 3-D (unbatched) or 4-D (batched) input, got shape ", x.shape);
  KILN_CHECK(w.dim() == 4, kOp,
             ": expected 4-D weight [in_channels, out_channels / groups, kH, kW], got shape ",
             w.shape);
  const cpu::Conv2dParams p = conv_params(args.attrs, kOp);
  const auto output_padding = output_padding_of(args.attrs, p);
  const Dim C = x.shape[x.shape.size() - 3], H = x.shape[x.shape.size() - 2], W = x.shape.back();
  KILN_CHECK(!w.shape[0].is_static() || w.shape[0].static_value() % p.groups == 0, kOp,
             ": given groups=", p.groups, ", expected weight to be divisible by ", p.groups,
             " at dimension 0, but got weight of size ", w.shape, " instead");
  KILN_CHECK(C == w.shape[0], kOp, ": given transposed=1, weight of size ", w.shape,
             ", expected input", x.shape, " to have ", w.shape[0], " channels, but got ", C,
             " channels instead");
  const Dim OC = w.shape[1] * p.groups;
  if (has_bias) {
    const TensorMeta& b = args.inputs[2];
    KILN_CHECK(b.dim() == 1 && b.shape[0] == OC, kOp, ": given transposed=1, weight of size ",
               w.shape, ", expected bias to be 1-dimensional with ", OC,
               " elements, but got bias of size ", b.shape, " instead");
  }
  const Dim oh = (H - 1) * p.stride[0] - 2 * p.padding[0] + p.dilation[0] * (w.shape[2] - 1) +
                 output_padding[0] + 1;
  const Dim ow = (W - 1) * p.stride[1] - 2 * p.padding[1] + p.dilation[1] * (w.shape[3] - 1) +
                 output_padding[1] + 1;
  KILN_CHECK(!definitely_less(oh, 1) && !definitely_less(ow, 1), kOp,
             ": given input size per channel: (", H, " x ", W,
             "). Calculated output size per channel: (", oh, " x ", ow,
             "). Output size is too small");
  const DType dtype = result_type(args.inputs);
  KILN_CHECK_TYPE(is_floating(dtype), kOp, ": expected floating inputs, got ", dtype);
  DimList shape = x.dim() == 4 ? DimList{x.shape[0], OC, oh, ow} : DimList{OC, oh, ow};
  return InferResult{{TensorMeta{dtype, std::move(shape)}},
                     std::vector<DType>(args.inputs.size(), dtype)};
}

void conv_transpose2d_kernel(const KernelArgs& args) {
  const cpu::StridedView bias = args.inputs.size() > 2 ? args.inputs[2] : cpu::StridedView{};
  cpu::conv_transpose2d(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1], bias,
                        conv_params(args.attrs, kOp));
}

// y = conv_transpose(x, w) + b is conv2d's input gradient, linear in x and
// in w: dx is conv2d of dy with w, dw conv2d's weight gradient with x in
// the role of its output gradient, db the sum of dy over all dims but the
// channels. An output_padding at least the stride (allowed when the
// dilation is larger) gives dy rows that conv2d maps past x's last row:
// dx drops them, and x gets zero rows there for dw.
std::vector<Tensor> conv_transpose2d_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const Attrs& a = ctx.attrs();
  const IntList &stride = a.get_ints("stride"), &padding = a.get_ints("padding"),
                &dilation = a.get_ints("dilation");
  const int64_t groups = a.get_int("groups");
  const cpu::Conv2dParams p = conv_params(a, kOp);
  const auto output_padding = output_padding_of(a, p);
  const int64_t extra_h = output_padding[0] / p.stride[0];
  const int64_t extra_w = output_padding[1] / p.stride[1];
  const IntList x_shape = ctx.input_shape(0);
  const int64_t rank = int64_t(x_shape.size());
  Tensor gx, gw, gb;
  if (ctx.needs_input_grad(0)) {
    gx = conv2d(g, ctx.input(1), {}, stride, padding, dilation, groups);
    if (extra_h > 0) gx = narrow(gx, rank - 2, 0, x_shape[size_t(rank - 2)]);
    if (extra_w > 0) gx = narrow(gx, rank - 1, 0, x_shape[size_t(rank - 1)]);
  }
  if (ctx.needs_input_grad(1)) {
    Tensor x = ctx.input(0);
    if (extra_h > 0 || extra_w > 0) x = pad(x, {0, extra_w, 0, extra_h});
    gw = conv2d_backward_weight(x, g, ctx.input_shape(1), stride, padding, dilation, groups);
  }
  std::vector<Tensor> grads{gx, gw};
  if (ctx.num_inputs() < 3) return grads;
  if (ctx.needs_input_grad(2)) gb = rank == 4 ? sum(g, {0, 2, 3}) : sum(g, {1, 2});
  grads.push_back(gb);
  return grads;
}

}  // namespace

void register_conv_transpose_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = kOp,
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = {{"stride", AttrKind::Ints, IntList{1, 1}},
                               {"padding", AttrKind::Ints, IntList{0, 0}},
                               {"output_padding", AttrKind::Ints, IntList{0, 0}},
                               {"groups", AttrKind::Int, int64_t(1)},
                               {"dilation", AttrKind::Ints, IntList{1, 1}}},
                     .infer = infer_conv_transpose2d,
                     .cpu = conv_transpose2d_kernel,
                     .grad = conv_transpose2d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"ConvTranspose"}});
}

}  // namespace conv_pool

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
                        IntList padding, IntList output_padding, int64_t groups, IntList dilation) {
  static const OpDef& transpose_op = op("conv_transpose2d");
  return dispatch1(transpose_op, {x, w, b},
                   {{"stride", std::move(stride)},
                    {"padding", std::move(padding)},
                    {"output_padding", std::move(output_padding)},
                    {"groups", groups},
                    {"dilation", std::move(dilation)}});
}

}  // namespace kiln
