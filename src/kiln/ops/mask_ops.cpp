// triu, tril and masked_fill: ops that keep some elements of a tensor and
// replace the others (by their position in a matrix, or by a bool mask).
#include "kiln/ops/mask.h"

#include "kiln/kernels/cpu/binary.h"
#include "kiln/kernels/cpu/scan.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

// ---- triu, tril ----

InferResult infer_triangle(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK(x.dim() >= 2, args.op.name, ": input tensor must have at least 2 dimensions (shape ",
             x.shape, ")");
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {}};
}

template <bool Upper>
void triangle_kernel(const KernelArgs& args) {
  cpu::triangle(args.outputs[0], args.inputs[0], args.attrs.get_int("diagonal"), Upper);
}

// The kept elements pass their gradient through, the zeroed ones get none:
// the same triangle of the gradient.
template <bool Upper>
std::vector<Tensor> triangle_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const int64_t diagonal = ctx.attrs().get_int("diagonal");
  const Tensor& g = ctx.grad_output(0);
  return {Upper ? triu(g, diagonal) : tril(g, diagonal)};
}

// ---- masked_fill(input, mask, value) ----

// value is cast to input's dtype (dispatch inserts the cast, so a tensor
// value's gradient flows back through it).
InferResult infer_masked_fill(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &mask = args.inputs[1], &value = args.inputs[2];
  KILN_CHECK_TYPE(mask.dtype == DType::Bool,
                  "masked_fill: only supports boolean masks, but got mask with dtype ", mask.dtype,
                  " (shape ", mask.shape, ")");
  KILN_CHECK(value.dim() == 0,
             "masked_fill: only supports a 0-dimensional value tensor, but got tensor with ",
             value.dim(), " dimension(s) (shape ", value.shape, ")");
  DimList shape = broadcast_shapes(x.shape, mask.shape, "masked_fill");
  return InferResult{{TensorMeta{x.dtype, std::move(shape)}}, {x.dtype, DType::Bool, x.dtype}};
}

// Elementwise, so the output may alias input 0 exactly (masked_fill_).
void masked_fill_kernel(const KernelArgs& args) {
  cpu::where(args.outputs[0], args.inputs[1], args.inputs[2], args.inputs[0]);
}

// The input's gradient where the mask is false (summed back over the dims
// the mask broadcast it to); the value's, the sum of the rest.
std::vector<Tensor> masked_fill_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const Tensor mask = ctx.input(1);
  Tensor g_input, g_value;
  if (ctx.needs_input_grad(0)) g_input = sum_to(where(mask, 0.0, g), ctx.input_shape(0));
  if (ctx.needs_input_grad(2)) g_value = sum(where(mask, g, 0.0));
  return {g_input, Tensor(), g_value};
}

}  // namespace

void register_mask_ops(OpRegistry& registry) {
  const std::vector<AttrSpec> diagonal = {{"diagonal", AttrKind::Int, int64_t(0)}};
  registry.add(OpDef{.name = "triu",
                     .attrs = diagonal,
                     .infer = infer_triangle,
                     .cpu = triangle_kernel<true>,
                     .grad = triangle_grad<true>,
                     .onnx = {"Trilu"}});
  registry.add(OpDef{.name = "tril",
                     .attrs = diagonal,
                     .infer = infer_triangle,
                     .cpu = triangle_kernel<false>,
                     .grad = triangle_grad<false>,
                     .onnx = {"Trilu"}});
  // Inputs: input, mask, value (a 0-d tensor; a Python number is a wrapped one).
  registry.add(OpDef{.name = "masked_fill",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .infer = infer_masked_fill,
                     .cpu = masked_fill_kernel,
                     .grad = masked_fill_grad,
                     .onnx = {"Where"}});
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  static const OpDef& def = op("triu");
  return dispatch1(def, {x}, {{"diagonal", diagonal}});
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  static const OpDef& def = op("tril");
  return dispatch1(def, {x}, {{"diagonal", diagonal}});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  static const OpDef& def = op("masked_fill");
  return dispatch1(def, {x, mask, value});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  return masked_fill(x, mask, wrap_scalar(value));
}

// dispatch_into checks that the result has x's shape and dtype.
const Tensor& masked_fill_(const Tensor& x, const Tensor& mask, const Tensor& value) {
  static const OpDef& def = op("masked_fill");
  dispatch_into(def, {x, mask, value}, {}, x);
  return x;
}

const Tensor& masked_fill_(const Tensor& x, const Tensor& mask, Scalar value) {
  return masked_fill_(x, mask, wrap_scalar(value));
}

}  // namespace kiln
