// scatter_reduce with amax / amin: src's elements combined into a copy of
// self at the positions an index tensor names along one dim, keeping the
// largest (smallest) of what is there and what arrives (torch.scatter_reduce;
// ONNX's ScatterElements and ScatterND with reduction max / min). Indices
// are checked as they are read (kiln::Error, IndexError); one thread, in
// row-major order of index.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class ScatterExtreme { Max, Min };

// out = self, then for dim 0: out[index[i][j]][j] = extreme(out[...], src[i][j])
// over every position of index; without include_self a position that
// receives anything starts from what arrives, not from self. out is
// contiguous; src has out's dtype.
void scatter_extreme(const StridedView& out, const StridedView& self, const StridedView& index,
                     const StridedView& src, int dim, ScatterExtreme extreme, bool include_self);

}  // namespace kiln::cpu
