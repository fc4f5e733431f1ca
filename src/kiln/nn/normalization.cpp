#include "kiln/nn/normalization.h"

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/copy.h"

namespace kiln::nn {

namespace {
const char* py_bool(bool b) {
  return b ? "True" : "False";
}
}  // namespace

BatchNorm::BatchNorm(const char* type_name, int64_t num_features, double eps,
                     std::optional<double> momentum, bool affine, bool track_running_stats)
    : Module(type_name),
      num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats) {
  if (affine) {
    weight = register_parameter("weight", empty({num_features}));
    bias = register_parameter("bias", empty({num_features}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", empty({num_features}));
    running_var = register_buffer("running_var", empty({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", empty({}, DType::Int64));
  }
  reset_parameters();
}

void BatchNorm::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard no_grad;
  zero_(running_mean);
  fill_(running_var, 1.0);
  zero_(num_batches_tracked);
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (!affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

// As torch.nn.modules.batchnorm._BatchNorm.forward.
Tensor BatchNorm::forward(const Tensor& x) {
  check_input_dim(x);
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    add_(num_batches_tracked, int64_t(1));
    if (!momentum) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics while training, or in eval when there are no running ones.
  bool use_batch_stats = is_training() || !track_running_stats;
  bool pass_running = !is_training() || track_running_stats;
  return batch_norm(x, weight, bias, pass_running ? running_mean : Tensor(),
                    pass_running ? running_var : Tensor(), use_batch_stats, factor, eps);
}

std::string BatchNorm::extra_repr() const {
  std::string m = momentum ? str(*momentum) : "None";
  return str(num_features, ", eps=", eps, ", momentum=", m, ", affine=", py_bool(affine),
             ", track_running_stats=", py_bool(track_running_stats));
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  KILN_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ",
                   x.dim(), "D input)");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  KILN_CHECK_VALUE(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input)");
}

LayerNorm::LayerNorm(IntList normalized_shape, double eps, bool elementwise_affine, bool with_bias)
    : Module("LayerNorm"),
      normalized_shape(std::move(normalized_shape)),
      eps(eps),
      elementwise_affine(elementwise_affine) {
  if (!elementwise_affine) return;
  weight = register_parameter("weight", ones(this->normalized_shape));
  bias = register_parameter("bias", with_bias ? zeros(this->normalized_shape) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::string shape = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  }
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return str(shape, ", eps=", eps, ", elementwise_affine=", py_bool(elementwise_affine));
}

// ---- group_norm / instance_norm ---------------------------------------------

namespace functional {
namespace {

void check_channel_vector(const Tensor& t, int64_t channels, const Tensor& x, const char* fn,
                          const char* what) {
  if (!t.defined()) return;
  KILN_CHECK(t.dim() == 1 && t.shape()[0] == channels, fn, ": expected ", what,
             " to be a vector of size equal to the number of channels in input, but got ", what,
             " of shape ", t.shape(), " and input of shape ", x.shape());
}

// weight and bias [C] applied along dim 1 of y [N, C, *].
Tensor affine(const Tensor& y, const Tensor& weight, const Tensor& bias) {
  IntList shape(size_t(y.dim() - 1), 1);
  shape[0] = -1;
  Tensor out = y;
  if (weight.defined()) out = out * reshape(weight, shape);
  if (bias.defined()) out = out + reshape(bias, shape);
  return out;
}

// The product of x's dims from `from` on, when all of them are static.
std::optional<int64_t> static_numel_from(const Tensor& x, int64_t from) {
  int64_t n = 1;
  for (int64_t d = from; d < x.dim(); ++d) {
    const Dim size = sym_size(x, d);
    if (!size.is_static()) return std::nullopt;
    n *= size.static_value();
  }
  return n;
}

// PyTorch's instance_norm moves each running statistic towards the mean over
// the batch of the per-instance statistics (the variance unbiased).
void update_instance_running_stats(const Tensor& x, const Tensor& running_mean,
                                   const Tensor& running_var, double momentum) {
  NoGradGuard no_grad;
  IntList spatial;
  for (int64_t d = 2; d < x.dim(); ++d)
    spatial.push_back(d);
  Tensor batch_mean = mean(mean(x, spatial), {0});
  Tensor batch_var = mean(var(x, spatial, 1), {0});
  copy_(running_mean, running_mean * (1.0 - momentum) + batch_mean * momentum);
  copy_(running_var, running_var * (1.0 - momentum) + batch_var * momentum);
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  KILN_CHECK(x.dim() >= 2,
             "group_norm: expected at least 2 dimensions for input tensor but "
             "received ",
             x.dim());
  const int64_t channels = x.shape()[1];
  KILN_CHECK(num_groups > 0 && channels % num_groups == 0,
             "group_norm: expected number of channels in input to be divisible by num_groups, "
             "but got input of shape ",
             x.shape(), " and num_groups=", num_groups);
  check_channel_vector(weight, channels, x, "group_norm", "weight");
  check_channel_vector(bias, channels, x, "group_norm", "bias");
  const std::optional<int64_t> spatial = static_numel_from(x, 2);
  KILN_CHECK_VALUE(!spatial || x.shape()[0] * channels / num_groups * *spatial != 1,
                   "group_norm: expected more than 1 value per channel when training, got input "
                   "size ",
                   x.shape());
  const DimList shape = sym_shape(x);
  Tensor normalized;
  if (spatial && channels / num_groups * *spatial == 1) {
    normalized = x - x;  // a group of one element normalizes to 0 (batch_norm refuses it)
  } else {
    // Each (sample, group) is one channel of a batch_norm over [1, N * G, rest].
    Tensor grouped = reshape(x, DimList{1, shape[0] * num_groups, -1});
    normalized = reshape(batch_norm(grouped, {}, {}, {}, {}, true, 0.0, eps), shape);
  }
  return affine(normalized, weight, bias);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  KILN_CHECK(x.dim() >= 2,
             "instance_norm: expected at least 2 dimensions for input tensor but "
             "received ",
             x.dim());
  const int64_t channels = x.shape()[1];
  check_channel_vector(weight, channels, x, "instance_norm", "weight");
  check_channel_vector(bias, channels, x, "instance_norm", "bias");
  check_channel_vector(running_mean, channels, x, "instance_norm", "running_mean");
  check_channel_vector(running_var, channels, x, "instance_norm", "running_var");
  KILN_CHECK(running_mean.defined() == running_var.defined(),
             "instance_norm: running_mean and running_var must be given together");
  if (!use_input_stats) {
    KILN_CHECK(running_mean.defined(),
               "instance_norm: expected running_mean and running_var to "
               "be defined when use_input_stats is false");
    return batch_norm(x, weight, bias, running_mean, running_var, false, momentum, eps);
  }
  const std::optional<int64_t> spatial = static_numel_from(x, 2);
  KILN_CHECK_VALUE(!spatial || *spatial != 1,
                   "instance_norm: expected more than 1 spatial element when training, got input "
                   "size ",
                   x.shape());
  // Each (sample, channel) is one channel of a batch_norm over [1, N * C, *].
  const DimList shape = sym_shape(x);
  DimList flat{1, shape[0] * shape[1]};
  flat.insert(flat.end(), shape.begin() + 2, shape.end());
  Tensor normalized = reshape(batch_norm(reshape(x, flat), {}, {}, {}, {}, true, 0.0, eps), shape);
  if (running_mean.defined()) {
    update_instance_running_stats(x, running_mean, running_var, momentum);
  }
  return affine(normalized, weight, bias);
}

}  // namespace functional

// ---- GroupNorm / InstanceNorm -----------------------------------------------

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine,
                     bool with_bias)
    : Module("GroupNorm"),
      num_groups(num_groups),
      num_channels(num_channels),
      eps(eps),
      affine(affine) {
  KILN_CHECK_VALUE(num_groups > 0 && num_channels % num_groups == 0, "GroupNorm: num_channels (",
                   num_channels, ") must be divisible by num_groups (", num_groups, ")");
  if (!affine) return;
  weight = register_parameter("weight", ones({num_channels}));
  bias = register_parameter("bias", with_bias ? zeros({num_channels}) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& x) {
  return functional::group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  return str(num_groups, ", ", num_channels, ", eps=", eps, ", affine=", py_bool(affine),
             ", bias=", py_bool(bias.defined()));
}

InstanceNorm::InstanceNorm(const char* type_name, int64_t spatial_dims, int64_t num_features,
                           double eps, std::optional<double> momentum, bool affine,
                           bool track_running_stats, bool with_bias)
    : Module(type_name),
      num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats),
      spatial_dims(spatial_dims) {
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bias = register_parameter("bias", with_bias ? zeros({num_features}) : Tensor());
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  }
}

// As torch.nn.modules.instancenorm._InstanceNorm.forward (which never counts
// num_batches_tracked; a momentum of None is 0).
Tensor InstanceNorm::forward(const Tensor& x) {
  const int64_t unbatched = spatial_dims + 1;
  KILN_CHECK_VALUE(x.dim() == unbatched || x.dim() == unbatched + 1, type_name(), ": expected ",
                   unbatched, "D or ", unbatched + 1, "D input (got ", x.dim(), "D input)");
  const int64_t feature_dim = x.dim() - unbatched;
  KILN_CHECK_VALUE(!affine || x.shape()[size_t(feature_dim)] == num_features, type_name(),
                   ": expected input's size at dim=", feature_dim, " to match num_features (",
                   num_features, "), but got: ", x.shape()[size_t(feature_dim)], ".");
  const Tensor input = x.dim() == unbatched ? unsqueeze(x, 0) : x;
  Tensor y =
      functional::instance_norm(input, running_mean, running_var, weight, bias,
                                is_training() || !track_running_stats, momentum.value_or(0.0), eps);
  return x.dim() == unbatched ? squeeze(y, 0) : y;
}

std::string InstanceNorm::extra_repr() const {
  std::string m = momentum ? str(*momentum) : "None";
  return str(num_features, ", eps=", eps, ", momentum=", m, ", affine=", py_bool(affine),
             ", bias=", py_bool(bias.defined()),
             ", track_running_stats=", py_bool(track_running_stats));
}

}  // namespace kiln::nn
