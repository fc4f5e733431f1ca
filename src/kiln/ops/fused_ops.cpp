// Fused ops: a producer op followed by an activation applied to its output
// in place, as one op the fusion pass (jit/passes/fuse.cpp) puts where the
// graph had linear -> relu or conv2d -> sigmoid. Nothing here restates what
// an op means: the producer's own infer, kernel, prepared kernel and
// backward rule run, then the activation's own kernel over the producer's
// output while it is still in cache, and in backward the activation's own
// rule gives the gradient the producer's rule takes. So a fused op computes
// exactly the bits the two ops compute one after the other.
//
//   linear_act(x, w, b?) {activation}        = activation(linear(x, w, b))
//   conv2d_act(x, w, b?) {stride, ..., activation} = activation(conv2d(x, w, b))
//
// Activations: relu, sigmoid, tanh (their backward reads only the output,
// which the fused op keeps; gelu's reads its input, which it does not).
#include "kiln/kernels/cpu/unary.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

cpu::UnaryOp activation_kernel(const std::string& name) {
  if (name == "relu") return cpu::UnaryOp::Relu;
  if (name == "sigmoid") return cpu::UnaryOp::Sigmoid;
  return cpu::UnaryOp::Tanh;
}

// The activation's backward rule sees the fused op's output as its own.
class ActivationGradContext final : public GradContext {
 public:
  explicit ActivationGradContext(const GradContext& fused) : fused_(fused) {
    Tensor y = fused.output(0);
    output_meta_ = TensorMeta{y.dtype(), y.shape()};
  }
  size_t num_inputs() const override { return 1; }
  Tensor input(size_t) const override {
    KILN_ASSERT(false, "a fused activation's backward cannot read its input");
    return {};
  }
  Tensor output(size_t i) const override { return fused_.output(i); }
  const TensorMeta& input_meta(size_t) const override { return output_meta_; }
  bool needs_input_grad(size_t) const override { return true; }
  const Tensor& grad_output(size_t i) const override { return fused_.grad_output(i); }
  const Attrs& attrs() const override { return no_attrs_; }

 private:
  const GradContext& fused_;
  TensorMeta output_meta_;
  Attrs no_attrs_;
};

// The producer's backward rule sees the activation's input gradient as the
// gradient of its output.
class ProducerGradContext final : public GradContext {
 public:
  ProducerGradContext(const GradContext& fused, Tensor grad)
      : fused_(fused), grad_(std::move(grad)) {}
  size_t num_inputs() const override { return fused_.num_inputs(); }
  Tensor input(size_t i) const override { return fused_.input(i); }
  Tensor output(size_t) const override {
    KILN_ASSERT(false, "a fused producer's backward cannot read its output");
    return {};
  }
  const TensorMeta& input_meta(size_t i) const override { return fused_.input_meta(i); }
  bool needs_input_grad(size_t i) const override { return fused_.needs_input_grad(i); }
  const Tensor& grad_output(size_t) const override { return grad_; }
  const Attrs& attrs() const override { return fused_.attrs(); }

 private:
  const GradContext& fused_;
  Tensor grad_;
};

void apply_activation(const KernelArgs& args, cpu::UnaryOp activation) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::unary(activation, out, out);
}

// The producer's prepared kernel (or plain kernel), then the activation,
// unless the producer's kernel applies it as it stores (relu in kiln's
// matvec and GEMM: the same bits, one pass over the output fewer).
class PreparedWithActivation final : public PreparedKernel {
 public:
  PreparedWithActivation(const OpDef& producer, std::unique_ptr<PreparedKernel> prepared,
                         cpu::UnaryOp activation)
      : producer_(producer), prepared_(std::move(prepared)), activation_(activation) {
    fused_ = prepared_ && activation_ == cpu::UnaryOp::Relu && prepared_->take_relu();
  }
  void run(const KernelArgs& args) const override {
    if (prepared_) {
      prepared_->run(args);
    } else {
      producer_.cpu(args);
    }
    if (!fused_) apply_activation(args, activation_);
  }
  int packable_input() const override { return prepared_ ? prepared_->packable_input() : -1; }
  void run_packed(const KernelArgs& args, uint64_t version) const override {
    prepared_->run_packed(args, version);
    if (!fused_) apply_activation(args, activation_);
  }

 private:
  const OpDef& producer_;
  std::unique_ptr<PreparedKernel> prepared_;
  cpu::UnaryOp activation_;
  bool fused_ = false;  // the producer's kernel applies the activation
};

template <const char* kProducer>
struct WithActivation {
  static const OpDef& producer() {
    static const OpDef& def = op(kProducer);
    return def;
  }

  static InferResult infer(const InferArgs& args) {
    InferResult result = producer().infer(InferArgs{producer(), args.inputs, args.attrs});
    const std::string& activation = args.attrs.get_string("activation");
    KILN_CHECK_VALUE(activation == "relu" || activation == "sigmoid" || activation == "tanh",
                     args.op.name, ": activation must be relu, sigmoid or tanh, got '", activation,
                     "'");
    const DType dtype = result.outputs[0].dtype;
    KILN_CHECK_TYPE(activation == "relu" || is_floating(dtype), args.op.name, ": activation ",
                    activation, " needs a floating result, got ", dtype);
    return result;
  }

  static void kernel(const KernelArgs& args) {
    producer().cpu(args);
    apply_activation(args, activation_kernel(args.attrs.get_string("activation")));
  }

  static std::unique_ptr<PreparedKernel> prepare(const KernelArgs& args) {
    std::unique_ptr<PreparedKernel> prepared;
    if (producer().prepare) prepared = producer().prepare(args);
    return std::make_unique<PreparedWithActivation>(
        producer(), std::move(prepared), activation_kernel(args.attrs.get_string("activation")));
  }

  static std::vector<Tensor> grad(const GradContext& ctx) {
    const OpDef& activation = op(ctx.attrs().get_string("activation"));
    Tensor grad_before_activation = activation.grad(ActivationGradContext(ctx))[0];
    return producer().grad(ProducerGradContext(ctx, std::move(grad_before_activation)));
  }

  static OpDef def(const OpRegistry& registry, std::string name) {
    const OpDef& base = registry.get(kProducer);
    OpDef fused = base;
    fused.name = std::move(name);
    fused.attrs.push_back({"activation", AttrKind::String, std::string("relu")});
    fused.infer = infer;
    fused.cpu = kernel;
    fused.prepare = prepare;
    fused.grad = grad;
    fused.onnx = {};  // the exporter writes the two ops it stands for
    return fused;
  }
};

constexpr char kLinear[] = "linear";
constexpr char kConv2d[] = "conv2d";

}  // namespace

void register_fused_elementwise(OpRegistry& registry);  // fused_elementwise.cpp

void register_fused_ops(OpRegistry& registry) {
  registry.add(WithActivation<kLinear>::def(registry, "linear_act"));
  registry.add(WithActivation<kConv2d>::def(registry, "conv2d_act"));
  register_fused_elementwise(registry);
}

}  // namespace kiln
