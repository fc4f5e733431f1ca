// The rest of torch.nn.functional's layer math that ported PyTorch programs
// reach for: the activations (prelu, selu, celu, glu, logsigmoid, ...), the
// 1-d and adaptive-max pools, LP pooling, fold / unfold, channel dropout and
// alpha dropout, rms_norm and local_response_norm, unflatten and
// channel_shuffle, and embedding_bag. Each is composed from kiln ops, so it
// differentiates, traces and exports through them; PyTorch's definition is
// the reference, its checks and exception types included.
//
//   namespace F = kiln::nn::functional;
//   auto [y, where] = F::adaptive_max_pool2d_with_indices(x, {7, 7});
#pragma once

#include <optional>
#include <string>
#include <tuple>

#include "kiln/core/tensor.h"

namespace kiln::nn::functional {

// ---- activations ----
// x > 0 ? x : weight * x, weight [C] on dim 1 (or one value for all).
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor selu(const Tensor& x);                      // scale * elu(x, alpha), PyTorch's constants
Tensor celu(const Tensor& x, double alpha = 1.0);  // x > 0 ? x : alpha (exp(x / alpha) - 1)
Tensor glu(const Tensor& x, int64_t dim = -1);     // a * sigmoid(b), x split in half along dim
Tensor logsigmoid(const Tensor& x);                // min(x, 0) - log1p(exp(-|x|))
Tensor softsign(const Tensor& x);                  // x / (1 + |x|)
Tensor tanhshrink(const Tensor& x);                // x - tanh(x)
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor threshold(const Tensor& x, double threshold, double value);  // x <= threshold ? value : x
Tensor softmin(const Tensor& x, int64_t dim);                       // softmax(-x, dim)
Tensor softmax2d(const Tensor& x);  // softmax over the channels of [C, H, W] / [N, C, H, W]

// ---- pooling ----
// Over [N, C, L] or [C, L]: the 2-d ops over a height of 1, which is exact.
// An empty stride means "= kernel_size".
Tensor max_pool1d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  IntList dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool1d(const Tensor& x, IntList output_size);
// The maximum of each adaptive window (PyTorch's start = floor(i L / out),
// end = ceil((i + 1) L / out)) and its index into the input's spatial plane
// (h * W + w for 2-d), as max_unpool takes it. Over [N, C, L] / [C, L] and
// [N, C, H, W] / [C, H, W].
std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, IntList output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, IntList output_size);
// (sum over each window of x^p)^(1/p), as PyTorch computes it: an average
// pool of x^p times the window size.
Tensor lp_pool1d(const Tensor& x, double norm_type, IntList kernel_size, IntList stride = {},
                 bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, IntList kernel_size, IntList stride = {},
                 bool ceil_mode = false);
// im2col: [N, C, H, W] -> [N, C kh kw, L] (the sliding blocks), and col2im,
// its adjoint: overlapping values add up. Gathers and scatter-adds of the
// zero-padded input, so values move exactly.
Tensor unfold(const Tensor& x, IntList kernel_size, IntList dilation = {1}, IntList padding = {0},
              IntList stride = {1});
Tensor fold(const Tensor& x, IntList output_size, IntList kernel_size, IntList dilation = {1},
            IntList padding = {0}, IntList stride = {1});
// The sampling grid of an affine map, for grid_sample: theta [N, 2, 3] and
// size [N, C, H, W] give [N, H, W, 2]; theta [N, 3, 4] and size
// [N, C, D, H, W] give [N, D, H, W, 3] (geometry.h's base grid times
// theta^T, so theta gets a gradient).
Tensor affine_grid(const Tensor& theta, IntList size, bool align_corners = false);

// ---- dropout ----
// Zeroes whole channels (dim 1 of [N, C, *]) with probability p and scales
// the kept ones by 1 / (1 - p); the identity when !train. Masks are drawn by
// a random op, so each call (compiled ones too) draws new ones.
Tensor feature_dropout(const Tensor& x, double p = 0.5, bool train = true);
Tensor dropout1d(const Tensor& x, double p = 0.5, bool train = true);  // [N, C, L] or [C, L]
Tensor dropout3d(const Tensor& x, double p = 0.5, bool train = true);  // 5-d, or 4-d unbatched
// Dropout that keeps SELU's self-normalization: dropped values become
// SELU's negative saturation, then all are scaled and shifted back to
// zero mean and unit variance (elementwise, or per channel for the feature form).
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool train = false);
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool train = false);

// ---- normalization ----
// x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight;
// eps defaults to the machine epsilon of x's dtype.
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// x / (k + alpha / size * sum of x^2 over `size` neighbouring channels)^beta.
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);

// ---- shape ----
// Splits dim into `sizes` (one of them may be -1).
Tensor unflatten(const Tensor& x, int64_t dim, IntList sizes);
// [N, g * c, *] -> [N, c * g, *]: the channels of each group interleaved.
Tensor channel_shuffle(const Tensor& x, int64_t groups);

// ---- embedding ----
struct EmbeddingBagOptions {
  Tensor offsets = {};             // 1-d input: where each bag starts
  std::string mode = "mean";       // "sum", "mean" or "max"
  Tensor per_sample_weights = {};  // input's shape; "sum" only
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx = std::nullopt;  // entries left out of every bag
};
// Sums, means or maxima of bags of weight's rows: input [B, L] (B bags of L
// indices) or 1-d with offsets. An empty bag gives zeros.
Tensor embedding_bag(const Tensor& input, const Tensor& weight,
                     const EmbeddingBagOptions& options = {});
// Rescales, in place and without recording a gradient, each row of weight
// that indices name whose norm_type-norm exceeds max_norm down to max_norm
// (PyTorch's embedding_renorm_, which Embedding(max_norm=...) runs first).
void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                       double norm_type = 2.0);

}  // namespace kiln::nn::functional
