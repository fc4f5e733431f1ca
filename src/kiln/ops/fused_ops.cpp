// Fused ops: a producer op followed by an activation applied to its output
// in place, as one op the fusion pass (jit/passes/fuse_activations.cpp) puts where the
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
// Activations: those whose OpDef says fuses_after_producer (relu, sigmoid,
// tanh): their backward reads only the output, which the fused op keeps.
// linear_act also carries gelu, the erf form (jit/passes/fuse_linear_gelu.cpp
// puts it there; not the tanh form: the ONNX exporter unfuses linear_act
// into linear and the op its activation names, gelu without attributes):
// gelu's backward
// reads its input, which the fused op does not keep, so its backward
// computes linear(x, w, b) again (a GEMM more in training, none in
// inference, where the fused op saves a plan step and a buffer: gelu runs
// over the product while it is still in L2).
#include "kiln/ops/linalg.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

// gelu as linear_act names it, and gelu's attributes for it.
bool is_gelu(const std::string& activation) {
  return activation == "gelu";
}
const Attrs& gelu_attrs(const std::string&) {
  static const Attrs erf{{"approximate", std::string("none")}};
  return erf;
}

// The activation a fused op names, checked to be one it can carry: an
// activation without attributes whose backward reads only its output, or
// (linear_act) a form of gelu.
const OpDef& fusable_activation(const std::string& fused_op, const std::string& name) {
  static const OpDef& gelu = op("gelu");
  if (fused_op == "linear_act" && is_gelu(name)) return gelu;
  const OpDef* activation = op_registry().find(name);
  KILN_CHECK_VALUE(activation && activation->fuses_after_producer(), fused_op,
                   ": activation must be an activation whose backward reads only its ",
                   "output (relu, sigmoid, tanh)", fused_op == "linear_act" ? ", or gelu" : "",
                   ", got '", name, "'");
  return *activation;
}

