// conv2d_fused: a convolution with its epilogue, one op for inference
// graphs (jit/passes/fuse_conv_epilogue.cpp writes it; frozen graphs and
// ONNX imports, unless exact):
//
//   conv2d_fused(x, w, b?, residual?) {stride, padding, dilation, groups,
//                                      activation, alpha, beta,
//                                      scale_after, shift_after, layout}
//     = activation(conv2d(x, w, b) + residual) * scale_after + shift_after
//
// layout "nhwc" (jit/passes/carry_conv_layout.cpp writes it): x, the
// residual and the output are channels-last, [N, H, W, C], 4-D only; the
// weights are as ever. "nchw" (the default) is conv2d's layout.
//
// ResNet's relu(conv + bn + identity) (batch norm folded into w and b),
// MobileNet's hardswish(conv + b) and its projection conv + identity. The
// residual has the output's shape and dtype (no broadcasting). activation
// and its alpha, beta are those of kernels/cpu/conv_epilogue.h: none, relu,
// clamp [alpha, beta], hardsigmoid clamp(alpha v + beta, 0, 1), hardswish
// v * hardsigmoid(v), sigmoid, silu, tanh, leaky_relu max(v > 0 ? v :
// alpha v, beta); scale_after and shift_after (1
// and 0: none) are PP-LCNet's learnable affine map after the activation.
// Each convolution path applies
// the epilogue its own way (oneDNN: post-ops, rounding as oneDNN's eltwise
// functions do; kiln's depthwise and direct kernels: over each plane as it
// is finished), so results match the unfused ops within float32 tolerance,
// not bit for bit. Inference only: no backward rule. ONNX export writes the
// ops it stands for (onnx/export.cpp).
#include "kiln/kernels/cpu/conv.h"
#include "kiln/ops/conv_pool_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

using conv_pool::batched;

constexpr const char* kOp = "conv2d_fused";

bool has_input(size_t count, size_t i, std::span<const TensorMeta> inputs) {
  return count > i && inputs[i].defined;
}

cpu::ConvEpilogue epilogue_of(const Attrs& attrs) {
  cpu::ConvEpilogue epilogue;
  const std::string& name = attrs.get_string("activation");
  KILN_CHECK_VALUE(cpu::epilogue_activation_from_name(name, epilogue.activation), kOp,
                   ": activation must be one of none, relu, clamp, hardsigmoid, hardswish, "
                   "sigmoid, silu, tanh, leaky_relu, got '",
                   name, "'");
  epilogue.alpha = attrs.get_float("alpha");
  epilogue.beta = attrs.get_float("beta");
  epilogue.scale_after = attrs.get_float("scale_after");
  epilogue.shift_after = attrs.get_float("shift_after");
  KILN_CHECK_VALUE(
      epilogue.activation != cpu::EpilogueActivation::Clamp || !(epilogue.alpha > epilogue.beta),
      kOp, ": clamp's alpha (min) ", epilogue.alpha, " is above its beta (max) ", epilogue.beta);
  return epilogue;
}

bool channels_last(const Attrs& attrs) {
  const std::string& layout = attrs.get_string("layout");
  KILN_CHECK_VALUE(layout == "nchw" || layout == "nhwc", kOp,
                   ": layout must be nchw or nhwc, got '", layout, "'");
  return layout == "nhwc";
}

// [N, H, W, C] <-> [N, C, H, W].
TensorMeta to_nchw(TensorMeta meta) {
  meta.shape = {meta.shape[0], meta.shape[3], meta.shape[1], meta.shape[2]};
  return meta;
}
TensorMeta to_nhwc(TensorMeta meta) {
  meta.shape = {meta.shape[0], meta.shape[2], meta.shape[3], meta.shape[1]};
  return meta;
}

InferResult infer_conv2d_fused(const InferArgs& args) {
  static const OpDef& conv = op("conv2d");
  const size_t count = args.inputs.size();
  const bool nhwc = channels_last(args.attrs);
  std::vector<TensorMeta> conv_inputs(args.inputs.begin(),
                                      args.inputs.begin() + std::min<size_t>(count, 3));
  if (nhwc) {
    KILN_CHECK(conv_inputs[0].dim() == 4, kOp, ": layout nhwc takes a 4-D input, got shape ",
               conv_inputs[0].shape);
    conv_inputs[0] = to_nchw(conv_inputs[0]);
  }
  InferResult result = conv.infer(InferArgs{conv, conv_inputs, args.attrs});
  if (nhwc) result.outputs[0] = to_nhwc(result.outputs[0]);
  epilogue_of(args.attrs);
  const TensorMeta& out = result.outputs[0];
  if (has_input(count, 3, args.inputs)) {
    const TensorMeta& residual = args.inputs[3];
    KILN_CHECK_TYPE(residual.dtype == out.dtype, kOp, ": residual of dtype ", residual.dtype,
                    ", the convolution gives ", out.dtype);
    KILN_CHECK(residual.shape == out.shape, kOp, ": residual of shape ", residual.shape,
               " is not the output's shape ", out.shape, " (it does not broadcast)");
  }
  result.input_dtypes.resize(count, out.dtype);
  return result;
}

