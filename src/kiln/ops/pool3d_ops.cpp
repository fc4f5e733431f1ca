// max_pool3d, avg_pool3d and their backward ops: the 2-D pools' rules
// (PyTorch's) over (N, C, D, H, W) inputs (a 4-D input is one unbatched
// sample). One geometry function serves inference, the kernels and the
// backward ops' check of grad_output.
#include "kiln/kernels/cpu/pool3d.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"

namespace kiln {
namespace conv_pool {
namespace {

constexpr char kMaxPool[] = "max_pool3d";
constexpr char kAvgPool[] = "avg_pool3d";

struct Pool3dGeometry {
  cpu::Pool3dParams params;
  DimList out;  // the three spatial output sizes
};

Pool3dGeometry pool3d_geometry(const TensorMeta& x, const Attrs& attrs, const char* op,
                               bool has_dilation) {
  check_volume_input(x, op);
  const IntList& stride_attr = attrs.get_ints("stride");
  auto kernel = triple_of(attrs.get_ints("kernel_size"), op, "kernel_size");
  auto stride = stride_attr.empty() ? kernel : triple_of(stride_attr, op, "stride");
  auto padding = triple_of(attrs.get_ints("padding"), op, "padding");
  auto dilation = has_dilation ? triple_of(attrs.get_ints("dilation"), op, "dilation")
                               : std::array<int64_t, 3>{1, 1, 1};
  const bool ceil_mode = attrs.get_bool("ceil_mode");
  Pool3dGeometry g;
  for (size_t i = 0; i < 3; ++i) {
    KILN_CHECK(kernel[i] > 0, op, ": kernel_size must be greater than zero, but got ",
               attrs.get_ints("kernel_size"));
    KILN_CHECK(stride[i] > 0, op, ": stride must be greater than zero, but got ", stride_attr);
    KILN_CHECK(dilation[i] > 0, op, ": dilation must be greater than zero, but got ",
               attrs.get_ints("dilation"));
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
    const Dim& in = x.shape[x.shape.size() - 3 + i];
    g.out.push_back(pooled_size(in, kernel[i], padding[i], stride[i], dilation[i], ceil_mode));
    KILN_CHECK(!definitely_less(g.out.back(), 1), op, ": given input size ", x.shape,
               ", the calculated output size ", g.out.back(), " in spatial dim ", i,
               " is too small");
  }
  if (attrs.has("count_include_pad"))
    g.params.count_include_pad = attrs.get_bool("count_include_pad");
  return g;
}

template <const char* Op, bool HasDilation>
InferResult infer_pool3d(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  if (HasDilation) {
    check_not_bool(args, 0);
  } else {
    check_floating(args, 0);
  }
  Pool3dGeometry g = pool3d_geometry(x, args.attrs, Op, HasDilation);
  return InferResult{{TensorMeta{x.dtype, volume_output_shape(x, x.shape[x.dim() - 4], g.out)}},
                     {}};
}

cpu::Pool3dParams params_of(const cpu::StridedView& x, const Attrs& attrs, const char* op,
                            bool has_dilation) {
  TensorMeta meta{x.dtype, DimList(x.shape, x.shape + x.ndim)};
  return pool3d_geometry(meta, attrs, op, has_dilation).params;
}

void max_pool3d_kernel(const KernelArgs& args) {
  cpu::max_pool3d(batched5(args.outputs[0]), batched5(args.inputs[0]),
                  params_of(args.inputs[0], args.attrs, kMaxPool, true));
}

void avg_pool3d_kernel(const KernelArgs& args) {
  cpu::avg_pool3d(batched5(args.outputs[0]), batched5(args.inputs[0]),
                  params_of(args.inputs[0], args.attrs, kAvgPool, false));
}

// *_pool3d_backward(dy, x; the forward's attributes) -> dx, x's shape.
template <const char* Forward>
InferResult infer_pool3d_backward(const InferArgs& args) {
  const TensorMeta& x = args.inputs[1];
  check_floating(args, 1);
  static const OpDef& forward = op(Forward);
  const DimList expected = infer_meta(forward, args.inputs.subspan(1), args.attrs).outputs[0].shape;
  KILN_CHECK(args.inputs[0].shape == expected, args.op.name, ": expected grad_output of shape ",
             expected, " (", Forward, "'s output), got ", args.inputs[0].shape);
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {x.dtype, x.dtype}};
}

void max_pool3d_backward_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[1];
  cpu::max_pool3d_backward(batched5(args.outputs[0]), batched5(args.inputs[0]), batched5(x),
                           params_of(x, args.attrs, kMaxPool, true));
}

void avg_pool3d_backward_kernel(const KernelArgs& args) {
  cpu::avg_pool3d_backward(batched5(args.outputs[0]), batched5(args.inputs[0]),
                           params_of(args.inputs[1], args.attrs, kAvgPool, false));
}

// Only each window's max received its value: the gradient goes there.
std::vector<Tensor> max_pool3d_grad(const GradContext& ctx) {
  static const OpDef& backward = op("max_pool3d_backward");
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0)}, ctx.attrs())};
}

