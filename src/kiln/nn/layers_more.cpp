// The activations, dropouts, norms, shape functions and embedding_bag of
// layers_more.h (the pools are in pooling_more.cpp). PyTorch's reference is
// aten/src/ATen/native/{Activation,Dropout,EmbeddingBag}.cpp and
// torch/nn/functional.py; where an op order decides the rounding, this
// follows PyTorch's.
#include <cfloat>
#include <cmath>
#include <limits>

#include "kiln/core/shape.h"
#include "kiln/core/sym_shape.h"
#include "kiln/nn/layers_more.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/resample.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

namespace {

// SELU's constants (Klambauer et al.), as PyTorch spells them.
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

// log1p(exp(v)) with no threshold: softplus with beta 1 never switching to v.
Tensor log1p_exp(const Tensor& v) {
  return softplus(v, 1.0, std::numeric_limits<double>::max());
}

}  // namespace

// ---- activations ----------------------------------------------------------

Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_CHECK(x.dtype() == weight.dtype(), "prelu: Type promoting not supported. Got ", x.dtype(),
             " and ", weight.dtype());
  KILN_CHECK(
      weight.dim() <= 1,
      "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = ", weight.dim());
  if (weight.numel() != 1) {
    KILN_CHECK(x.dim() > 0, "prelu: Not allow zero-dim input tensor.");
    const int64_t channels = x.dim() > 1 ? x.size(1) : 1;
    KILN_CHECK(channels == weight.numel(),
               "prelu: Mismatch of parameter numbers and input channel size. Found parameter "
               "numbers = ",
               weight.numel(), " and channel size = ", channels, ".");
  }
  Tensor w = weight;
  if (x.dim() != weight.dim()) {  // [C] -> [1, C, 1, ...]
    IntList shape(size_t(x.dim()), 1);
    if (x.dim() > 1) shape[1] = weight.numel();
    w = reshape(weight, shape);
  }
  return where(gt(x, 0.0), x, w * x);
}

// PyTorch's elu kernel with scale: x > 0 ? scale x : alpha scale expm1(x).
Tensor selu(const Tensor& x) {
  return where(gt(x, 0.0), x * kSeluScale, elu(x, 1.0) * (kSeluAlpha * kSeluScale));
}

// PyTorch: elu(x, alpha, scale = 1, input_scale = 1 / alpha).
Tensor celu(const Tensor& x, double alpha) {
  KILN_CHECK(alpha != 0.0, "celu: ZeroDivisionError (alpha must not be 0)");
  return where(gt(x, 0.0), x, elu(x * (1.0 / alpha), 1.0) * alpha);
}

Tensor glu(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t d = wrap_dim(dim, x.dim(), "glu", x.shape());
  KILN_CHECK(x.size(d) % 2 == 0, "glu: Halving dimension must be even, but dimension ", d,
             " is size ", x.size(d));
  std::vector<Tensor> halves = chunk(x, 2, d);
  return halves[0] * sigmoid(halves[1]);
}

// PyTorch's log_sigmoid kernel: stable for large |x| of either sign.
Tensor logsigmoid(const Tensor& x) {
  return clamp(x, std::nullopt, 0.0) - log1p_exp(-abs(x));
}

Tensor softsign(const Tensor& x) {
  return x / (abs(x) + 1.0);
}

Tensor tanhshrink(const Tensor& x) {
  return x - tanh(x);
}

Tensor hardshrink(const Tensor& x, double lambd) {
  return where(le(abs(x), lambd), 0.0, x);
}

Tensor softshrink(const Tensor& x, double lambd) {
  KILN_CHECK(lambd >= 0.0, "softshrink: lambda must be greater or equal to 0, but found to be ",
             lambd, ".");
  return where(gt(x, lambd), x - lambd, where(lt(x, -lambd), x + lambd, 0.0));
}

// NaN is kept: it compares false with the threshold.
Tensor threshold(const Tensor& x, double threshold, double value) {
  return where(le(x, threshold), value, x);
}

Tensor softmin(const Tensor& x, int64_t dim) {
  return softmax(-x, dim);
}

Tensor softmax2d(const Tensor& x) {
  KILN_CHECK_VALUE(x.dim() == 3 || x.dim() == 4, "Softmax2d: expected input to be 3D or 4D, got ",
                   x.dim(), "D instead");
  return softmax(x, -3);
}

// ---- dropout ----------------------------------------------------------------

namespace {

void check_probability(double p) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ",
                   p);
}

// Uniform noise of one value per sample and channel ([N, C, 1, ...]); its
// shape follows x's symbolic sizes, so a compiled call draws fresh noise of
// the call's batch size.
Tensor channel_noise(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2,
             "feature_dropout: Feature dropout requires at least 2 dimensions in the "
             "input, got shape ",
             x.shape());
  DimList shape = sym_shape(x);
  for (size_t i = 2; i < shape.size(); ++i)
    shape[i] = int64_t(1);
  return rand(shape, x.dtype());
}

// PyTorch's _dropout_impl (Dropout.cpp): a Bernoulli(1 - p) mask, then the
// kept values scaled by 1 / (1 - p), or, for alpha dropout, scaled by a and
// shifted by b so the output keeps zero mean and unit variance.
Tensor dropout_impl(const Tensor& x, double p, bool train, bool per_channel, bool alpha) {
  check_probability(p);
  if (p == 0.0 || !train || x.numel() == 0) return x;
  if (p == 1.0) return x * 0.0;
  Tensor noise = per_channel ? channel_noise(x) : rand_like(x);
  Tensor keep = to(lt(noise, 1.0 - p), x.dtype());
  if (!alpha) return x * (keep / (1.0 - p));
  // SELU's negative saturation value, -scale * alpha.
  constexpr double kSaturation = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kSaturation * kSaturation * p + 1.0) * (1.0 - p));
  Tensor b = (keep - 1.0) * (kSaturation * a) + kSaturation * a * p;
  return x * (keep * a) + b;
}

}  // namespace

