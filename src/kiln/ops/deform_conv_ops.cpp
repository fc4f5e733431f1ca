// Deformable convolution (kernels/cpu/deform_conv.h), three ops:
//
//   deform_conv2d(x, weight, offset, bias?, mask?)   ONNX's DeformConv (its
//       input order) and torchvision's deform_conv2d: sampling into columns,
//       then a GEMM per group, in one kernel;
//   deform_im2col(x, offset, mask?)   the columns alone, [N, C*kh*kw, OH*OW];
//   deform_im2col_backward(grad_columns, x, offset, mask?)   their gradients
//       w.r.t. x, offset and mask.
//
// deform_conv2d's backward is written with these and matmul: the weight's
// gradient is grad_output times the columns, the columns' gradient is the
// weight times grad_output, and deform_im2col_backward takes that back to
// x, offset and mask. deform_im2col_backward has no backward rule, so
// second derivatives through the sampling are an error naming it.
#include "kiln/kernels/cpu/deform_conv.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// stride, padding and dilation as two positive (padding: non-negative)
// values each, and offset_groups; the kernel size comes from the caller.
cpu::DeformGeometry geometry_of(const Attrs& attrs, int64_t kernel_h, int64_t kernel_w,
                                const char* op) {
  KILN_CHECK_VALUE(kernel_h > 0 && kernel_w > 0, op, ": expected a kernel of at least 1x1, got ",
                   kernel_h, "x", kernel_w);
  auto pair = [&](const char* name, int64_t least) {
    const IntList& v = attrs.get_ints(name);
    KILN_CHECK_VALUE(v.size() == 2 && v[0] >= least && v[1] >= least, op, ": ", name,
                     " must be two values of at least ", least, ", got ", attr_to_string(v));
    return v;
  };
  const IntList &stride = pair("stride", 1), &padding = pair("padding", 0),
                &dilation = pair("dilation", 1);
  const int64_t offset_groups = attrs.get_int("offset_groups");
  KILN_CHECK_VALUE(offset_groups > 0, op, ": offset_groups must be positive, got ", offset_groups);
  return {kernel_h,   kernel_w,    stride[0],   stride[1],    padding[0],
          padding[1], dilation[0], dilation[1], offset_groups};
}

cpu::DeformGeometry geometry_of(const Attrs& attrs, const char* op) {
  const IntList& kernel = attrs.get_ints("kernel_size");
  KILN_CHECK_VALUE(kernel.size() == 2 && kernel[0] > 0 && kernel[1] > 0, op,
                   ": kernel_size must be two positive sizes, got ", attr_to_string(kernel));
  return geometry_of(attrs, kernel[0], kernel[1], op);
}

Dim output_size(const Dim& in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation) {
  return floordiv(in + Dim(2 * pad - dilation * (kernel - 1) - 1), stride) + Dim(1);
}

// Checks x, offset and mask (absent: nullptr) against the geometry and gives
// [N, OH, OW].
DimList check_sampling(const char* op, const TensorMeta& x, const TensorMeta& offset,
                       const TensorMeta* mask, const cpu::DeformGeometry& g) {
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.shape);
  KILN_CHECK_TYPE(offset.dtype == x.dtype && (!mask || mask->dtype == x.dtype), op,
                  ": expected offset and mask of the input's dtype ", x.dtype, ", got ",
                  offset.dtype, mask ? " and " + to_string(mask->dtype) : std::string());
  KILN_CHECK(!x.shape[1].is_static() || x.shape[1].static_value() % g.offset_groups == 0, op,
             ": the input's ", x.shape[1], " channels do not split into ", g.offset_groups,
             " offset groups");
  const Dim out_h = output_size(x.shape[2], g.kernel_h, g.pad_h, g.stride_h, g.dilation_h);
  const Dim out_w = output_size(x.shape[3], g.kernel_w, g.pad_w, g.stride_w, g.dilation_w);
  KILN_CHECK(!definitely_less(out_h, 1) && !definitely_less(out_w, 1), op, ": input of shape ",
             x.shape, " is smaller than the dilated kernel ", g.kernel_h, "x", g.kernel_w,
             " (padding ", g.pad_h, ", ", g.pad_w, ")");
  const int64_t taps = g.kernel_h * g.kernel_w;
  const DimList want = {x.shape[0], Dim(2 * g.offset_groups * taps), out_h, out_w};
  KILN_CHECK(offset.dim() == 4 && equal_or_assumed(offset.shape, want), op,
             ": expected offset of shape [N, 2 * offset_groups * kh * kw, OH, OW] = ", want,
             " for input ", x.shape, ", got ", offset.shape);
  if (mask) {
    const DimList want_mask = {x.shape[0], Dim(g.offset_groups * taps), out_h, out_w};
    KILN_CHECK(mask->dim() == 4 && equal_or_assumed(mask->shape, want_mask), op,
               ": expected mask of shape [N, offset_groups * kh * kw, OH, OW] = ", want_mask,
               " for input ", x.shape, ", got ", mask->shape);
  }
  return {x.shape[0], out_h, out_w};
}