// Every element of a window gets 1/divisor of its output's gradient.
std::vector<Tensor> avg_pool3d_grad(const GradContext& ctx) {
  static const OpDef& backward = op("avg_pool3d_backward");
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0)}, ctx.attrs())};
}

}  // namespace

void register_pool3d_ops(OpRegistry& registry) {
  const std::vector<AttrSpec> max_attrs = {{"kernel_size", AttrKind::Ints, {}},
                                           {"stride", AttrKind::Ints, IntList{}},
                                           {"padding", AttrKind::Ints, IntList{0, 0, 0}},
                                           {"dilation", AttrKind::Ints, IntList{1, 1, 1}},
                                           {"ceil_mode", AttrKind::Bool, false}};
  const std::vector<AttrSpec> avg_attrs = {{"kernel_size", AttrKind::Ints, {}},
                                           {"stride", AttrKind::Ints, IntList{}},
                                           {"padding", AttrKind::Ints, IntList{0, 0, 0}},
                                           {"ceil_mode", AttrKind::Bool, false},
                                           {"count_include_pad", AttrKind::Bool, true}};
  registry.add(OpDef{.name = kMaxPool,
                     .attrs = max_attrs,
                     .infer = infer_pool3d<kMaxPool, true>,
                     .cpu = max_pool3d_kernel,
                     .grad = max_pool3d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"MaxPool"}});
  registry.add(OpDef{.name = kAvgPool,
                     .attrs = avg_attrs,
                     .infer = infer_pool3d<kAvgPool, false>,
                     .cpu = avg_pool3d_kernel,
                     .grad = avg_pool3d_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"AveragePool"}});
  registry.add(OpDef{
      .name = "max_pool3d_backward",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = max_attrs,
      .infer = infer_pool3d_backward<kMaxPool>,
      .cpu = max_pool3d_backward_kernel,
      .onnx = onnx_not_exportable("a backward op of max_pool3d: ONNX models hold forward graphs")});
  registry.add(OpDef{
      .name = "avg_pool3d_backward",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = avg_attrs,
      .infer = infer_pool3d_backward<kAvgPool>,
      .cpu = avg_pool3d_backward_kernel,
      .onnx = onnx_not_exportable("a backward op of avg_pool3d: ONNX models hold forward graphs")});
}

}  // namespace conv_pool

Tensor max_pool3d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  static const OpDef& pool_op = op("max_pool3d");
  return dispatch1(pool_op, {x},
                   conv_pool::max_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), std::move(dilation), ceil_mode));
}

Tensor avg_pool3d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  static const OpDef& pool_op = op("avg_pool3d");
  return dispatch1(pool_op, {x},
                   conv_pool::avg_pool_attrs(std::move(kernel_size), std::move(stride),
                                             std::move(padding), ceil_mode, count_include_pad));
}

}  // namespace kiln
