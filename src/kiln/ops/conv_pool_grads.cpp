// Backward of conv2d and the 2-D pooling ops: the backward ops
// (conv2d_backward_input, conv2d_backward_weight, max_pool2d_backward,
// avg_pool2d_backward, adaptive_avg_pool2d_backward) and the rules built
// from them. Each backward op checks its grad_output against what its
// forward op's own shape inference says, so the two can never disagree.
// The backward ops have no rules of their own (no double backward yet).
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace conv_pool {
namespace {

// The forward op's output shape for these inputs (and all its checks).
DimList forward_shape(const char* forward, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  return infer_meta(op(forward), inputs, attrs).outputs[0].shape;
}

void check_grad_shape(const InferArgs& args, const DimList& expected, const char* forward) {
  const DimList& got = args.inputs[0].shape;
  KILN_CHECK(got == expected, args.op.name, ": expected grad_output of shape ", expected, " (",
             forward, "'s output), got ", got);
}

// ---- conv2d_backward_input(grad_out, weight; input_size, ...) ----------

InferResult infer_conv_backward_input(const InferArgs& args) {
  DType dtype = result_type(args.inputs);
  KILN_CHECK_TYPE(is_floating(dtype), args.op.name, ": expected floating inputs, got ", dtype);
  TensorMeta metas[2] = {TensorMeta{dtype, args.attrs.get_dims("input_size")}, args.inputs[1]};
  check_grad_shape(args, forward_shape("conv2d", metas, args.attrs), "conv2d");
  return InferResult{{metas[0]}, {dtype, dtype}};
}

void conv_backward_input_kernel(const KernelArgs& args) {
  cpu::conv2d_backward_input(batched(args.outputs[0]), batched(args.inputs[0]), args.inputs[1],
                             conv_params(args.attrs));
}

// ---- conv2d_backward_weight(grad_out, input; weight_size, ...) ---------

InferResult infer_conv_backward_weight(const InferArgs& args) {
  DType dtype = result_type(args.inputs);
  KILN_CHECK_TYPE(is_floating(dtype), args.op.name, ": expected floating inputs, got ", dtype);
  TensorMeta metas[2] = {args.inputs[1], TensorMeta{dtype, args.attrs.get_dims("weight_size")}};
  check_grad_shape(args, forward_shape("conv2d", metas, args.attrs), "conv2d");
  return InferResult{{metas[1]}, {dtype, dtype}};
}

void conv_backward_weight_kernel(const KernelArgs& args) {
  cpu::conv2d_backward_weight(args.outputs[0], batched(args.inputs[0]), batched(args.inputs[1]),
                              conv_params(args.attrs));
}

// ---- pooling backward (grad_out, x; the forward's attributes) ----------

template <const char* forward>
InferResult infer_pool_backward(const InferArgs& args) {
  const TensorMeta& x = args.inputs[1];
  check_floating(args, 1);
  DimList expected = forward_shape(forward, args.inputs.subspan(1), args.attrs);
  check_grad_shape(args, expected, forward);
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {x.dtype, x.dtype}};
}

constexpr char kMaxPool[] = "max_pool2d";
constexpr char kAvgPool[] = "avg_pool2d";
constexpr char kAdaptiveAvgPool[] = "adaptive_avg_pool2d";

void max_pool_backward_kernel(const KernelArgs& args) {
  static const OpDef& def = op(kMaxPool);
  const cpu::StridedView& x = args.inputs[1];
  cpu::max_pool2d_backward(batched(args.outputs[0]), batched(args.inputs[0]), batched(x),
                           params_for(def, x, args.attrs, true));
}

void avg_pool_backward_kernel(const KernelArgs& args) {
  static const OpDef& def = op(kAvgPool);
  cpu::avg_pool2d_backward(batched(args.outputs[0]), batched(args.inputs[0]),
                           params_for(def, args.inputs[1], args.attrs, false));
}

// The output size is grad_output's spatial size.
InferResult infer_adaptive_backward(const InferArgs& args) {
  const TensorMeta &dy = args.inputs[0], &x = args.inputs[1];
  check_floating(args, 1);
  KILN_CHECK(dy.dim() == x.dim() && dy.dim() >= 2, args.op.name,
             ": expected grad_output with the input's number of dims, got shapes ", dy.shape,
             " and ", x.shape);
  Attrs attrs{{"output_size", canonical_attr(DimList(dy.shape.end() - 2, dy.shape.end()))}};
  check_grad_shape(args, forward_shape(kAdaptiveAvgPool, args.inputs.subspan(1), attrs),
                   kAdaptiveAvgPool);
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {x.dtype, x.dtype}};
}

void adaptive_backward_kernel(const KernelArgs& args) {
  cpu::adaptive_avg_pool2d_backward(batched(args.outputs[0]), batched(args.inputs[0]));
}

}  // namespace

// ---- backward rules ----------------------------------------------------

