// dropout, batch_norm, layer_norm. Each also returns what its backward rule
// needs (dropout's mask, the saved statistics); the API functions return the
// first output.
#include "kiln/ops/nn.h"

#include "kiln/core/random.h"
#include "kiln/kernels/cpu/norm.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/kernel_util.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// ---- dropout(x; p, train) -> (y, mask) ----

InferResult infer_dropout(const InferArgs& args) {
  check_floating(args, 0);
  double p = args.attrs.get_float("p");
  KILN_CHECK_VALUE(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  const TensorMeta& x = args.inputs[0];
  return InferResult{{TensorMeta{x.dtype, x.shape}, TensorMeta{DType::Bool, x.shape}}, {}};
}

void dropout_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  bool* mask = args.outputs[1].ptr<bool>();
  const int64_t n = out.numel();
  ContiguousInput x(args.inputs[0]);
  if (!args.attrs.get_bool("train")) {
    visit_floating(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      std::copy_n(x.data<T>(), n, out.ptr<T>());
    });
    std::fill_n(mask, n, true);
    return;
  }
  Generator& gen = default_generator();
  uint64_t first_block = gen.reserve_blocks(uint64_t((n + 3) / 4));
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::dropout(x.data<T>(), out.ptr<T>(), mask, n, args.attrs.get_float("p"), gen.seed(),
                 first_block);
  });
}

// ---- batch_norm(x, weight?, bias?, running_mean?, running_var?) -> (y, mean, invstd) ----

void check_channel_vector(const InferArgs& args, size_t i, const char* what, const Dim& channels) {
  const TensorMeta& m = args.inputs[i];
  if (!m.defined) return;
  KILN_CHECK(m.shape == DimList{channels}, "batch_norm: expected ", what, " of shape [", channels,
             "] for input of shape ", args.inputs[0].shape, ", got ", m.shape);
  KILN_CHECK_TYPE(m.dtype == args.inputs[0].dtype, "batch_norm: expected ", what, " of dtype ",
                  args.inputs[0].dtype, ", got ", m.dtype);
}

InferResult infer_batch_norm(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  check_floating(args, 0);
  KILN_CHECK(x.dim() >= 2,
             "batch_norm: expected an input of at least 2 dims (N, C, ...), got shape ", x.shape);
  const Dim channels = x.shape[1];
  check_channel_vector(args, 1, "weight", channels);
  check_channel_vector(args, 2, "bias", channels);
  check_channel_vector(args, 3, "running_mean", channels);
  check_channel_vector(args, 4, "running_var", channels);
  bool training = args.attrs.get_bool("training");
  KILN_CHECK(training || (args.inputs[3].defined && args.inputs[4].defined),
             "batch_norm: running_mean and running_var must be given when training=false");
  if (training) {
    // numel / channels, for channels >= 1 (an empty input passes, as in PyTorch).
    std::optional<Dim> per_channel = exact_divide(numel_of(x.shape), channels);
    KILN_CHECK_VALUE(!per_channel || !definitely_less(*per_channel, 2),
                     "batch_norm: expected more than 1 value per channel when "
                     "training, got input shape ",
                     x.shape);
  }
  TensorMeta stat{x.dtype, {channels}};
  return InferResult{{TensorMeta{x.dtype, x.shape}, stat, stat}, {}};
}

void batch_norm_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  const cpu::StridedView& running_mean = args.inputs[3];
  const cpu::StridedView& running_var = args.inputs[4];
  bool training = args.attrs.get_bool("training");
  // The running statistics are updated in place, so they must be the real buffers.
  for (const cpu::StridedView* stat : {&running_mean, &running_var}) {
    KILN_CHECK(!training || stat->data == nullptr || stat->is_contiguous(),
               "batch_norm: running statistics must be contiguous to be updated in place");
  }
  int64_t n = x.shape[0], c = x.shape[1];
  int64_t s = c ? x.numel() / std::max<int64_t>(n * c, 1) : 0;
  ContiguousInput xin(x), weight(args.inputs[1]), bias(args.inputs[2]);
  ContiguousInput mean_in(running_mean), var_in(running_var);
  visit_floating(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batch_norm(xin.data<T>(), weight.data<T>(), bias.data<T>(),
                    const_cast<T*>(mean_in.data<T>()), const_cast<T*>(var_in.data<T>()),
                    args.outputs[0].ptr<T>(), args.outputs[1].ptr<T>(), args.outputs[2].ptr<T>(), n,
                    c, s, training, args.attrs.get_float("momentum"), args.attrs.get_float("eps"));
  });
}

