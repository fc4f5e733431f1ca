// scatter: writes src's elements into a copy of self at the positions an
// index tensor names along one dim (torch.scatter), replacing what is there
// or combining with it. Indices are checked as they are read, so a bad one
// throws kiln::Error (IndexError) naming its value; the loop runs on one
// thread, in row-major order of index, so a position named twice keeps the
// last write (PyTorch's CPU order) and a throw is safe.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class ScatterReduce { None, Add, Multiply };

// out = self, then for dim 0: out[index[i][j]][j] (op)= src[i][j] over every
// position of index. src has out's dtype; a 0-d src is one value for all.
void scatter(const StridedView& out, const StridedView& self, const StridedView& index,
             const StridedView& src, int dim, ScatterReduce reduce);

}  // namespace kiln::cpu
