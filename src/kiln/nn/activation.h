// Activations PyTorch's nn has that are compositions of kiln ops (so they
// get gradients, tracing and ONNX export from those ops): one definition,
// bound for Python (kiln._C.nn) and called by the C++ and Python modules.
//
//   namespace F = kiln::nn::functional;
//   Tensor y = F::hardswish(F::silu(x));
#pragma once

#include "kiln/core/tensor.h"

namespace kiln::nn::functional {

Tensor silu(const Tensor& x);  // x * sigmoid(x)
Tensor mish(const Tensor& x);  // x * tanh(softplus(x))
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);        // clamp(x, 0, 6)
Tensor hardsigmoid(const Tensor& x);  // clamp(x + 3, 0, 6) / 6
Tensor hardswish(const Tensor& x);    // x * clamp(x + 3, 0, 6) / 6

}  // namespace kiln::nn::functional
