#include "kiln/kernels/cpu/concat.h"

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/sub_view.h"
#include "kiln/util/error.h"

namespace kiln::cpu {

void concat(const StridedView& out, std::span<const StridedView> inputs, int dim) {
  KILN_ASSERT(dim >= 0 && dim < out.ndim, "concat: dim ", dim, " for an output of ", out.ndim,
              " dims");
  if (out.numel() == 0) return;
  int64_t start = 0;
  for (const StridedView& in : inputs) {
    if (in.numel() == 0) continue;
    KILN_ASSERT(in.dtype == out.dtype && in.ndim == out.ndim, "concat: input does not match out");
    copy_convert(narrow_view(out, dim, start, in.shape[dim]), in);
    start += in.shape[dim];
  }
}

void stack(const StridedView& out, std::span<const StridedView> inputs, int dim) {
  KILN_ASSERT(dim >= 0 && dim < out.ndim && out.shape[dim] == int64_t(inputs.size()),
              "stack: output does not fit the inputs");
  if (out.numel() == 0) return;
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_ASSERT(inputs[k].dtype == out.dtype, "stack: input dtype does not match out");
    copy_convert(select_view(out, dim, int64_t(k)), inputs[k]);
  }
}

}  // namespace kiln::cpu