const TensorMeta* optional_meta(const InferArgs& args, size_t i) {
  return args.inputs.size() > i && args.inputs[i].defined ? &args.inputs[i] : nullptr;
}

// ---- deform_conv2d(x, weight, offset, bias?, mask?) ----

int64_t static_size(const Dim& d, const char* op, const char* what) {
  KILN_CHECK(d.is_static(), op, ": the ", what, " must be a fixed size, got ", d);
  return d.static_value();
}

InferResult infer_deform_conv2d(const InferArgs& args) {
  static constexpr const char* op = "deform_conv2d";
  check_floating(args, 0);
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1], &offset = args.inputs[2];
  const TensorMeta *bias = optional_meta(args, 3), *mask = optional_meta(args, 4);
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.shape);
  KILN_CHECK(w.dim() == 4, op, ": expected a 4-D weight [M, C / groups, kh, kw], got shape ",
             w.shape);
  KILN_CHECK_TYPE(w.dtype == x.dtype && (!bias || bias->dtype == x.dtype), op,
                  ": expected weight and bias of the input's dtype ", x.dtype);
  const cpu::DeformGeometry g =
      geometry_of(args.attrs, static_size(w.shape[2], op, "kernel height"),
                  static_size(w.shape[3], op, "kernel width"), op);
  const int64_t groups = args.attrs.get_int("groups");
  KILN_CHECK_VALUE(groups > 0, op, ": groups must be positive, got ", groups);
  KILN_CHECK(equal_or_assumed(x.shape[1], w.shape[1] * Dim(groups)), op,
             ": expected input channels = weight.shape[1] * groups = ", w.shape[1], " * ", groups,
             ", got input ", x.shape, " and weight ", w.shape);
  KILN_CHECK(!w.shape[0].is_static() || w.shape[0].static_value() % groups == 0, op, ": the ",
             w.shape[0], " output channels of weight ", w.shape, " do not split into ", groups,
             " groups");
  KILN_CHECK(!bias || (bias->dim() == 1 && equal_or_assumed(bias->shape[0], w.shape[0])), op,
             ": expected a bias of shape [", w.shape[0], "], got ", bias ? bias->shape : DimList{});
  const DimList nhw = check_sampling(op, x, offset, mask, g);
  return {{TensorMeta{x.dtype, {nhw[0], w.shape[0], nhw[1], nhw[2]}}}, {}};
}

cpu::StridedView view_or_absent(const KernelArgs& args, size_t i) {
  return args.inputs.size() > i ? args.inputs[i] : cpu::StridedView{};
}

void deform_conv2d_kernel(const KernelArgs& args) {
  const cpu::StridedView& w = args.inputs[1];
  cpu::deform_conv2d(args.outputs[0], args.inputs[0], w, args.inputs[2], view_or_absent(args, 4),
                     view_or_absent(args, 3),
                     geometry_of(args.attrs, w.shape[2], w.shape[3], "deform_conv2d"),
                     args.attrs.get_int("groups"));
}

Attrs im2col_attrs(const Attrs& conv, int64_t kernel_h, int64_t kernel_w) {
  return {{"kernel_size", IntList{kernel_h, kernel_w}},
          {"stride", conv.get_ints("stride")},
          {"padding", conv.get_ints("padding")},
          {"dilation", conv.get_ints("dilation")},
          {"offset_groups", conv.get_int("offset_groups")}};
}

