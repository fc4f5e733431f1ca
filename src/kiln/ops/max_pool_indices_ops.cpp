// max_pool2d_with_indices: max_pool2d's values and where each came from
// (ih * W + iw within its (n, c) plane, PyTorch's return_indices). Shapes
// and attributes are max_pool2d's own (its inference runs here); the
// gradient is max_pool2d's, since both pick the same element per window.
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"

namespace kiln {
namespace conv_pool {
namespace {

const OpDef& max_pool() {
  static const OpDef& def = op("max_pool2d");
  return def;
}

InferResult infer_with_indices(const InferArgs& args) {
  InferResult result = infer_meta(max_pool(), args.inputs, args.attrs);
  result.outputs.push_back(TensorMeta{DType::Int64, result.outputs[0].shape});
  return result;
}

void with_indices_kernel(const KernelArgs& args) {
  cpu::max_pool2d_with_indices(batched(args.outputs[0]), batched(args.outputs[1]),
                               batched(args.inputs[0]),
                               params_for(max_pool(), args.inputs[0], args.attrs, true));
}

// The indices carry no gradient.
std::vector<Tensor> with_indices_grad(const GradContext& ctx) {
  static const OpDef& backward = op("max_pool2d_backward");
  return {dispatch1(backward, {ctx.grad_output(0), ctx.input(0)}, ctx.attrs())};
}

}  // namespace

void register_max_pool_indices_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "max_pool2d_with_indices",
                     .num_outputs = 2,
                     .attrs = registry.get("max_pool2d").attrs,
                     .infer = infer_with_indices,
                     .cpu = with_indices_kernel,
                     .grad = with_indices_grad,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "its indices count within each (n, c) plane; ONNX's MaxPool counts "
                         "them over the whole tensor (the ONNX importer converts)")});
}

}  // namespace conv_pool

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size,
                                                  IntList stride, IntList padding, IntList dilation,
                                                  bool ceil_mode) {
  static const OpDef& def = op("max_pool2d_with_indices");
  std::vector<Tensor> out = dispatch(def, {x},
                                     {{"kernel_size", std::move(kernel_size)},
                                      {"stride", std::move(stride)},
                                      {"padding", std::move(padding)},
                                      {"dilation", std::move(dilation)},
                                      {"ceil_mode", ceil_mode}});
  return {out[0], out[1]};
}

}  // namespace kiln
