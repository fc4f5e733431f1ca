// cast, contiguous, clone, fill: ops that move or set values without math.
#include "kiln/ops/copy.h"

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"

namespace kiln {
namespace {

InferResult infer_cast(const InferArgs& args) {
  return InferResult{{TensorMeta{args.attrs.get_dtype("dtype"), args.inputs[0].shape}}, {}};
}

void copy_kernel(const KernelArgs& args) {
  cpu::copy_convert(args.outputs[0], args.inputs[0]);
}

InferResult infer_fill(const InferArgs& args) {
  return InferResult{{TensorMeta{args.inputs[0].dtype, args.inputs[0].shape}}, {}};
}

void fill_kernel(const KernelArgs& args) {
  const Attrs& a = args.attrs;
  Scalar value = a.has("int_value") ? Scalar(a.get_int("int_value")) : Scalar(a.get_float("value"));
  cpu::fill(args.outputs[0], value);
}

// d cast(x) = cast back to x's dtype (no gradient flows into integer inputs).
std::vector<Tensor> cast_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  return {to(ctx.grad_output(0), ctx.input_meta(0).dtype)};
}

std::vector<Tensor> clone_grad(const GradContext& ctx) {
  return {ctx.grad_output(0)};
}

// The filled value does not depend on x: x's gradient is zero.
std::vector<Tensor> fill_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  return {zeros_like(ctx.grad_output(0))};
}

}  // namespace

void register_copy_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "cast",
                     .attrs = {{"dtype", AttrKind::DType, {}}},
                     .infer = infer_cast,
                     .cpu = copy_kernel,
                     .grad = cast_grad,
                     .kind = OpKind::Elementwise,
                     .onnx = onnx_op("Cast", {{"dtype", "to", DType::Float32}})});
  // Always a fresh contiguous copy (clone); `contiguous` is the API function
  // that skips the copy when the input already is.
  registry.add(OpDef{.name = "clone",
                     .attrs = {},
                     .infer = infer_same,
                     .cpu = copy_kernel,
                     .grad = clone_grad,
                     .kind = OpKind::Elementwise,
                     // Import reads Identity as the value itself.
                     .onnx = onnx_op("Identity", {}, {}, OnnxDirection::ExportOnly)});
  // fill(x) -> a tensor shaped like x holding one value. `int_value` keeps
  // integers beyond 2^53 exact.
  registry.add(
      OpDef{.name = "fill",
            .attrs = {{"value", AttrKind::Float, 0.0}, {"int_value", AttrKind::Int, {}, true}},
            .infer = infer_fill,
            .cpu = fill_kernel,
            .grad = fill_grad,
            .kind = OpKind::Elementwise,
            .onnx = {}});
}

}  // namespace kiln

namespace kiln {

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  static const OpDef& cast_op = op("cast");
  return dispatch1(cast_op, {x}, {{"dtype", dtype}});
}

Tensor clone(const Tensor& x) {
  static const OpDef& clone_op = op("clone");
  return dispatch1(clone_op, {x});
}

Tensor contiguous(const Tensor& x) {
  return x.is_contiguous() ? x : clone(x);
}

const Tensor& copy_(const Tensor& dst, const Tensor& src) {
  static const OpDef& cast_op = op("cast");
  KILN_CHECK(broadcast_shapes(dst.shape(), src.shape(), "copy_") == dst.shape(),
             "copy_: source of shape ", src.shape(), " cannot be broadcast to destination shape ",
             dst.shape());
  check_write_overlap("copy_", {src}, dst);
  dispatch_into(cast_op, {src}, {{"dtype", dst.dtype()}}, dst);
  return dst;
}

const Tensor& fill_(const Tensor& x, Scalar value) {
  static const OpDef& fill_op = op("fill");
  Attrs attrs = value.is_floating() ? Attrs{{"value", value.to_double()}}
                                    : Attrs{{"int_value", value.to_int()}};
  dispatch_into(fill_op, {x}, attrs, x);
  return x;
}

const Tensor& zero_(const Tensor& x) {
  return fill_(x, int64_t(0));
}

Tensor wrap_scalar(Scalar value) {
  Tensor t = scalar_tensor(value, TensorOptions(value.kind()));
  t.impl()->wrapped_number = true;
  return t;
}

}  // namespace kiln
