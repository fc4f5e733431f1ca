// BatchNorm1d/2d and LayerNorm, with PyTorch's parameters, buffers and
// defaults (weight = 1, bias = 0, running_mean = 0, running_var = 1).
#pragma once

#include <optional>

#include "kiln/nn/module.h"

namespace kiln::nn {

// Shared by BatchNorm1d and BatchNorm2d, which differ only in the input
// dims they accept. Parameters: weight, bias [C] (when affine). Buffers:
// running_mean, running_var [C] and num_batches_tracked (int64, 0-d) when
// track_running_stats. Training normalizes with the batch statistics and
// updates the running ones; eval uses the running ones. momentum = nullopt
// means a cumulative average (factor 1 / num_batches_tracked).
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_running_stats();
  void reset_parameters();

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNorm(const char* type_name, int64_t num_features, double eps, std::optional<double> momentum,
            bool affine, bool track_running_stats);
  virtual void check_input_dim(const Tensor& x) const = 0;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// Normalizes over the trailing normalized_shape dims; weight and bias have
// that shape (when elementwise_affine; bias only when `bias`).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(IntList normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  IntList normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

}  // namespace kiln::nn
