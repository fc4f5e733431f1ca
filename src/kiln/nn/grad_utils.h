// What training code does to parameters and their gradients between
// backward() and the optimizer step, as torch.nn.utils: clip the gradients
// by their total norm or by value, and flatten parameters into one vector
// and back. Each reads grad(p) (kiln/autograd) and skips a parameter with
// none; none records autograd history.
//
// Clipping by norm reads nothing on the host: the scale is a 0-d tensor
// (min(max_norm / (norm + 1e-6), 1)) that every gradient is multiplied by,
// so it traces into a compiled training step like any op. Only
// error_if_nonfinite reads the norm back, to raise.
//
//   loss.backward();
//   Tensor norm = kiln::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   optimizer.step();
#pragma once

#include <limits>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::nn::utils {

// The p-norm of x's elements taken as one vector (torch.linalg.vector_norm):
// ord inf is max |x|, -inf min |x|, 0 the count of nonzeros, else
// (sum |x|^ord)^(1/ord). A 0-d tensor of x's dtype.
Tensor vector_norm(const Tensor& x, double ord = 2.0);

// The norm of the tensors' norms: the norm of all their elements as one
// vector, for ord 0, ±inf and p alike (torch.nn.utils.get_total_norm). A
// 0-d float32 zero when `tensors` is empty. error_if_nonfinite: a
// RuntimeError when the norm is nan or ±inf (a host read).
Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type = 2.0,
                      bool error_if_nonfinite = false);

// Multiplies every gradient of `parameters` in place by
// min(max_norm / (total_norm + 1e-6), 1).
void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm,
                           const Tensor& total_norm);

// get_total_norm of the gradients, then clip_grads_with_norm_; returns the
// norm before clipping.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);

// Clamps every gradient in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

// The parameters flattened and concatenated, in order: one 1-D tensor.
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
// Copies consecutive slices of vec (1-D, as long as all the parameters
// together) into the parameters, without recording history.
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace kiln::nn::utils
