// Convolution and pooling over (N, C, H, W) inputs; a 3-D (C, H, W) input is
// one unbatched sample, as in PyTorch. One-element lists mean "same for both
// spatial dims"; an empty pooling stride means "= kernel_size".
#pragma once

#include <utility>

#include "kiln/core/tensor.h"

namespace kiln {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntList stride = {1, 1},
              IntList padding = {0, 0}, IntList dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0}, IntList dilation = {1, 1}, bool ceil_mode = false);
// max_pool2d's values and each one's index ih * W + iw within its plane.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size,
                                                  IntList stride = {}, IntList padding = {0, 0},
                                                  IntList dilation = {1, 1},
                                                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size);

// The transposed convolution (the gradient of conv2d with respect to its
// input, as an op of its own). w is [C, OC / groups, kH, kW]; the output's
// size is (H - 1) * stride - 2 * padding + dilation * (kH - 1) +
// output_padding + 1, and output_padding must be smaller than the stride or
// the dilation. PyTorch's argument order (output_padding and groups before
// dilation).
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b = {},
                        IntList stride = {1, 1}, IntList padding = {0, 0},
                        IntList output_padding = {0, 0}, int64_t groups = 1,
                        IntList dilation = {1, 1});

// The 3-D forms over (N, C, D, H, W) inputs (a 4-D input is one sample),
// with PyTorch's rules and argument orders; one-element lists mean "same for
// all three spatial dims".
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntList stride = {1, 1, 1},
              IntList padding = {0, 0, 0}, IntList dilation = {1, 1, 1}, int64_t groups = 1);
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b = {},
                        IntList stride = {1, 1, 1}, IntList padding = {0, 0, 0},
                        IntList output_padding = {0, 0, 0}, int64_t groups = 1,
                        IntList dilation = {1, 1, 1});
Tensor max_pool3d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0, 0}, IntList dilation = {1, 1, 1},
                  bool ceil_mode = false);
Tensor avg_pool3d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor conv3d_backward_input(const Tensor& grad_out, const Tensor& w, IntList input_size,
                             IntList stride = {1, 1, 1}, IntList padding = {0, 0, 0},
                             IntList dilation = {1, 1, 1}, int64_t groups = 1);
Tensor conv3d_backward_weight(const Tensor& grad_out, const Tensor& x, IntList weight_size,
                              IntList stride = {1, 1, 1}, IntList padding = {0, 0, 0},
                              IntList dilation = {1, 1, 1}, int64_t groups = 1);

// Backward ops (what conv2d's and the pools' gradient rules call): the
// gradient with respect to the input of the given size, or to the weight,
// from grad_out, with the forward's attributes.
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, IntList input_size,
                             IntList stride = {1, 1}, IntList padding = {0, 0},
                             IntList dilation = {1, 1}, int64_t groups = 1);
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, IntList weight_size,
                              IntList stride = {1, 1}, IntList padding = {0, 0},
                              IntList dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& x, IntList kernel_size,
                           IntList stride = {}, IntList padding = {0, 0}, IntList dilation = {1, 1},
                           bool ceil_mode = false);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& x, IntList kernel_size,
                           IntList stride = {}, IntList padding = {0, 0}, bool ceil_mode = false,
                           bool count_include_pad = true);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& x);

}  // namespace kiln