Tensor feature_dropout(const Tensor& x, double p, bool train) {
  return dropout_impl(x, p, train, true, false);
}

Tensor dropout1d(const Tensor& x, double p, bool train) {
  check_probability(p);
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, "dropout1d: Expected 2D or 3D input, but received a ",
             x.dim(),
             "D input. Note that dropout1d exists to provide channel-wise dropout on inputs with "
             "1 spatial dimension, a channel dimension, and an optional batch dimension (i.e. 2D "
             "or 3D inputs).");
  if (x.dim() == 3) return dropout_impl(x, p, train, true, false);
  return squeeze(dropout_impl(unsqueeze(x, 0), p, train, true, false), 0);
}

// As PyTorch: anything but a 5-d input is taken as one unbatched sample.
Tensor dropout3d(const Tensor& x, double p, bool train) {
  check_probability(p);
  if (x.dim() == 5) return dropout_impl(x, p, train, true, false);
  return squeeze(dropout_impl(unsqueeze(x, 0), p, train, true, false), 0);
}

Tensor alpha_dropout(const Tensor& x, double p, bool train) {
  return dropout_impl(x, p, train, false, true);
}

Tensor feature_alpha_dropout(const Tensor& x, double p, bool train) {
  return dropout_impl(x, p, train, true, true);
}

// ---- normalization ----------------------------------------------------------

// PyTorch: aten/src/ATen/native/layer_norm.cpp (rms_norm_symint).
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  const int64_t n = int64_t(normalized_shape.size());
  KILN_CHECK(n >= 1,
             "rms_norm: Expected normalized_shape to be at least 1-dimensional, i.e., containing "
             "at least one element, but got normalized_shape = ",
             normalized_shape);
  KILN_CHECK(!weight.defined() || weight.shape() == normalized_shape,
             "rms_norm: Expected weight to be of same shape as normalized_shape, but got weight "
             "of shape ",
             weight.defined() ? weight.shape() : IntList{},
             " and normalized_shape = ", normalized_shape);
  const IntList& shape = x.shape();
  bool trailing_match = x.dim() >= n;
  for (int64_t i = 0; trailing_match && i < n; ++i) {
    trailing_match = shape[size_t(x.dim() - n + i)] == normalized_shape[size_t(i)];
  }
  KILN_CHECK(trailing_match, "rms_norm: Given normalized_shape=", normalized_shape,
             ", expected input with shape [*, ", normalized_shape, "], but got input of size",
             shape);
  IntList dims;
  for (int64_t i = 0; i < n; ++i)
    dims.push_back(x.dim() - 1 - i);
  const double epsilon =
      eps ? *eps : (x.dtype() == DType::Float64 ? DBL_EPSILON : double(FLT_EPSILON));
  Tensor y = x * rsqrt(mean(x * x, dims, true) + epsilon);
  return weight.defined() ? y * weight : y;
}

// PyTorch's F.local_response_norm: the average of x^2 over a window of
// `size` channels (zero-padded), as an average pool over [N, 1, C, rest].
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  KILN_CHECK_VALUE(x.dim() >= 3,
                   "local_response_norm: Expected 3D or higher dimensionality input "
                   "(got ",
                   x.dim(), " dimensions)");
  KILN_CHECK(size > 0, "local_response_norm: size must be positive, got ", size);
  if (x.numel() == 0) return x;
  Tensor squares = unsqueeze(flatten(x * x, 2), 1);
  Tensor padded = pad(squares, {0, 0, size / 2, (size - 1) / 2});
  Tensor average = avg_pool2d(padded, {size, 1}, {1, 1});
  Tensor div = pow(reshape(average, sym_shape(x)) * alpha + k, beta);
  return x / div;
}

// ---- shape ------------------------------------------------------------------

Tensor unflatten(const Tensor& x, int64_t dim, IntList sizes) {
  const int64_t d = wrap_dim(dim, x.dim(), "unflatten", x.shape());
  KILN_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  int64_t known = 1, inferred_at = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      KILN_CHECK(inferred_at < 0, "unflatten: only one dimension can be inferred");
      inferred_at = int64_t(i);
    } else {
      known *= sizes[i];
    }
  }
  const int64_t length = x.size(d);
  if (inferred_at >= 0 && known != 0 && length % known == 0) {
    sizes[size_t(inferred_at)] = length / known;
    known = length;
  }
  KILN_CHECK(known == length, "unflatten: Provided sizes ", sizes,
             " don't multiply up to the size of dim ", d, " (", length, ") in the input tensor");
  DimList shape = sym_shape(x);
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, sizes.begin(), sizes.end());
  return reshape(x, shape);
}

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  KILN_CHECK(x.dim() >= 3,
             "channel_shuffle expects input to have at least 3 dimensions, but got input with "
             "sizes ",
             x.shape());
  KILN_CHECK(groups > 0,
             "channel_shuffle: Number of groups to divide channels in must be positive. "
             "Value of groups:",
             groups);
  const int64_t channels = x.size(1);
  KILN_CHECK(channels % groups == 0,
             "channel_shuffle: Number of channels must be divisible by "
             "groups. Got ",
             channels, " channels and ", groups, " groups.");
  DimList shape = sym_shape(x);
  DimList grouped = shape;
  grouped[1] = channels / groups;
  grouped.insert(grouped.begin() + 1, Dim(groups));
  return reshape(transpose(reshape(x, grouped), 1, 2), shape);
}

}  // namespace kiln::nn::functional