std::vector<Tensor> deform_conv2d_grad(const GradContext& ctx) {
  static const OpDef& im2col = op("deform_im2col");
  static const OpDef& im2col_backward = op("deform_im2col_backward");
  const Tensor& gy = ctx.grad_output(0);
  const IntList x_shape = ctx.input_shape(0), w_shape = ctx.input_shape(1);
  const int64_t groups = ctx.attrs().get_int("groups"), batch = x_shape[0];
  const int64_t group_out = w_shape[0] / groups, group_rows = w_shape[1] * w_shape[2] * w_shape[3];
  const int64_t positions = gy.shape()[2] * gy.shape()[3];
  const Tensor mask = ctx.num_inputs() > 4 ? ctx.input(4) : Tensor{};
  const Attrs attrs = im2col_attrs(ctx.attrs(), w_shape[2], w_shape[3]);
  const Tensor gy_groups = reshape(gy, {batch, groups, group_out, positions});
  std::vector<Tensor> grads(ctx.num_inputs());
  if (ctx.needs_input_grad(1)) {
    std::vector<Tensor> sampled = {ctx.input(0), ctx.input(2)};
    if (mask.defined()) sampled.push_back(mask);
    const Tensor columns = dispatch1(im2col, sampled, attrs);
    const Tensor cols = reshape(columns, {batch, groups, group_rows, positions});
    grads[1] = reshape(sum(matmul(gy_groups, transpose(cols, 2, 3)), {0}), w_shape);
  }
  const bool samples = ctx.needs_input_grad(0) || ctx.needs_input_grad(2) ||
                       (mask.defined() && ctx.needs_input_grad(4));
  if (samples) {
    const Tensor w = reshape(ctx.input(1), {groups, group_out, group_rows});
    const Tensor grad_columns =
        reshape(matmul(transpose(w, 1, 2), gy_groups), {batch, groups * group_rows, positions});
    std::vector<Tensor> ins = {grad_columns, ctx.input(0), ctx.input(2)};
    if (mask.defined()) ins.push_back(mask);
    std::vector<Tensor> back = dispatch(im2col_backward, ins, attrs);
    if (ctx.needs_input_grad(0)) grads[0] = back[0];
    if (ctx.needs_input_grad(2)) grads[2] = back[1];
    if (mask.defined() && ctx.needs_input_grad(4)) grads[4] = back[2];
  }
  if (ctx.num_inputs() > 3 && ctx.needs_input_grad(3)) grads[3] = sum(gy, {0, 2, 3});
  return grads;
}

// ---- deform_im2col(x, offset, mask?) and its backward ----

InferResult infer_im2col(const InferArgs& args) {
  static constexpr const char* op = "deform_im2col";
  check_floating(args, 0);
  const cpu::DeformGeometry g = geometry_of(args.attrs, op);
  const TensorMeta& x = args.inputs[0];
  const DimList nhw = check_sampling(op, x, args.inputs[1], optional_meta(args, 2), g);
  return {
      {TensorMeta{x.dtype, {nhw[0], x.shape[1] * Dim(g.kernel_h * g.kernel_w), nhw[1] * nhw[2]}}},
      {}};
}

void im2col_kernel(const KernelArgs& args) {
  cpu::deform_im2col(args.outputs[0], args.inputs[0], args.inputs[1], view_or_absent(args, 2),
                     geometry_of(args.attrs, "deform_im2col"));
}

std::vector<Tensor> im2col_grad(const GradContext& ctx) {
  static const OpDef& backward = op("deform_im2col_backward");
  std::vector<Tensor> ins = {ctx.grad_output(0), ctx.input(0), ctx.input(1)};
  const bool has_mask = ctx.num_inputs() > 2 && ctx.input_meta(2).defined;
  if (has_mask) ins.push_back(ctx.input(2));
  std::vector<Tensor> back = dispatch(backward, ins, ctx.attrs());
  std::vector<Tensor> grads(ctx.num_inputs());
  for (size_t i = 0; i < 2; ++i)
    if (ctx.needs_input_grad(i)) grads[i] = back[i];
  if (has_mask && ctx.needs_input_grad(2)) grads[2] = back[2];
  return grads;
}

