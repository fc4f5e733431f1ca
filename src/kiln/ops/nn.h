// Neural-network ops with their own kernels: dropout, batch_norm, layer_norm.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

// Zeroes each element with probability p and scales the rest by 1/(1-p);
// the identity when !train.
Tensor dropout(const Tensor& x, double p = 0.5, bool train = true);

// x is [N, C, ...]. In training the batch statistics are used and the running
// statistics (when given) are updated in place; in eval the running ones are used.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum = 0.1, double eps = 1e-5);

// Normalizes over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace kiln
