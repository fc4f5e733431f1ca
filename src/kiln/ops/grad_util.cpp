#include "kiln/ops/grad_util.h"

#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln {

Tensor sum_to(const Tensor& grad, const IntList& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - int64_t(shape.size());
  KILN_ASSERT(lead >= 0, "sum_to: gradient of shape ", grad.shape(), " has fewer dims than ",
              shape);
  IntList dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[size_t(d - lead)] == 1 && grad.shape()[size_t(d)] != 1)) {
      dims.push_back(d);
    }
  }
  Tensor summed = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reshape(summed, shape);
}

}  // namespace kiln
