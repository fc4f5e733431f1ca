// Parameter initialization with PyTorch's formulas (torch.nn.init). Each
// function fills `t` in place without recording autograd history and returns
// it; random ones draw from `gen`, or from kiln's default generator (seeded
// by kiln::manual_seed) when none is given.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "kiln/core/random.h"
#include "kiln/core/tensor.h"

namespace kiln::nn::init {

const Tensor& uniform_(const Tensor& t, double low = 0.0, double high = 1.0,
                       Generator* gen = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0.0, double std = 1.0,
                      Generator* gen = nullptr);
const Tensor& constant_(const Tensor& t, double value);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);

// (fan_in, fan_out) of a weight of at least 2 dims: dim 1 and dim 0 times the
// receptive field (the product of the dims past the first two).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

// The recommended gain for a nonlinearity: "linear", "conv1d/2d/3d",
// "conv_transpose1d/2d/3d", "sigmoid" -> 1; "tanh" -> 5/3; "relu" -> sqrt(2);
// "leaky_relu" -> sqrt(2 / (1 + slope^2)) with slope = param or 0.01;
// "selu" -> 3/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = {});

// He init: std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a),
// fan by `mode` ("fan_in" or "fan_out"); uniform bound = sqrt(3) * std.
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                               const std::string& nonlinearity = "leaky_relu",
                               Generator* gen = nullptr);
const Tensor& kaiming_normal_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                              const std::string& nonlinearity = "leaky_relu",
                              Generator* gen = nullptr);
// Glorot init: std = gain * sqrt(2 / (fan_in + fan_out)); bound = sqrt(3) * std.
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
const Tensor& xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);

// Normal(mean, std) truncated to [a, b] (absolute bounds, as PyTorch): each
// value is drawn by inverting the normal CDF over [cdf(a), cdf(b)].
const Tensor& trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                            double b = 2.0, Generator* gen = nullptr);
// A (semi-)orthogonal matrix from the QR decomposition of a normal draw,
// scaled by gain; t of at least 2 dims is seen as size(0) x rest.
const Tensor& orthogonal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// The identity in a 2-D tensor (ones on the diagonal of a non-square one).
const Tensor& eye_(const Tensor& t);
// A 3-, 4- or 5-D convolution weight that passes its input channels through
// (per group): the Dirac delta at the kernel's centre.
const Tensor& dirac_(const Tensor& t, int64_t groups = 1);

}  // namespace kiln::nn::init
