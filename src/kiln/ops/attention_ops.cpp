// scaled_dot_product_attention(q, k, v, mask?) {scale, is_causal}
//   = softmax(q · kᵀ · scale + mask) · v
// over q [..., L, E], k [..., S, E], v [..., S, Ev] of one floating dtype
// and the same leading dims; out [..., L, Ev]. mask broadcasts to [..., L,
// S]: bool (true: the key may be seen) or of q's dtype (added to the
// scores). is_causal lets query i see keys 0..i. A query that sees no key
// gets zeros (torch's scaled_dot_product_attention gives the same).
//
// One op, so the kernel (kernels/cpu/attention.h) never holds more than a
// block of the [L, S] scores. Graphs get it from jit/passes/fuse_attention.cpp
// (inference: frozen traces, ONNX imports; fast-math), which finds the
// matmul -> scale -> mask -> softmax -> matmul that kiln.nn's attention
// records and ONNX models hold. The backward recomputes the weights with
// those ops.
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/core/shape.h"
#include "kiln/kernels/cpu/attention.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

constexpr const char* kName = "scaled_dot_product_attention";
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool has_mask(std::span<const TensorMeta> inputs) {
  return inputs.size() > 3 && inputs[3].defined;
}

InferResult infer_attention(const InferArgs& args) {
  const TensorMeta &q = args.inputs[0], &k = args.inputs[1], &v = args.inputs[2];
  KILN_CHECK_TYPE(is_floating(q.dtype) && k.dtype == q.dtype && v.dtype == q.dtype, kName,
                  ": expected query, key and value of one floating dtype, got ", q.dtype, ", ",
                  k.dtype, " and ", v.dtype);
  KILN_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kName,
             ": expected query, key and value of one rank, at least 2, got shapes ", q.shape, ", ",
             k.shape, " and ", v.shape);
  const size_t rank = q.shape.size();
  for (size_t d = 0; d + 2 < rank; ++d) {
    KILN_CHECK(q.shape[d] == k.shape[d] && q.shape[d] == v.shape[d], kName,
               ": query, key and value must have the same leading dims, got shapes ", q.shape, ", ",
               k.shape, " and ", v.shape);
  }
  KILN_CHECK(q.shape[rank - 1] == k.shape[rank - 1], kName,
             ": query's last dim must equal key's, got shapes ", q.shape, " and ", k.shape);
  KILN_CHECK(k.shape[rank - 2] == v.shape[rank - 2], kName,
             ": key and value must have the same sequence length (dim -2), got shapes ", k.shape,
             " and ", v.shape);
  if (has_mask(args.inputs)) {
    const TensorMeta& mask = args.inputs[3];
    KILN_CHECK_TYPE(mask.dtype == DType::Bool || mask.dtype == q.dtype, kName,
                    ": the mask must be bool or of the query's dtype ", q.dtype, ", got ",
                    mask.dtype);
    DimList scores = q.shape;
    scores[rank - 1] = k.shape[rank - 2];
    KILN_CHECK(broadcast_shapes(mask.shape, scores, kName) == scores, kName, ": mask of shape ",
               mask.shape, " does not broadcast to the scores' shape ", scores);
  }
  DimList out = q.shape;
  out[rank - 1] = v.shape[rank - 1];
  return {{TensorMeta{q.dtype, std::move(out)}}};
}

void attention_kernel(const KernelArgs& args) {
  const cpu::StridedView &q = args.inputs[0], &k = args.inputs[1], &v = args.inputs[2];
  cpu::StridedView mask;  // absent: no data
  if (args.inputs.size() > 3 && args.inputs[3].data) {
    int64_t scores[cpu::kMaxDims];
    std::copy(q.shape, q.shape + q.ndim, scores);
    scores[q.ndim - 1] = k.shape[k.ndim - 2];
    mask = cpu::broadcast_to(args.inputs[3], scores, q.ndim);
  }
  cpu::scaled_dot_product_attention(args.outputs[0], q, k, v, mask, args.attrs.get_float("scale"),
                                    args.attrs.get_bool("is_causal"));
}

// The attention weights as the unfused ops compute them: masked scores,
// softmax over the keys, rows that see no key all zero.
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, double scale,
                         bool causal) {
  Tensor scores = matmul(q, transpose(k, -2, -1)) * scale;
  if (causal) {
    const int64_t L = q.shape()[size_t(q.dim() - 2)], S = k.shape()[size_t(k.dim() - 2)];
    scores = where(ge(unsqueeze(arange(L), 1), unsqueeze(arange(S), 0)), scores, kNegInf);
  }
  if (mask.defined())
    scores = mask.dtype() == DType::Bool ? where(mask, scores, kNegInf) : scores + mask;
  Tensor sees_nothing = eq(amax(scores, {-1}, true), kNegInf);
  return where(sees_nothing, 0.0, softmax(where(sees_nothing, 0.0, scores), -1));
}

std::vector<Tensor> attention_grad(const GradContext& ctx) {
  const Tensor q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  const Tensor mask = ctx.num_inputs() > 3 ? ctx.input(3) : Tensor();
  const double scale = ctx.attrs().get_float("scale");
  const Tensor& grad = ctx.grad_output(0);
  Tensor weights = attention_weights(q, k, mask, scale, ctx.attrs().get_bool("is_causal"));
  Tensor grad_weights = matmul(grad, transpose(v, -2, -1));
  // softmax's backward: w * (g - sum(g * w)); zero where the weights are.
  Tensor grad_scores = weights * (grad_weights - sum(grad_weights * weights, {-1}, true));
  std::vector<Tensor> grads(ctx.num_inputs());
  if (ctx.needs_input_grad(0)) grads[0] = matmul(grad_scores, k) * scale;
  if (ctx.needs_input_grad(1)) grads[1] = matmul(transpose(grad_scores, -2, -1), q) * scale;
  if (ctx.needs_input_grad(2)) grads[2] = matmul(transpose(weights, -2, -1), grad);
  if (mask.defined() && mask.dtype() != DType::Bool && ctx.needs_input_grad(3))
    grads[3] = sum_to(grad_scores, ctx.input_shape(3));
  return grads;
}

}  // namespace

void register_attention_ops(OpRegistry& registry) {
  registry.add(
      OpDef{.name = kName,
            .min_inputs = 3,
            .max_inputs = 4,
            .optional_inputs = {3},
            .attrs = {{"scale", AttrKind::Float, 1.0}, {"is_causal", AttrKind::Bool, false}},
            .infer = infer_attention,
            .cpu = attention_kernel,
            .grad = attention_grad,
            .kind = OpKind::Opaque});  // exported as the ops it stands for (export_nn.cpp)
}

}  // namespace kiln
