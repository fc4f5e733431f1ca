#include "kiln/nn/activation.h"

#include "kiln/ops/elementwise.h"

namespace kiln::nn::functional {

Tensor silu(const Tensor& x) {
  return mul(x, sigmoid(x));
}

Tensor mish(const Tensor& x) {
  return mul(x, tanh(softplus(x)));
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  KILN_CHECK_VALUE(min_val <= max_val, "hardtanh: min_val (", min_val,
                   ") cannot be greater than max_val (", max_val, ")");
  return clamp(x, min_val, max_val);
}

Tensor relu6(const Tensor& x) {
  return hardtanh(x, 0.0, 6.0);
}

// Both in PyTorch's order of operations (its CPU kernels'), which other
// orders ((x / 6 + 0.5), x * hardsigmoid(x)) do not round like.
Tensor hardsigmoid(const Tensor& x) {
  return div(clamp(add(x, 3.0), 0.0, 6.0), 6.0);
}

Tensor hardswish(const Tensor& x) {
  return div(mul(x, clamp(add(x, 3.0), 0.0, 6.0)), 6.0);
}

}  // namespace kiln::nn::functional