// y = conv(x, w) + b is linear in x and in w: dx is the transposed
// convolution of dy with w, dw the correlation of x with dy, and db the sum
// of dy over every dim but the channels.
std::vector<Tensor> conv2d_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const Attrs& a = ctx.attrs();
  Tensor gx, gw, gb;
  const IntList &stride = a.get_ints("stride"), &padding = a.get_ints("padding"),
                &dilation = a.get_ints("dilation");
  const int64_t groups = a.get_int("groups");
  if (ctx.needs_input_grad(0)) {
    gx = conv2d_backward_input(g, ctx.input(1), ctx.input_shape(0), stride, padding, dilation,
                               groups);
  }
  if (ctx.needs_input_grad(1)) {
    gw = conv2d_backward_weight(g, ctx.input(0), ctx.input_shape(1), stride, padding, dilation,
                                groups);
  }
  std::vector<Tensor> grads{gx, gw};
  if (ctx.num_inputs() < 3) return grads;
  if (ctx.needs_input_grad(2)) {
    gb = g.dim() == 4 ? sum(g, {0, 2, 3}) : sum(g, {1, 2});
  }
  grads.push_back(gb);
  return grads;
}

// Only each window's max received its value: the gradient goes there.
std::vector<Tensor> max_pool2d_grad(const GradContext& ctx) {
  static const OpDef& backward = op("max_pool2d_backward");
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0)}, ctx.attrs())};
}

// Each output is an average: every element of its window gets 1/divisor of
// its gradient.
std::vector<Tensor> avg_pool2d_grad(const GradContext& ctx) {
  static const OpDef& backward = op("avg_pool2d_backward");
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0)}, ctx.attrs())};
}

std::vector<Tensor> adaptive_avg_pool2d_grad(const GradContext& ctx) {
  return {adaptive_avg_pool2d_backward(ctx.grad_output(0), ctx.input(0))};
}

void register_backward_ops(OpRegistry& registry) {
  const std::vector<AttrSpec> conv_attrs = {{"stride", AttrKind::Ints, IntList{1, 1}},
                                            {"padding", AttrKind::Ints, IntList{0, 0}},
                                            {"dilation", AttrKind::Ints, IntList{1, 1}},
                                            {"groups", AttrKind::Int, int64_t(1)}};
  auto with = [](std::vector<AttrSpec> specs, AttrSpec first) {
    specs.insert(specs.begin(), std::move(first));
    return specs;
  };
  // dx = conv2d_backward_input(dy, w; input_size = x's shape, conv2d's attributes).
  registry.add(OpDef{
      .name = "conv2d_backward_input",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = with(conv_attrs, {"input_size", AttrKind::Ints, {}}),
      .infer = infer_conv_backward_input,
      .cpu = conv_backward_input_kernel,
      .onnx = onnx_not_exportable("a backward op of conv2d: ONNX models hold forward graphs")});
  // dw = conv2d_backward_weight(dy, x; weight_size = w's shape, conv2d's attributes).
  registry.add(OpDef{
      .name = "conv2d_backward_weight",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = with(conv_attrs, {"weight_size", AttrKind::Ints, {}}),
      .infer = infer_conv_backward_weight,
      .cpu = conv_backward_weight_kernel,
      .onnx = onnx_not_exportable("a backward op of conv2d: ONNX models hold forward graphs")});
  // dx = *_pool2d_backward(dy, x; the forward's attributes).
  registry.add(OpDef{
      .name = "max_pool2d_backward",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = registry.get(kMaxPool).attrs,
      .infer = infer_pool_backward<kMaxPool>,
      .cpu = max_pool_backward_kernel,
      .onnx = onnx_not_exportable("a backward op of max_pool2d: ONNX models hold forward graphs")});
  registry.add(OpDef{
      .name = "avg_pool2d_backward",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = registry.get(kAvgPool).attrs,
      .infer = infer_pool_backward<kAvgPool>,
      .cpu = avg_pool_backward_kernel,
      .onnx = onnx_not_exportable("a backward op of avg_pool2d: ONNX models hold forward graphs")});
  registry.add(OpDef{.name = "adaptive_avg_pool2d_backward",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {},
                     .infer = infer_adaptive_backward,
                     .cpu = adaptive_backward_kernel,
                     .onnx = onnx_not_exportable(
                         "a backward op of adaptive_avg_pool2d: ONNX models hold forward graphs")});
}

}  // namespace conv_pool

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, IntList input_size,
                             IntList stride, IntList padding, IntList dilation, int64_t groups) {
  static const OpDef& backward_op = op("conv2d_backward_input");
  return dispatch1(
      backward_op, {grad_out, w},
      conv_pool::conv_backward_attrs("input_size", std::move(input_size), std::move(stride),
                                     std::move(padding), std::move(dilation), groups));
}

Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, IntList weight_size,
                              IntList stride, IntList padding, IntList dilation, int64_t groups) {
  static const OpDef& backward_op = op("conv2d_backward_weight");
  return dispatch1(
      backward_op, {grad_out, x},
      conv_pool::conv_backward_attrs("weight_size", std::move(weight_size), std::move(stride),
                                     std::move(padding), std::move(dilation), groups));
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& x, IntList kernel_size,
                           IntList stride, IntList padding, IntList dilation, bool ceil_mode) {
  static const OpDef& backward_op = op("max_pool2d_backward");
  return dispatch1(backward_op, {grad_out, x},
                   conv_pool::max_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), std::move(dilation), ceil_mode));
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& x, IntList kernel_size,
                           IntList stride, IntList padding, bool ceil_mode,
                           bool count_include_pad) {
  static const OpDef& backward_op = op("avg_pool2d_backward");
  return dispatch1(backward_op, {grad_out, x},
                   conv_pool::avg_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), ceil_mode, count_include_pad));
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& x) {
  static const OpDef& backward_op = op("adaptive_avg_pool2d_backward");
  return dispatch1(backward_op, {grad_out, x});
}

}  // namespace kiln