// The activation's backward rule sees the fused op's output as its own.
class ActivationGradContext final : public GradContext {
 public:
  explicit ActivationGradContext(const GradContext& fused) : fused_(fused) {
    Tensor y = fused.output(0);
    output_meta_ = TensorMeta{y.dtype(), to_dims(y.shape())};
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

// gelu's backward rule with the pre-activation computed again as its input.
class RecomputedGeluGradContext final : public GradContext {
 public:
  RecomputedGeluGradContext(const GradContext& fused, Tensor pre_activation, const Attrs& attrs)
      : fused_(fused), pre_(std::move(pre_activation)), attrs_(attrs) {
    meta_ = TensorMeta{pre_.dtype(), to_dims(pre_.shape())};
  }
  size_t num_inputs() const override { return 1; }
  Tensor input(size_t) const override { return pre_; }
  Tensor output(size_t i) const override { return fused_.output(i); }
  const TensorMeta& input_meta(size_t) const override { return meta_; }
  bool needs_input_grad(size_t) const override { return true; }
  const Tensor& grad_output(size_t i) const override { return fused_.grad_output(i); }
  const Attrs& attrs() const override { return attrs_; }

 private:
  const GradContext& fused_;
  Tensor pre_;
  const Attrs& attrs_;
  TensorMeta meta_;
};

// The activation's own kernel, in place over the fused op's output (gelu
// with the attributes its name stands for).
void apply_activation(const KernelArgs& args, const OpDef& activation, const std::string& name) {
  static const Attrs kNoAttrs;
  const Attrs& attrs = is_gelu(name) ? gelu_attrs(name) : kNoAttrs;
  activation.cpu(KernelArgs{args.outputs.first(1), args.outputs.first(1), attrs});
}

// The producer's prepared kernel (or plain kernel), then the activation,
// unless the producer's kernel applies it as it stores (relu in kiln's
// matvec and GEMM, gelu in the GEMM: the same bits, one pass over the
// output fewer).
class PreparedWithActivation final : public PreparedKernel {
 public:
  PreparedWithActivation(const OpDef& producer, std::unique_ptr<PreparedKernel> prepared,
                         const OpDef& activation, std::string name)
      : producer_(producer),
        prepared_(std::move(prepared)),
        activation_(activation),
        name_(std::move(name)) {
    static const OpDef& relu = op("relu");
    // The producer's prepared kernel was made with this op's attributes, so
    // it knows the activation (kiln's GEMM also applies gelu as it stores).
    fused_ = prepared_ && (&activation_ == &relu || is_gelu(name_)) && prepared_->take_relu();
  }
  void run(const KernelArgs& args) const override {
    if (prepared_) {
      prepared_->run(args);
    } else {
      producer_.cpu(args);
    }
    if (!fused_) apply_activation(args, activation_, name_);
  }
  int packable_input() const override { return prepared_ ? prepared_->packable_input() : -1; }
  void run_packed(const KernelArgs& args, uint64_t version) const override {
    prepared_->run_packed(args, version);
    if (!fused_) apply_activation(args, activation_, name_);
  }

 private:
  const OpDef& producer_;
  std::unique_ptr<PreparedKernel> prepared_;
  const OpDef& activation_;
  std::string name_;    // the fused op's activation attribute
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
    const std::string& name = args.attrs.get_string("activation");
    const OpDef& activation = fusable_activation(args.op.name, name);
    // The activation's own inference over the producer's output: it must
    // take that dtype as it is and keep it (sigmoid of an integer result
    // would compute in float32, which an in-place pass cannot hold).
    const TensorMeta& produced = result.outputs[0];
    InferResult applied = activation.infer(
        InferArgs{activation, {&produced, 1}, is_gelu(name) ? gelu_attrs(name) : Attrs()});
    bool keeps_dtype = applied.outputs[0].dtype == produced.dtype &&
                       (applied.input_dtypes.empty() || applied.input_dtypes[0] == produced.dtype);
    KILN_CHECK_TYPE(keeps_dtype, args.op.name, ": activation ", activation.name,
                    " cannot run in place over a result of dtype ", produced.dtype,
                    " (it computes in ", applied.outputs[0].dtype, ")");
    return result;
  }

  // Infer checked the activation already; the kernels only look it up.
  static const OpDef& activation_of(const KernelArgs& args) {
    return fusable_activation(std::string(kProducer) + "_act", args.attrs.get_string("activation"));
  }

  static void kernel(const KernelArgs& args) {
    producer().cpu(args);
    apply_activation(args, activation_of(args), args.attrs.get_string("activation"));
  }

  static std::unique_ptr<PreparedKernel> prepare(const KernelArgs& args) {
    std::unique_ptr<PreparedKernel> prepared;
    if (producer().prepare) prepared = producer().prepare(args);
    return std::make_unique<PreparedWithActivation>(
        producer(), std::move(prepared), activation_of(args), args.attrs.get_string("activation"));
  }

  static std::vector<Tensor> grad(const GradContext& ctx) {
    const std::string& name = ctx.attrs().get_string("activation");
    if (is_gelu(name)) return gelu_grad(ctx, name);
    const OpDef& activation = op(name);
    Tensor grad_before_activation = activation.grad(ActivationGradContext(ctx))[0];
    return producer().grad(ProducerGradContext(ctx, std::move(grad_before_activation)));
  }

  // linear_act with gelu: linear(x, w, b) again, as gelu's input.
  static std::vector<Tensor> gelu_grad(const GradContext& ctx, const std::string& name) {
    static const OpDef& gelu = op("gelu");
    const Tensor bias = ctx.num_inputs() > 2 ? ctx.input(2) : Tensor();
    Tensor pre_activation = linear(ctx.input(0), ctx.input(1), bias);
    Tensor grad_before_activation =
        gelu.grad(RecomputedGeluGradContext(ctx, std::move(pre_activation), gelu_attrs(name)))[0];
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
void register_attention_ops(OpRegistry& registry);      // attention_ops.cpp
void register_conv_fused_ops(OpRegistry& registry);     // conv_fused_ops.cpp

void register_fused_ops(OpRegistry& registry) {
  registry.add(WithActivation<kLinear>::def(registry, "linear_act"));
  registry.add(WithActivation<kConv2d>::def(registry, "conv2d_act"));
  register_fused_elementwise(registry);
  register_attention_ops(registry);
  register_conv_fused_ops(registry);
}

}  // namespace kiln
