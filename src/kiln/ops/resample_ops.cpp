// upsample_nearest2d and upsample_bilinear2d, and their backward ops. Both
// are linear maps of their input, so each backward op's own gradient is its
// forward op again (the adjoint of the adjoint): gradients of any order.
// Each backward op checks its grad_output against its forward's shape
// inference, so the two never disagree about a size.
#include "kiln/kernels/cpu/resample.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/resample.h"

namespace kiln {
namespace {

constexpr char kNearest[] = "upsample_nearest2d";
constexpr char kBilinear[] = "upsample_bilinear2d";

DimList upsample_shape(const TensorMeta& x, const Attrs& attrs, const char* op) {
  KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.shape);
  const DimList size = attrs.get_dims("output_size");
  KILN_CHECK(size.size() == 2, op, ": output_size must hold 2 sizes [OH, OW], got ",
             attr_to_string(attrs.get("output_size")));
  const Dim &H = x.shape[2], &W = x.shape[3];
  const bool positive = !definitely_less(H, 1) && !definitely_less(W, 1) &&
                        !definitely_less(size[0], 1) && !definitely_less(size[1], 1);
  KILN_CHECK(positive, op,
             ": input and output sizes should be greater than 0, but got input (H: ", H, ", W: ", W,
             ") output (H: ", size[0], ", W: ", size[1], ")");
  // A batch may be empty, the channels may not (PyTorch's check).
  KILN_CHECK(!definitely_less(x.shape[1], 1), op,
             ": non-empty 4D data tensor expected but got a tensor with sizes ", x.shape);
  return {x.shape[0], x.shape[1], size[0], size[1]};
}

template <const char* op>
InferResult infer_upsample(const InferArgs& args) {
  check_floating(args, 0);
  const TensorMeta& x = args.inputs[0];
  return InferResult{{TensorMeta{x.dtype, upsample_shape(x, args.attrs, op)}}, {}};
}

cpu::UpsampleParams upsample_params(const Attrs& attrs) {
  cpu::UpsampleParams p;
  p.scales[0] = attrs.has("scales_h") ? attrs.get_float("scales_h") : 0.0;
  p.scales[1] = attrs.has("scales_w") ? attrs.get_float("scales_w") : 0.0;
  if (attrs.has("align_corners")) p.align_corners = attrs.get_bool("align_corners");
  if (attrs.has("exact")) p.exact = attrs.get_bool("exact");
  return p;
}

void nearest_kernel(const KernelArgs& args) {
  cpu::upsample_nearest2d(args.outputs[0], args.inputs[0], upsample_params(args.attrs));
}

void bilinear_kernel(const KernelArgs& args) {
  cpu::upsample_bilinear2d(args.outputs[0], args.inputs[0], upsample_params(args.attrs));
}

// ---- backward ops: (grad_out; input_size, the forward's attributes) ----

// The forward's attributes, without the backward's input_size.
Attrs forward_attrs(const Attrs& backward) {
  Attrs out;
  for (const auto& [name, value] : backward.items())
    if (name != "input_size") out.set(name, value);
  return out;
}

template <const char* forward>
InferResult infer_upsample_backward(const InferArgs& args) {
  check_floating(args, 0);
  const TensorMeta& dy = args.inputs[0];
  const TensorMeta x{dy.dtype, args.attrs.get_dims("input_size")};
  const DimList expected = upsample_shape(x, args.attrs, forward);
  KILN_CHECK(dy.shape == expected, args.op.name, ": expected grad_output of shape ", expected, " (",
             forward, "'s output), got ", dy.shape);
  return InferResult{{x}, {}};
}

void nearest_backward_kernel(const KernelArgs& args) {
  cpu::upsample_nearest2d_backward(args.outputs[0], args.inputs[0], upsample_params(args.attrs));
}

void bilinear_backward_kernel(const KernelArgs& args) {
  cpu::upsample_bilinear2d_backward(args.outputs[0], args.inputs[0], upsample_params(args.attrs));
}

// ---- gradient rules ----------------------------------------------------

// y = U x: dx = Uᵀ dy, the backward op at x's size.
template <const char* forward>
std::vector<Tensor> upsample_grad(const GradContext& ctx) {
  static const OpDef& backward = op(std::string(forward) + "_backward");
  Attrs attrs = ctx.attrs();
  attrs.set("input_size", ctx.input_shape(0));
  return {dispatch1(backward, {ctx.grad_output(0)}, attrs)};
}

// dx = Uᵀ dy is linear in dy: its gradient is U again.
template <const char* forward>
std::vector<Tensor> upsample_backward_grad(const GradContext& ctx) {
  static const OpDef& forward_op = op(forward);
  return {dispatch1(forward_op, {ctx.grad_output(0)}, forward_attrs(ctx.attrs()))};
}

std::vector<AttrSpec> with_input_size(std::vector<AttrSpec> specs) {
  specs.insert(specs.begin(), AttrSpec{"input_size", AttrKind::Ints, {}});
  return specs;
}

}  // namespace

