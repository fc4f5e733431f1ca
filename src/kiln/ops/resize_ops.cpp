// resize (ONNX Resize's semantics, any rank) and its backward op. Inputs:
// x, roi (tf_crop_and_resize's [starts, ends]) and scales (the scale per
// dim the coordinates use; absent: output / input size). Both are tensors,
// so they may be values computed at run time; the output size is the
// output_size attribute. resize is linear in x, so the backward op's own
// gradient is resize again (the adjoint of the adjoint): gradients of any
// order. roi and scales get none (they place the samples; ONNX Runtime
// and PyTorch differentiate neither).
#include <map>

#include "kiln/kernels/cpu/resize.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/resample.h"

namespace kiln {
namespace {

using Params = cpu::ResizeParams;

template <typename Enum>
Enum parse(const std::string& op, const char* attr, const std::string& value,
           const std::map<std::string, Enum>& names) {
  auto found = names.find(value);
  if (found != names.end()) return found->second;
  std::string known;
  for (const auto& [name, _] : names)
    known += (known.empty() ? "" : ", ") + name;
  KILN_CHECK_VALUE(false, op, ": unknown ", attr, " '", value, "' (one of ", known, ")");
  return names.begin()->second;
}

// The kernel's parameters, without the scales and roi (input values).
Params resize_params(const std::string& op, const Attrs& attrs) {
  Params p;
  p.mode = parse<Params::Mode>(op, "mode", attrs.get_string("mode"),
                               {{"nearest", Params::Mode::Nearest},
                                {"linear", Params::Mode::Linear},
                                {"cubic", Params::Mode::Cubic}});
  using T = Params::Transform;
  p.transform = parse<T>(op, "coordinate_transformation_mode",
                         attrs.get_string("coordinate_transformation_mode"),
                         {{"half_pixel", T::HalfPixel},
                          {"half_pixel_symmetric", T::HalfPixelSymmetric},
                          {"pytorch_half_pixel", T::PytorchHalfPixel},
                          {"align_corners", T::AlignCorners},
                          {"asymmetric", T::Asymmetric},
                          {"tf_half_pixel_for_nn", T::TfHalfPixelForNN},
                          {"tf_crop_and_resize", T::TfCropAndResize}});
  using R = Params::Rounding;
  p.rounding = parse<R>(op, "nearest_mode", attrs.get_string("nearest_mode"),
                        {{"round_prefer_floor", R::RoundPreferFloor},
                         {"round_prefer_ceil", R::RoundPreferCeil},
                         {"floor", R::Floor},
                         {"ceil", R::Ceil}});
  p.cubic_coeff_a = attrs.get_float("cubic_coeff_a");
  p.exclude_outside = attrs.get_bool("exclude_outside");
  p.extrapolation_value = attrs.get_float("extrapolation_value");
  p.antialias = attrs.get_bool("antialias");
  return p;
}

// Checks x (of `input_shape`), roi and scales against the attributes;
// the output shape.
DimList resize_shape(const InferArgs& args, const DType dtype, const DimList& input_shape) {
  const std::string& op = args.op.name;
  const Params p = resize_params(op, args.attrs);
  KILN_CHECK(p.mode == Params::Mode::Nearest || is_floating(dtype), op, ": ",
             args.attrs.get_string("mode"), " mode expects a floating input, got ",
             to_string(dtype));
  const DimList size = args.attrs.get_dims("output_size");
  const int64_t rank = int64_t(input_shape.size());
  KILN_CHECK(int64_t(size.size()) == rank, op, ": output_size ", size,
             " must hold one size per dim of the input ", input_shape);
  for (int64_t d = 0; d < rank; ++d) {
    const Dim &in = input_shape[size_t(d)], &out = size[size_t(d)];
    KILN_CHECK(!definitely_less(out, 0), op, ": output_size ", size, " has a negative size");
    const bool from_empty = in.is_static() && in.static_value() == 0;
    KILN_CHECK(!from_empty || !definitely_less(Dim(0), out), op, ": cannot resize dim ", d,
               " of size 0 to ", out, " (input shape ", input_shape, ")");
  }
  const TensorMeta& roi = args.inputs[1];
  const TensorMeta& scales = args.inputs[2];
  if (roi.defined) {
    KILN_CHECK(is_floating(roi.dtype) && roi.dim() == 1 && roi.shape[0] == Dim(2 * rank), op,
               ": roi must be a floating 1-D tensor of ", 2 * rank, " values (starts, ends), got ",
               to_string(roi.dtype), roi.shape);
  }
  KILN_CHECK(roi.defined || p.transform != Params::Transform::TfCropAndResize, op,
             ": tf_crop_and_resize needs a roi");
  if (scales.defined) {
    KILN_CHECK(is_floating(scales.dtype) && scales.dim() == 1 && scales.shape[0] == Dim(rank), op,
               ": scales must be a floating 1-D tensor of ", rank, " values, got ",
               to_string(scales.dtype), scales.shape);
  }
  return size;
}

InferResult infer_resize(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  return InferResult{{TensorMeta{x.dtype, resize_shape(args, x.dtype, x.shape)}}, {}};
}

Params kernel_params(const KernelArgs& args, const std::string& op) {
  Params p = resize_params(op, args.attrs);
  p.roi = cpu::read_doubles(args.inputs[1]);
  p.scales = cpu::read_doubles(args.inputs[2]);
  for (double s : p.scales)
    KILN_CHECK_VALUE(s > 0.0, op, ": scales must be positive, got ", s);
  return p;
}

void resize_kernel(const KernelArgs& args) {
  cpu::resize(args.outputs[0], args.inputs[0], kernel_params(args, "resize"));
}

// ---- backward: (grad_out, roi, scales; input_size, the forward's attributes)

Attrs forward_attrs(const Attrs& backward) {
  Attrs out;
  for (const auto& [name, value] : backward.items())
    if (name != "input_size") out.set(name, value);
  return out;
}

InferResult infer_resize_backward(const InferArgs& args) {
  check_floating(args, 0);
  const TensorMeta& dy = args.inputs[0];
  const TensorMeta x{dy.dtype, args.attrs.get_dims("input_size")};
  const DimList expected = resize_shape(args, x.dtype, x.shape);
  KILN_CHECK(dy.shape == expected, args.op.name, ": expected grad_output of shape ", expected,
             " (resize's output), got ", dy.shape);
  return InferResult{{x}, {}};
}

void resize_backward_kernel(const KernelArgs& args) {
  cpu::resize_backward(args.outputs[0], args.inputs[0], kernel_params(args, "resize_backward"));
}

// y = R x: dx = Rᵀ dy, the backward op at x's size.
std::vector<Tensor> resize_grad(const GradContext& ctx) {
  static const OpDef& backward = op("resize_backward");
  Attrs attrs = ctx.attrs();
  attrs.set("input_size", ctx.input_shape(0));
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(1), ctx.input(2)}, attrs), Tensor(),
          Tensor()};
}

