// The everyday layers: Linear, Conv2d, activations, pooling, Flatten,
// Dropout, Embedding, Softmax/LogSoftmax. Each is a thin Module over one op;
// constructors take PyTorch's arguments in PyTorch's order, and parameters
// get PyTorch's default initialization, drawn from kiln's generator.
#pragma once

#include <optional>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

// y = x Wᵀ + b. weight [out, in] ~ kaiming_uniform(a=sqrt(5)), i.e.
// U(±1/sqrt(in)); bias [out] ~ U(±1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias is undefined without one
};

// weight [out, in / groups, kh, kw], initialized like Linear's with
// fan_in = in / groups * kh * kw. One-element lists apply to both dims.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntList kernel_size, IntList stride = {1},
         IntList padding = {0}, IntList dilation = {1}, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  IntList kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");  // or "tanh"
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  std::string approximate;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01)
      : Module("LeakyReLU"), negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double negative_slope;
};

// An empty stride means "= kernel_size", as in PyTorch.
class MaxPool2d : public Module {
 public:
  MaxPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, IntList dilation = {1},
            bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  IntList kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  AvgPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, bool ceil_mode = false,
            bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  IntList kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntList output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  IntList output_size;
};

// Merges dims start_dim..end_dim; the default keeps the batch dim.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

// Drops elements with probability p while training; the identity in eval.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : Module("LogSoftmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t dim;
};

// A lookup table: weight [num_embeddings, embedding_dim] ~ N(0, 1), with the
// padding_idx row (negative counts from the end) zeroed and given no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to 0..num_embeddings-1
  Tensor weight;
};

}  // namespace kiln::nn
