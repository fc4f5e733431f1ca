#include "kiln/nn/normalization.h"

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
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

}  // namespace kiln::nn