// Training moves running_mean and running_var (inputs 3 and 4) in place.
std::vector<int> batch_norm_mutated_inputs(const Attrs& attrs) {
  if (!attrs.get_bool("training")) return {};
  return {3, 4};
}

// ---- layer_norm(x, weight?, bias?; normalized_shape, eps) -> (y, mean, rstd) ----

InferResult infer_layer_norm(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  check_floating(args, 0);
  const DimList normalized = args.attrs.get_dims("normalized_shape");
  int64_t lead = x.dim() - int64_t(normalized.size());
  bool matches =
      lead >= 0 && std::equal(normalized.begin(), normalized.end(), x.shape.begin() + lead);
  KILN_CHECK(matches, "layer_norm: normalized_shape ", normalized,
             " does not match the trailing dims of input shape ", x.shape);
  for (size_t i = 1; i <= 2; ++i) {
    const TensorMeta& m = args.inputs[i];
    if (!m.defined) continue;
    KILN_CHECK(m.shape == normalized, "layer_norm: expected ", i == 1 ? "weight" : "bias",
               " of shape ", normalized, ", got ", m.shape);
  }
  DimList stat_shape(x.shape.begin(), x.shape.begin() + lead);
  stat_shape.resize(x.shape.size(), 1);  // keepdim over the normalized dims, as PyTorch
  TensorMeta stat{x.dtype, stat_shape};
  return InferResult{{TensorMeta{x.dtype, x.shape}, stat, stat}, {x.dtype, x.dtype, x.dtype}};
}

void layer_norm_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  int64_t cols = numel_of(args.attrs.get_ints("normalized_shape"));
  int64_t rows = cols ? x.numel() / cols : 0;
  ContiguousInput xin(x), weight(args.inputs[1]), bias(args.inputs[2]);
  visit_floating(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::layer_norm(xin.data<T>(), weight.data<T>(), bias.data<T>(), args.outputs[0].ptr<T>(),
                    args.outputs[1].ptr<T>(), args.outputs[2].ptr<T>(), rows, cols,
                    args.attrs.get_float("eps"));
  });
}

// ---- backward rules ----
// Only output 0 carries a gradient back: dropout's mask and the saved
// statistics of batch_norm and layer_norm are treated as non-differentiable,
// as by PyTorch's native ops.

// y = x mask / (1 - p): dx = g mask / (1 - p) (the kernel's scale is 0 at p = 1).
std::vector<Tensor> dropout_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  if (!ctx.attrs().get_bool("train")) return {g};
  double p = ctx.attrs().get_float("p");
  return {(g * ctx.output(1)) * (p < 1.0 ? 1.0 / (1.0 - p) : 0.0)};
}

Tensor mean_over(const Tensor& t, const IntList& dims) {
  return dims.empty() ? t : mean(t, dims, /*keepdim=*/true);
}

// For y = x̂ w + b with x̂ = (x - mean) rstd, mean and rstd taken over
// `stat_dims` of x, and dx̂ = g w:
//   dx = rstd (dx̂ - mean(dx̂) - x̂ mean(dx̂ x̂))
Tensor normalized_input_grad(const Tensor& g_hat, const Tensor& x_hat, const Tensor& rstd,
                             const IntList& stat_dims) {
  return rstd *
         ((g_hat - mean_over(g_hat, stat_dims)) - x_hat * mean_over(g_hat * x_hat, stat_dims));
}

// batch_norm: statistics per channel (dim 1), over every other dim. In eval
// the running statistics are constants, so dx = g w rstd; the running
// statistics get no gradient (they are buffers, as in PyTorch).
std::vector<Tensor> batch_norm_grad(const GradContext& ctx) {
  const IntList& shape = ctx.input_shape(0);
  IntList stat_dims, channel_shape(shape.size(), 1);
  channel_shape[1] = shape[1];
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d != 1) stat_dims.push_back(d);
  }
  const Tensor& g = ctx.grad_output(0);
  Tensor mean = reshape(ctx.output(1), channel_shape);
  Tensor rstd = reshape(ctx.output(2), channel_shape);
  Tensor x_hat = (ctx.input(0) - mean) * rstd;
  std::vector<Tensor> grads(5);
  if (ctx.needs_input_grad(1)) grads[1] = sum(g * x_hat, stat_dims);  // dw = Σ g x̂
  if (ctx.needs_input_grad(2)) grads[2] = sum(g, stat_dims);          // db = Σ g
  if (!ctx.needs_input_grad(0)) return grads;
  Tensor g_hat = ctx.input_meta(1).defined ? g * reshape(ctx.input(1), channel_shape) : g;
  grads[0] = ctx.attrs().get_bool("training") ? normalized_input_grad(g_hat, x_hat, rstd, stat_dims)
                                              : g_hat * rstd;
  return grads;
}