cpu::StridedView bias_of(const KernelArgs& args) {
  return args.inputs.size() > 2 ? args.inputs[2] : cpu::StridedView{};
}

cpu::Conv2dParams params_of(const KernelArgs& args) {
  cpu::Conv2dParams params = conv_pool::conv_params(args.attrs, kOp);
  params.channels_last = channels_last(args.attrs);
  return params;
}

// As the kernel takes it: [N, C, H, W] (a 3-D input is one sample), or
// channels-last, always 4-D.
cpu::StridedView image(const KernelArgs& args, const cpu::StridedView& v) {
  return channels_last(args.attrs) ? v : batched(v);
}

cpu::StridedView residual_of(const KernelArgs& args) {
  if (args.inputs.size() <= 3 || !args.inputs[3].data) return {};
  return image(args, args.inputs[3]);
}

cpu::ConvEpilogue epilogue_for(const KernelArgs& args) {
  cpu::ConvEpilogue epilogue = epilogue_of(args.attrs);
  epilogue.residual = residual_of(args).data != nullptr;
  return epilogue;
}

void conv2d_fused_kernel(const KernelArgs& args) {
  cpu::conv2d_fused(image(args, args.outputs[0]), image(args, args.inputs[0]), args.inputs[1],
                    bias_of(args), residual_of(args), params_of(args), epilogue_for(args));
}

// The primitive (with its post-ops) created once for the plan's geometry.
class PreparedConv2dFused final : public PreparedKernel {
 public:
  explicit PreparedConv2dFused(const KernelArgs& args)
      : plan_(image(args, args.outputs[0]), image(args, args.inputs[0]), args.inputs[1],
              bias_of(args), params_of(args), epilogue_for(args)) {}

  void run(const KernelArgs& args) const override {
    plan_.run(image(args, args.outputs[0]), image(args, args.inputs[0]), args.inputs[1],
              bias_of(args), residual_of(args));
  }

  int packable_input() const override { return plan_.packs_weights() ? 1 : -1; }
  void run_packed(const KernelArgs& args, uint64_t version) const override {
    plan_.run_packed(image(args, args.outputs[0]), image(args, args.inputs[0]), args.inputs[1],
                     bias_of(args), version, residual_of(args));
  }

 private:
  cpu::Conv2dPlan plan_;
};

std::unique_ptr<PreparedKernel> prepare_conv2d_fused(const KernelArgs& args) {
  return std::make_unique<PreparedConv2dFused>(args);
}

// max_pool2d_nhwc(x) {max_pool2d's attrs}: max_pool2d over a channels-last
// [N, H, W, C] input, giving [N, OH, OW, C]; the pooling between the
// convolutions of a channels-last chain (carry_conv_layout.cpp). Inference
// only; export writes max_pool2d between transposes.
constexpr const char* kPoolOp = "max_pool2d_nhwc";

InferResult infer_max_pool2d_nhwc(const InferArgs& args) {
  static const OpDef& pool = op("max_pool2d");
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK(x.dim() == 4, kPoolOp, ": expected a 4-D [N, H, W, C] input, got shape ", x.shape);
  const TensorMeta nchw = to_nchw(x);
  InferResult result = pool.infer(InferArgs{pool, {&nchw, 1}, args.attrs});
  result.outputs[0] = to_nhwc(result.outputs[0]);
  return result;
}

void max_pool2d_nhwc_kernel(const KernelArgs& args) {
  static const OpDef& pool = op("max_pool2d");
  cpu::StridedView nchw = args.inputs[0];
  const int64_t* s = args.inputs[0].shape;
  const int64_t shape[4] = {s[0], s[3], s[1], s[2]};
  std::copy(shape, shape + 4, nchw.shape);
  cpu::max_pool2d_nhwc(args.outputs[0], args.inputs[0],
                       conv_pool::params_for(pool, nchw, args.attrs, true));
}

}  // namespace

void register_conv_fused_ops(OpRegistry& registry) {
  OpDef fused = registry.get("conv2d");
  fused.name = kOp;
  fused.max_inputs = 4;
  fused.optional_inputs = {2, 3};
  fused.attrs.push_back({"activation", AttrKind::String, std::string("none")});
  fused.attrs.push_back({"alpha", AttrKind::Float, 0.0});
  fused.attrs.push_back({"beta", AttrKind::Float, 0.0});
  fused.attrs.push_back({"scale_after", AttrKind::Float, 1.0});
  fused.attrs.push_back({"shift_after", AttrKind::Float, 0.0});
  fused.attrs.push_back({"layout", AttrKind::String, std::string("nchw")});
  fused.infer = infer_conv2d_fused;
  fused.cpu = conv2d_fused_kernel;
  fused.prepare = prepare_conv2d_fused;
  fused.grad = nullptr;  // inference only: the pass runs on frozen graphs
  fused.onnx = {};       // the exporter writes the ops it stands for
  registry.add(std::move(fused));

  OpDef pool = registry.get("max_pool2d");
  pool.name = kPoolOp;
  pool.infer = infer_max_pool2d_nhwc;
  pool.cpu = max_pool2d_nhwc_kernel;
  pool.grad = nullptr;  // inference only
  pool.onnx = {};       // exported as max_pool2d between transposes
  registry.add(std::move(pool));
}

}  // namespace kiln
