// The margin, ranking and likelihood losses of torch.nn.functional beyond
// functional.h's: multilabel soft margin, margin ranking, triplet margin,
// Gaussian and Poisson NLL, soft margin, hinge embedding and multi margin,
// with pairwise_distance, which the triplet loss measures with. Composed
// from ops like the losses of loss_pointwise.cpp; `reduction` is "mean",
// "sum" or "none" (a ValueError otherwise), as in PyTorch.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln::nn::functional {

// |x1 - x2 + eps|_p over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);

// -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), times weight [C], averaged
// over the classes (the last dim) of input [N, C] or [C].
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const Tensor& weight = {},
                                   const std::string& reduction = "mean");
// max(0, -y (x1 - x2) + margin), y of +-1.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0.0, const std::string& reduction = "mean");
// max(d(a, p) - d(a, n) + margin, 0) with d = pairwise_distance; with swap,
// d(a, n) is min(d(a, n), d(p, n)).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2.0, double eps = 1e-6,
                           bool swap = false, const std::string& reduction = "mean");
// 0.5 (log v + (x - y)^2 / v) (+ 0.5 log 2 pi with full), v = max(var, eps)
// (the clamp passes gradients straight through, as PyTorch's in-place clamp
// under no_grad does). var has input's shape, or one dim of size 1, or lacks
// the last dim.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         bool full = false, double eps = 1e-6,
                         const std::string& reduction = "mean");
// One variance for every element (a ValueError when negative).
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, double var, bool full = false,
                         double eps = 1e-6, const std::string& reduction = "mean");
// exp(x) - y x (log_input), else x - y log(x + eps); with full, Stirling's
// term for the targets above 1.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true,
                        bool full = false, double eps = 1e-8,
                        const std::string& reduction = "mean");
// log(1 + exp(-y x)).
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        const std::string& reduction = "mean");
// x where y = 1, max(0, margin - x) where y = -1.
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            const std::string& reduction = "mean");
// The mean over classes c != y of max(0, margin - x[y] + x[c])^p (p 1 or
// 2), times weight[y]; input [N, C] or [C], target int64 [N] (or one index).
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1,
                         double margin = 1.0, const Tensor& weight = {},
                         const std::string& reduction = "mean");

}  // namespace kiln::nn::functional