// dx = Rᵀ dy is linear in dy: its gradient is R again.
std::vector<Tensor> resize_backward_grad(const GradContext& ctx) {
  static const OpDef& forward = op("resize");
  return {dispatch1(forward, {ctx.grad_output(0), ctx.input(1), ctx.input(2)},
                    forward_attrs(ctx.attrs())),
          Tensor(), Tensor()};
}

std::vector<AttrSpec> resize_attrs() {
  return {{"output_size", AttrKind::Ints, {}},
          {"mode", AttrKind::String, std::string("nearest")},
          {"coordinate_transformation_mode", AttrKind::String, std::string("half_pixel")},
          {"nearest_mode", AttrKind::String, std::string("round_prefer_floor")},
          {"cubic_coeff_a", AttrKind::Float, -0.75},
          {"exclude_outside", AttrKind::Bool, false},
          {"extrapolation_value", AttrKind::Float, 0.0},
          {"antialias", AttrKind::Bool, false}};
}

}  // namespace

void register_resize_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "resize",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .optional_inputs = {1, 2},
                     .attrs = resize_attrs(),
                     .infer = infer_resize,
                     .cpu = resize_kernel,
                     .grad = resize_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"Resize"}});
  std::vector<AttrSpec> backward_attrs = resize_attrs();
  backward_attrs.insert(backward_attrs.begin(), AttrSpec{"input_size", AttrKind::Ints, {}});
  registry.add(OpDef{
      .name = "resize_backward",
      .min_inputs = 3,
      .max_inputs = 3,
      .optional_inputs = {1, 2},
      .attrs = backward_attrs,
      .infer = infer_resize_backward,
      .cpu = resize_backward_kernel,
      .grad = resize_backward_grad,
      .kind = OpKind::Opaque,
      .onnx = onnx_not_exportable("a backward op of resize: ONNX models hold forward graphs")});
}

Tensor resize(const Tensor& x, const DimList& output_size, const Tensor& roi, const Tensor& scales,
              const ResizeOptions& o) {
  static const OpDef& resize_op = op("resize");
  Attrs attrs{{"output_size", canonical_attr(output_size)},
              {"mode", o.mode},
              {"coordinate_transformation_mode", o.coordinate_transformation_mode},
              {"nearest_mode", o.nearest_mode},
              {"cubic_coeff_a", o.cubic_coeff_a},
              {"exclude_outside", o.exclude_outside},
              {"extrapolation_value", o.extrapolation_value},
              {"antialias", o.antialias}};
  return dispatch1(resize_op, {x, roi, scales}, attrs);
}

}  // namespace kiln