// -> grad_x, grad_offset, grad_mask ([0] when there is no mask).
InferResult infer_im2col_backward(const InferArgs& args) {
  static constexpr const char* op = "deform_im2col_backward";
  check_floating(args, 1);
  const cpu::DeformGeometry g = geometry_of(args.attrs, op);
  const TensorMeta &grad = args.inputs[0], &x = args.inputs[1], &offset = args.inputs[2];
  const TensorMeta* mask = optional_meta(args, 3);
  const DimList nhw = check_sampling(op, x, offset, mask, g);
  const DimList want = {nhw[0], x.shape[1] * Dim(g.kernel_h * g.kernel_w), nhw[1] * nhw[2]};
  KILN_CHECK(grad.dim() == 3 && equal_or_assumed(grad.shape, want), op,
             ": expected grad_columns of shape ", want, ", got ", grad.shape);
  KILN_CHECK_TYPE(grad.dtype == x.dtype, op, ": expected grad_columns of dtype ", x.dtype, ", got ",
                  grad.dtype);
  return {{TensorMeta{x.dtype, x.shape}, TensorMeta{x.dtype, offset.shape},
           TensorMeta{x.dtype, mask ? mask->shape : DimList{Dim(0)}}},
          {}};
}

void im2col_backward_kernel(const KernelArgs& args) {
  const bool has_mask = args.inputs.size() > 3 && args.inputs[3].data;
  cpu::deform_im2col_backward(args.outputs[0], args.outputs[1],
                              has_mask ? args.outputs[2] : cpu::StridedView{}, args.inputs[0],
                              args.inputs[1], args.inputs[2], view_or_absent(args, 3),
                              geometry_of(args.attrs, "deform_im2col_backward"));
}

std::vector<AttrSpec> sampling_attrs() {
  return {{"kernel_size", AttrKind::Ints, IntList{}},
          {"stride", AttrKind::Ints, IntList{1, 1}},
          {"padding", AttrKind::Ints, IntList{0, 0}},
          {"dilation", AttrKind::Ints, IntList{1, 1}},
          {"offset_groups", AttrKind::Int, int64_t(1)}};
}

}  // namespace

void register_deform_conv_ops(OpRegistry& registry) {
  registry.add(
      OpDef{.name = "deform_conv2d",
            .min_inputs = 3,
            .max_inputs = 5,
            .optional_inputs = {3, 4},
            .attrs = {{"stride", AttrKind::Ints, IntList{1, 1}},
                      {"padding", AttrKind::Ints, IntList{0, 0}},
                      {"dilation", AttrKind::Ints, IntList{1, 1}},
                      {"groups", AttrKind::Int, int64_t(1)},
                      {"offset_groups", AttrKind::Int, int64_t(1)}},
            .infer = infer_deform_conv2d,
            .cpu = deform_conv2d_kernel,
            .grad = deform_conv2d_grad,
            .kind = OpKind::Opaque,
            .onnx = onnx_not_exportable(
                "ONNX's DeformConv is opset 19 and kiln's exporter writes opsets 13 to 17 (the "
                "importer reads DeformConv: onnx/import_vision.cpp)")});
  registry.add(OpDef{.name = "deform_im2col",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = sampling_attrs(),
                     .infer = infer_im2col,
                     .cpu = im2col_kernel,
                     .grad = im2col_grad,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "deform_conv2d's sampling step; ONNX has it only inside DeformConv")});
  registry.add(
      OpDef{.name = "deform_im2col_backward",
            .min_inputs = 3,
            .max_inputs = 4,
            .num_outputs = 3,
            .optional_inputs = {3},
            .attrs = sampling_attrs(),
            .infer = infer_im2col_backward,
            .cpu = im2col_backward_kernel,
            .kind = OpKind::Opaque,
            .onnx = onnx_not_exportable("a backward op; ONNX has no DeformConv gradient")});
}

}  // namespace kiln