// layer_norm: statistics per row over the trailing normalized dims; weight
// and bias span those dims, so their gradients sum over the leading ones.
std::vector<Tensor> layer_norm_grad(const GradContext& ctx) {
  const IntList& shape = ctx.input_shape(0);
  int64_t lead = int64_t(shape.size()) - int64_t(ctx.attrs().get_ints("normalized_shape").size());
  IntList lead_dims, stat_dims;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    (d < lead ? lead_dims : stat_dims).push_back(d);
  }
  auto over_rows = [&](const Tensor& t) { return lead_dims.empty() ? t : sum(t, lead_dims); };
  const Tensor& g = ctx.grad_output(0);
  Tensor rstd = ctx.output(2);
  Tensor x_hat = (ctx.input(0) - ctx.output(1)) * rstd;
  std::vector<Tensor> grads(3);
  if (ctx.needs_input_grad(1)) grads[1] = over_rows(g * x_hat);  // dw = Σ g x̂
  if (ctx.needs_input_grad(2)) grads[2] = over_rows(g);          // db = Σ g
  if (!ctx.needs_input_grad(0)) return grads;
  Tensor g_hat = ctx.input_meta(1).defined ? g * ctx.input(1) : g;
  grads[0] = normalized_input_grad(g_hat, x_hat, rstd, stat_dims);
  return grads;
}

}  // namespace

void register_nn_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "dropout",
                     .num_outputs = 2,
                     .attrs = {{"p", AttrKind::Float, 0.5}, {"train", AttrKind::Bool, true}},
                     .infer = infer_dropout,
                     .cpu = dropout_kernel,
                     .grad = dropout_grad,
                     .kind = OpKind::Opaque,
                     .is_random = true,
                     .onnx = {"Dropout"}});
  registry.add(OpDef{.name = "batch_norm",
                     .min_inputs = 5,
                     .max_inputs = 5,
                     .num_outputs = 3,
                     .optional_inputs = {1, 2, 3, 4},
                     .attrs = {{"training", AttrKind::Bool, false},
                               {"momentum", AttrKind::Float, 0.1},
                               {"eps", AttrKind::Float, 1e-5}},
                     .infer = infer_batch_norm,
                     .cpu = batch_norm_kernel,
                     .grad = batch_norm_grad,
                     .kind = OpKind::Opaque,
                     .has_side_effects = true,  // training updates the running statistics
                     .mutated_inputs = batch_norm_mutated_inputs,
                     .onnx = {"BatchNormalization"}});
  registry.add(
      OpDef{.name = "layer_norm",
            .min_inputs = 3,
            .max_inputs = 3,
            .num_outputs = 3,
            .optional_inputs = {1, 2},
            .attrs = {{"normalized_shape", AttrKind::Ints, {}}, {"eps", AttrKind::Float, 1e-5}},
            .infer = infer_layer_norm,
            .cpu = layer_norm_kernel,
            .grad = layer_norm_grad,
            .kind = OpKind::Opaque,
            .onnx = {"LayerNormalization"}});
}

Tensor dropout(const Tensor& x, double p, bool train) {
  if (!train) return x;
  static const OpDef& def = op("dropout");
  return dispatch(def, {x}, {{"p", p}, {"train", train}})[0];
}

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  static const OpDef& def = op("batch_norm");
  Tensor y = dispatch(def, {x, weight, bias, running_mean, running_var},
                      {{"training", training}, {"momentum", momentum}, {"eps", eps}})[0];
  if (training) {
    for (const Tensor& stat : {running_mean, running_var}) {
      if (stat.defined()) stat.bump_version();
    }
  }
  return y;
}

Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  static const OpDef& def = op("layer_norm");
  return dispatch(def, {x, weight, bias},
                  {{"normalized_shape", normalized_shape}, {"eps", eps}})[0];
}

}  // namespace kiln
