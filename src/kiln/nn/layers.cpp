#include "kiln/nn/layers.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"

namespace kiln::nn {

namespace {

const char* py_bool(bool b) {
  return b ? "True" : "False";
}

// IntList as a Python tuple, "(3, 3)", or a bare number when it has one entry.
std::string py_ints(const IntList& v) {
  if (v.size() == 1) return std::to_string(v[0]);
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + ")";
}

// PyTorch's _pair: one value means the same for height and width.
IntList pair(const IntList& v, const char* what) {
  KILN_CHECK_VALUE(v.size() == 1 || v.size() == 2, "Conv2d: ", what,
                   " must have 1 or 2 values, got ", v);
  return v.size() == 1 ? IntList{v[0], v[0]} : v;
}

// PyTorch's default for Linear and Conv: kaiming_uniform_(a=sqrt(5)) on the
// weight, which works out to U(±1/sqrt(fan_in)), and the same bound for bias.
void reset_affine(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

}  // namespace

// ---- Linear ----------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : Module("Linear"), in_features(in_features), out_features(out_features) {
  KILN_CHECK_VALUE(in_features >= 0 && out_features >= 0,
                   "Linear: feature counts must be non-negative, got in_features=", in_features,
                   " and out_features=", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = register_parameter("bias", with_bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  reset_affine(weight, bias);
}

Tensor Linear::forward(const Tensor& x) {
  return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return str("in_features=", in_features, ", out_features=", out_features,
             ", bias=", py_bool(bias.defined()));
}

// ---- Conv2d ----------------------------------------------------------------

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntList kernel_size_, IntList stride_,
               IntList padding_, IntList dilation_, int64_t groups, bool with_bias)
    : Module("Conv2d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(pair(kernel_size_, "kernel_size")),
      stride(pair(stride_, "stride")),
      padding(pair(padding_, "padding")),
      dilation(pair(dilation_, "dilation")),
      groups(groups) {
  KILN_CHECK_VALUE(groups > 0, "Conv2d: groups must be a positive integer, got ", groups);
  KILN_CHECK_VALUE(in_channels % groups == 0, "Conv2d: in_channels (", in_channels,
                   ") must be divisible by groups (", groups, ")");
  KILN_CHECK_VALUE(out_channels % groups == 0, "Conv2d: out_channels (", out_channels,
                   ") must be divisible by groups (", groups, ")");
  weight = register_parameter(
      "weight", empty({out_channels, in_channels / groups, kernel_size[0], kernel_size[1]}));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  reset_affine(weight, bias);
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
}

std::string Conv2d::extra_repr() const {
  std::string out = str(in_channels, ", ", out_channels, ", kernel_size=", py_ints(kernel_size),
                        ", stride=", py_ints(stride));
  if (padding != IntList{0, 0}) out += ", padding=" + py_ints(padding);
  if (dilation != IntList{1, 1}) out += ", dilation=" + py_ints(dilation);
  if (groups != 1) out += str(", groups=", groups);
  if (!bias.defined()) out += ", bias=False";
  return out;
}

// ---- activations -----------------------------------------------------------

Tensor ReLU::forward(const Tensor& x) {
  return relu(x);
}
Tensor Sigmoid::forward(const Tensor& x) {
  return sigmoid(x);
}
Tensor Tanh::forward(const Tensor& x) {
  return tanh(x);
}

GELU::GELU(std::string approximate) : Module("GELU"), approximate(std::move(approximate)) {
  KILN_CHECK_VALUE(this->approximate == "none" || this->approximate == "tanh",
                   "GELU: approximate must be 'none' or 'tanh', got '", this->approximate, "'");
}
Tensor GELU::forward(const Tensor& x) {
  return gelu(x, approximate);
}
std::string GELU::extra_repr() const {
  return "approximate='" + approximate + "'";
}

Tensor LeakyReLU::forward(const Tensor& x) {
  return leaky_relu(x, negative_slope);
}
std::string LeakyReLU::extra_repr() const {
  return str("negative_slope=", negative_slope);
}

// ---- pooling ---------------------------------------------------------------

MaxPool2d::MaxPool2d(IntList kernel_size, IntList stride, IntList padding, IntList dilation,
                     bool ceil_mode)
    : Module("MaxPool2d"),
      kernel_size(std::move(kernel_size)),
      stride(std::move(stride)),
      padding(std::move(padding)),
      dilation(std::move(dilation)),
      ceil_mode(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return str("kernel_size=", py_ints(kernel_size),
             ", stride=", py_ints(stride.empty() ? kernel_size : stride),
             ", padding=", py_ints(padding), ", dilation=", py_ints(dilation),
             ", ceil_mode=", py_bool(ceil_mode));
}

AvgPool2d::AvgPool2d(IntList kernel_size, IntList stride, IntList padding, bool ceil_mode,
                     bool count_include_pad)
    : Module("AvgPool2d"),
      kernel_size(std::move(kernel_size)),
      stride(std::move(stride)),
      padding(std::move(padding)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return str("kernel_size=", py_ints(kernel_size),
             ", stride=", py_ints(stride.empty() ? kernel_size : stride),
             ", padding=", py_ints(padding));
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntList output_size)
    : Module("AdaptiveAvgPool2d"), output_size(std::move(output_size)) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + py_ints(output_size);
}

// ---- shape, dropout, softmax -----------------------------------------------

Tensor Flatten::forward(const Tensor& x) {
  return flatten(x, start_dim, end_dim);
}
std::string Flatten::extra_repr() const {
  return str("start_dim=", start_dim, ", end_dim=", end_dim);
}

Dropout::Dropout(double p) : Module("Dropout"), p(p) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0,
                   "Dropout: dropout probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p, is_training());
}
std::string Dropout::extra_repr() const {
  return str("p=", p, ", inplace=False");
}

Tensor Softmax::forward(const Tensor& x) {
  return softmax(x, dim);
}
std::string Softmax::extra_repr() const {
  return str("dim=", dim);
}

Tensor LogSoftmax::forward(const Tensor& x) {
  return log_softmax(x, dim);
}
std::string LogSoftmax::extra_repr() const {
  return str("dim=", dim);
}

// ---- Embedding -------------------------------------------------------------

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<int64_t> padding_idx_)
    : Module("Embedding"), num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  if (padding_idx_) {
    int64_t idx = *padding_idx_;
    KILN_CHECK_VALUE(idx < num_embeddings && idx >= -num_embeddings,
                     "Embedding: padding_idx must be within num_embeddings (", num_embeddings,
                     "), got ", idx);
    padding_idx = idx < 0 ? idx + num_embeddings : idx;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  NoGradGuard no_grad;  // the row view is taken of a leaf that requires grad
  if (padding_idx) init::zeros_(select(weight, 0, *padding_idx));
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight, indices, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string out = str(num_embeddings, ", ", embedding_dim);
  if (padding_idx) out += str(", padding_idx=", *padding_idx);
  return out;
}

}  // namespace kiln::nn
