// torch.nn.utils' clip_grad.py and convert_parameters.py over kiln ops, with
// the same arithmetic in the same order (per-tensor norms, then the norm of
// those; the scale clamped at 1 rather than branched on), so the results
// agree with PyTorch's to rounding and nothing needs a host read.
#include "kiln/nn/grad_utils.h"

#include <charconv>
#include <cmath>
#include <string>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::utils {

namespace {

// A double as Python's str(float) writes it ("2.0", "inf", "0.5"), for
// messages that quote PyTorch's.
std::string python_float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e16)
    return std::to_string(int64_t(value)) + ".0";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

// The gradients of `parameters` that exist, in order.
std::vector<Tensor> gradients_of(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    Tensor g = grad(p);
    if (g.defined()) grads.push_back(g);
  }
  return grads;
}

}  // namespace

Tensor vector_norm(const Tensor& x, double ord) {
  KILN_CHECK(is_floating(x.dtype()), "linalg.vector_norm: Expected a floating point tensor as ",
             "input. Got ", to_string(x.dtype()));
  const Tensor magnitude = abs(x);
  if (std::isinf(ord)) {
    KILN_CHECK(x.numel() > 0, "linalg.vector_norm cannot compute the ", python_float_text(ord),
               " norm on an empty tensor because the operation does not have an identity");
    return ord > 0 ? amax(magnitude) : amin(magnitude);
  }
  if (ord == 0) return to(sum(ne(x, 0.0)), x.dtype());
  if (ord == 1) return sum(magnitude);
  if (ord == 2) return sqrt(sum(x * x));
  return pow(sum(pow(magnitude, ord)), 1.0 / ord);
}

Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type,
                      bool error_if_nonfinite) {
  NoGradGuard no_grad;
  if (tensors.empty()) return scalar_tensor(0.0, DType::Float32);
  // The norms are stacked in the widest of their dtypes, as torch.stack
  // promotes.
  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors)
    dtype = promote_types(dtype, t.dtype());
  std::vector<Tensor> norms;
  norms.reserve(tensors.size());
  for (const Tensor& t : tensors)
    norms.push_back(to(vector_norm(t, norm_type), dtype));
  Tensor total = vector_norm(stack(norms), norm_type);
  if (!error_if_nonfinite) return total;
  KILN_CHECK(isfinite(total).item<bool>(), "The total norm of order ", python_float_text(norm_type),
             " for gradients from `parameters` is non-finite, so it cannot be clipped. To "
             "disable this error and scale the gradients by the non-finite norm anyway, set "
             "`error_if_nonfinite=False`");
  return total;
}

void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm,
                           const Tensor& total_norm) {
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = gradients_of(parameters);
  if (grads.empty()) return;
  // Multiplying by a scale clamped at 1 (instead of testing it) keeps the
  // norm on the device and the step traceable.
  const Tensor scale = clamp(max_norm / (total_norm + 1e-6), std::nullopt, 1.0);
  for (const Tensor& g : grads)
    mul_(g, to(scale, g.dtype()));
}

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  Tensor total = get_total_norm(gradients_of(parameters), norm_type, error_if_nonfinite);
  clip_grads_with_norm_(parameters, max_norm, total);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& g : gradients_of(parameters))
    clamp_(g, -clip_value, clip_value);
}

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> flat;
  flat.reserve(parameters.size());
  for (const Tensor& p : parameters)
    flat.push_back(reshape(p, IntList{-1}));
  KILN_CHECK(!flat.empty(), "parameters_to_vector: expected at least one parameter");
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  KILN_CHECK(vec.defined() && vec.dim() == 1, "vector_to_parameters: expected a 1-D vector, got ",
             vec.defined() ? vec.dim() : 0, "-D");
  int64_t total = 0;
  for (const Tensor& p : parameters)
    total += p.numel();
  KILN_CHECK(vec.numel() == total, "vector_to_parameters: the vector has ", vec.numel(),
             " elements but the parameters hold ", total);
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (const Tensor& p : parameters) {
    copy_(p, reshape(narrow(vec, 0, offset, p.numel()), p.shape()));
    offset += p.numel();
  }
}

}  // namespace kiln::nn::utils
