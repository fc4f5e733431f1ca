// torch.nn.functional for kiln: the layer forwards as free functions (the ops
// themselves, brought in by name) and the losses. Losses are composed from
// existing ops (log_softmax, gather, where, softplus, sum, mean), so they get
// gradients and tracing from those ops with no kernels or rules of their own.
//
//   namespace F = kiln::nn::functional;
//   auto loss = F::cross_entropy(logits, labels, {.label_smoothing = 0.1});
#pragma once

#include <string>

#include "kiln/core/tensor.h"
#include "kiln/nn/activation.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

// ---- layer forwards: the ops, under their torch.nn.functional names ----
using kiln::adaptive_avg_pool2d;
using kiln::avg_pool2d;
using kiln::batch_norm;
using kiln::conv2d;
using kiln::dropout;
using kiln::elu;
using kiln::embedding;
using kiln::gelu;
using kiln::layer_norm;
using kiln::leaky_relu;
using kiln::linear;
using kiln::log_softmax;
using kiln::max_pool2d;
using kiln::one_hot;
using kiln::relu;
using kiln::sigmoid;
using kiln::softmax;
using kiln::softplus;
using kiln::tanh;

// ---- losses ----
// `reduction` is "mean", "sum" or "none", as in PyTorch.

struct NLLLossOptions {
  Tensor weight = {};  // [C] rescaling weight per class; undefined = all ones
  int64_t ignore_index = -100;
  std::string reduction = "mean";
};
// input holds log-probabilities [N, C] or [N, C, d1, ...] (or [C] for one
// sample); target holds int64 class indices [N] or [N, d1, ...]. "mean"
// divides by the summed weights of the non-ignored targets.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

struct CrossEntropyLossOptions {
  Tensor weight = {};           // [C]; undefined = all ones
  int64_t ignore_index = -100;  // class-index targets only
  std::string reduction = "mean";
  double label_smoothing = 0.0;  // in [0, 1]
};
// input holds unnormalized logits [N, C] or [N, C, d1, ...] (or [C]). target
// is either int64 class indices (shape of input without dim 1) or floating
// class probabilities (input's shape).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyLossOptions& options = {});

// Elementwise losses over broadcast input and target.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

struct BCEWithLogitsLossOptions {
  Tensor weight = {};      // broadcast to the loss; undefined = all ones
  Tensor pos_weight = {};  // weight of the positive term, broadcast along the last dim
  std::string reduction = "mean";
};
// Sigmoid + binary cross entropy in one numerically stable expression:
// loss = (1 - t) * x - log_weight * log_sigmoid(x), with
// log_weight = 1 + (pos_weight - 1) * t.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& options = {});

// PyTorch's binary_cross_entropy: input holds probabilities; each log is
// clamped to >= -100, so a probability of exactly 0 or 1 gives a finite loss.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); times weight
// (broadcast) when given.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0, const Tensor& weight = {});
// input holds log-probabilities; target probabilities (log-probabilities with
// log_target). reduction also takes "batchmean": the sum over dim 0's size.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
// 1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1; x1, x2 of
// [N, D] (or [D]) and y of [N] (or []).
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0.0, const std::string& reduction = "mean");

// x1 . x2 / (max(|x1|, eps) max(|x2|, eps)) along dim (inputs broadcast).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// x / max(|x|_p, eps) along dim.
Tensor normalize(const Tensor& input, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

}  // namespace kiln::nn::functional