void register_resize_ops(OpRegistry& registry);  // resize_ops.cpp

void register_resample_ops(OpRegistry& registry) {
  register_resize_ops(registry);
  const AttrSpec output_size{"output_size", AttrKind::Ints, {}};
  const AttrSpec scales_h{"scales_h", AttrKind::Float, {}, true};
  const AttrSpec scales_w{"scales_w", AttrKind::Float, {}, true};
  registry.add(OpDef{.name = kNearest,
                     .attrs = {output_size, scales_h, scales_w, {"exact", AttrKind::Bool, false}},
                     .infer = infer_upsample<kNearest>,
                     .cpu = nearest_kernel,
                     .grad = upsample_grad<kNearest>,
                     .kind = OpKind::Opaque,
                     .onnx = {"Resize"}});
  registry.add(
      OpDef{.name = kBilinear,
            .attrs = {output_size, {"align_corners", AttrKind::Bool, false}, scales_h, scales_w},
            .infer = infer_upsample<kBilinear>,
            .cpu = bilinear_kernel,
            .grad = upsample_grad<kBilinear>,
            .kind = OpKind::Opaque,
            .onnx = {"Resize"}});
  registry.add(OpDef{.name = std::string(kNearest) + "_backward",
                     .attrs = with_input_size(registry.get(kNearest).attrs),
                     .infer = infer_upsample_backward<kNearest>,
                     .cpu = nearest_backward_kernel,
                     .grad = upsample_backward_grad<kNearest>,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "a backward op of upsample_nearest2d: ONNX models hold forward graphs")});
  registry.add(OpDef{.name = std::string(kBilinear) + "_backward",
                     .attrs = with_input_size(registry.get(kBilinear).attrs),
                     .infer = infer_upsample_backward<kBilinear>,
                     .cpu = bilinear_backward_kernel,
                     .grad = upsample_backward_grad<kBilinear>,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "a backward op of upsample_bilinear2d: ONNX models hold forward graphs")});
}

Tensor upsample_nearest2d(const Tensor& x, const DimList& output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w,
                          bool exact) {
  static const OpDef& nearest_op = op(kNearest);
  Attrs attrs{{"output_size", canonical_attr(output_size)}, {"exact", exact}};
  if (scales_h) attrs.set("scales_h", *scales_h);
  if (scales_w) attrs.set("scales_w", *scales_w);
  return dispatch1(nearest_op, {x}, attrs);
}

Tensor upsample_bilinear2d(const Tensor& x, const DimList& output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  static const OpDef& bilinear_op = op(kBilinear);
  Attrs attrs{{"output_size", canonical_attr(output_size)}, {"align_corners", align_corners}};
  if (scales_h) attrs.set("scales_h", *scales_h);
  if (scales_w) attrs.set("scales_w", *scales_w);
  return dispatch1(bilinear_op, {x}, attrs);
}

}  // namespace kiln
