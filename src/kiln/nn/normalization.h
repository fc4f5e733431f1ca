// BatchNorm1d/2d, LayerNorm, GroupNorm and InstanceNorm1d/2d, with
// PyTorch's parameters, buffers and defaults (weight = 1, bias = 0,
// running_mean = 0, running_var = 1), and group_norm / instance_norm, the
// functions the last two are: compositions of layer_norm and batch_norm.
#pragma once

#include <optional>

#include "kiln/nn/module.h"

namespace kiln::nn {
namespace functional {

// x [N, C, *] normalized over each group of C / num_groups channels (and
// all of *), then scaled by weight [C] and shifted by bias [C] when given.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// x [N, C, *] normalized per sample and channel over *. With
// use_input_stats the statistics are the input's, and the running ones
// (when given, [C]) move towards their batch mean by `momentum`, in place;
// otherwise the running ones are used.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {},
                     const Tensor& running_var = {}, const Tensor& weight = {},
                     const Tensor& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);

}  // namespace functional

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

// Parameters weight [C] (ones) and bias [C] (zeros) when affine (bias only
// when `bias`); num_channels must divide into num_groups.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;
};

// Shared by InstanceNorm1d and InstanceNorm2d. PyTorch's defaults differ
// from BatchNorm's: affine = false, track_running_stats = false. With
// running statistics, training updates them and eval uses them; an
// unbatched input ([C, L] / [C, H, W]) is one sample.
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  InstanceNorm(const char* type_name, int64_t spatial_dims, int64_t num_features, double eps,
               std::optional<double> momentum, bool affine, bool track_running_stats,
               bool with_bias);
  int64_t spatial_dims;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, bool bias = true)
      : InstanceNorm("InstanceNorm1d", 1, num_features, eps, momentum, affine, track_running_stats,
                     bias) {}
};

class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5,
                          std::optional<double> momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, bool bias = true)
      : InstanceNorm("InstanceNorm2d", 2, num_features, eps, momentum, affine, track_running_stats,
                     bias) {}
};

}  // namespace kiln::nn
