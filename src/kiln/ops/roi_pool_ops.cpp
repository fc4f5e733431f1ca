// max_roi_pool(x [N, C, H, W], rois [R, 5]; pooled_shape, spatial_scale):
// ONNX's MaxRoiPool and torchvision's roi_pool (kernels/cpu/roi_pool.h),
// one-to-one both ways. Its backward routes each bin's gradient to the
// pixel its maximum came from (max_roi_pool_backward recomputes which).
// rois get no gradient: their coordinates are rounded to whole pixels, so
// the output is piecewise constant in them (zero derivative almost
// everywhere), and torchvision gives them none either.
#include <cmath>

#include "kiln/kernels/cpu/roi_pool.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

cpu::RoiPoolParams params_of(const Attrs& attrs, const char* op) {
  const IntList& pooled = attrs.get_ints("pooled_shape");
  KILN_CHECK_VALUE(pooled.size() == 2 && pooled[0] > 0 && pooled[1] > 0, op,
                   ": pooled_shape must be two positive sizes [height, width], got ",
                   attr_to_string(pooled));
  const double scale = attrs.get_float("spatial_scale");
  KILN_CHECK_VALUE(std::isfinite(scale) && scale > 0, op,
                   ": spatial_scale must be positive and finite, got ", scale);
  return {pooled[0], pooled[1], scale};
}

// x and rois as the forward takes them (inputs `first` and `first + 1`).
void check_inputs(const InferArgs& args, size_t first, const char* op) {
  check_floating(args, first);
  const TensorMeta &x = args.inputs[first], &rois = args.inputs[first + 1];
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.shape);
  KILN_CHECK(rois.dim() == 2 && equal_or_assumed(rois.shape[1], Dim(5)), op,
             ": expected rois of shape [R, 5] (batch index, x1, y1, x2, y2), got shape ",
             rois.shape);
  KILN_CHECK_TYPE(rois.dtype == x.dtype, op, ": expected rois to have the input's dtype ", x.dtype,
                  ", got ", rois.dtype);
}

InferResult infer_max_roi_pool(const InferArgs& args) {
  check_inputs(args, 0, "max_roi_pool");
  const cpu::RoiPoolParams p = params_of(args.attrs, "max_roi_pool");
  const TensorMeta &x = args.inputs[0], &rois = args.inputs[1];
  return {{TensorMeta{x.dtype, {rois.shape[0], x.shape[1], Dim(p.pooled_h), Dim(p.pooled_w)}}}, {}};
}

void max_roi_pool_kernel(const KernelArgs& args) {
  cpu::max_roi_pool(args.outputs[0], args.inputs[0], args.inputs[1],
                    params_of(args.attrs, "max_roi_pool"));
}

// max_roi_pool_backward(grad_output, x, rois) -> grad_x.
InferResult infer_backward(const InferArgs& args) {
  check_inputs(args, 1, "max_roi_pool_backward");
  const cpu::RoiPoolParams p = params_of(args.attrs, "max_roi_pool_backward");
  const TensorMeta &g = args.inputs[0], &x = args.inputs[1], &rois = args.inputs[2];
  const DimList want = {rois.shape[0], x.shape[1], Dim(p.pooled_h), Dim(p.pooled_w)};
  KILN_CHECK(g.dim() == 4 && equal_or_assumed(g.shape, want),
             "max_roi_pool_backward: expected grad_output of shape ", want, ", got ", g.shape);
  KILN_CHECK_TYPE(g.dtype == x.dtype, "max_roi_pool_backward: expected grad_output of dtype ",
                  x.dtype, ", got ", g.dtype);
  return {{TensorMeta{x.dtype, x.shape}}, {}};
}

void backward_kernel(const KernelArgs& args) {
  cpu::max_roi_pool_backward(args.outputs[0], args.inputs[0], args.inputs[1], args.inputs[2],
                             params_of(args.attrs, "max_roi_pool_backward"));
}

std::vector<Tensor> max_roi_pool_grad(const GradContext& ctx) {
  static const OpDef& backward = op("max_roi_pool_backward");
  if (!ctx.needs_input_grad(0)) return {Tensor{}, Tensor{}};
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0), ctx.input(1)}, ctx.attrs()),
          Tensor{}};
}

std::vector<AttrSpec> roi_pool_attrs() {
  return {{"pooled_shape", AttrKind::Ints, {}}, {"spatial_scale", AttrKind::Float, 1.0}};
}

}  // namespace

void register_roi_pool_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "max_roi_pool",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = roi_pool_attrs(),
                     .infer = infer_max_roi_pool,
                     .cpu = max_roi_pool_kernel,
                     .grad = max_roi_pool_grad,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_op("MaxRoiPool", {{"pooled_shape", "pooled_shape"},
                                                    {"spatial_scale", "spatial_scale", 1.0}})});
  registry.add(
      OpDef{.name = "max_roi_pool_backward",
            .min_inputs = 3,
            .max_inputs = 3,
            .attrs = roi_pool_attrs(),
            .infer = infer_backward,
            .cpu = backward_kernel,
            .kind = OpKind::Opaque,
            .onnx = onnx_not_exportable("a backward op; ONNX has no MaxRoiPool gradient")});
}

}  // namespace kiln
