// det (torch.linalg.det / torch.det, ONNX's Det) and det_cofactor, its
// derivative: the determinants of a batch of square matrices [..., n, n],
// float32 or float64, kernels/cpu/det.h.
//
// d det(A) / dA is the cofactor matrix, det(A) A^-T where A is invertible.
// det_cofactor computes it from an LU with complete pivoting, so a singular
// matrix gets its true derivative (the adjugate's transpose: nonzero at rank
// n - 1) where PyTorch's first-order backward gives 0 (it solves against
// det(A) = 0; only its create_graph path, through the SVD, is exact).
//
// det_cofactor's own gradient, (<G, C> C - C G^T C) / det(A) with C its
// output, is written for invertible A: at a singular matrix it is inf or
// NaN, as a second derivative of det through A^-1 is in PyTorch.
#include "kiln/kernels/cpu/det.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/spectral.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

void check_square(const InferArgs& args) {
  const TensorMeta& a = args.inputs[0];
  KILN_CHECK_TYPE(a.dtype == DType::Float32 || a.dtype == DType::Float64, args.op.name,
                  ": expected a float32 or float64 input, got ", a.dtype);
  KILN_CHECK(a.dim() >= 2, args.op.name,
             ": expected a batch of square matrices [..., n, n], got shape ", a.shape);
  KILN_CHECK(equal_or_assumed(a.shape[a.dim() - 1], a.shape[a.dim() - 2]), args.op.name,
             ": expected a batch of square matrices [..., n, n], got shape ", a.shape);
}

InferResult infer_det(const InferArgs& args) {
  check_square(args);
  const TensorMeta& a = args.inputs[0];
  return InferResult{{TensorMeta{a.dtype, DimList(a.shape.begin(), a.shape.end() - 2)}}, {}};
}

InferResult infer_cofactor(const InferArgs& args) {
  check_square(args);
  return InferResult{{TensorMeta{args.inputs[0].dtype, args.inputs[0].shape}}, {}};
}

void det_kernel(const KernelArgs& args) {
  cpu::det(args.outputs[0], args.inputs[0]);
}

void cofactor_kernel(const KernelArgs& args) {
  cpu::det_cofactor(args.outputs[0], args.inputs[0]);
}

Tensor as_matrix_scale(const Tensor& batch) {
  return unsqueeze(unsqueeze(batch, -1), -1);
}

// d det / dA = cofactor(A), scaled by each matrix's output gradient.
std::vector<Tensor> det_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  static const OpDef& cofactor_op = op("det_cofactor");
  return {as_matrix_scale(ctx.grad_output(0)) * dispatch1(cofactor_op, {ctx.input(0)})};
}

// With C = det(A) A^-T: dC = tr(A^-1 dA) C - C dA^T C / det(A), whose
// adjoint is (<G, C> C - C G^T C) / det(A).
std::vector<Tensor> cofactor_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  static const OpDef& det_op = op("det");
  const Tensor& g = ctx.grad_output(0);
  const Tensor c = ctx.output(0);
  const Tensor inner = sum(g * c, {-2, -1}, /*keepdim=*/true);
  const Tensor sandwich = matmul(matmul(c, transpose(g, -2, -1)), c);
  return {(inner * c - sandwich) / as_matrix_scale(dispatch1(det_op, {ctx.input(0)}))};
}

}  // namespace

void register_det_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "det",
                     .infer = infer_det,
                     .cpu = det_kernel,
                     .grad = det_grad,
                     .kind = OpKind::Opaque,
                     .onnx = [] {
                       OnnxInfo info = onnx_op("Det");
                       info.min_opset = 11;
                       return info;
                     }()});
  registry.add(OpDef{.name = "det_cofactor",
                     .infer = infer_cofactor,
                     .cpu = cofactor_kernel,
                     .grad = cofactor_grad,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "det's gradient; ONNX has no cofactor or adjugate op (a graph with it "
                         "is a training graph)")});
}

}  // namespace kiln
