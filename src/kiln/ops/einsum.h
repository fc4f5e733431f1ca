// einsum: PyTorch's Einstein summation, composed of kiln ops (permute,
// reshape, slice, expand, sum, mul, matmul), so its gradients, tracing and
// compiling come from theirs.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// "ij,jk->ik" and its kin, as torch.einsum: one term of subscripts
// ([a-zA-Z], spaces ignored) per operand, at most one "..." per term for
// the dims the letters do not name (broadcast, right-aligned, across
// operands), an optional "->output"; without it the output is "..." and
// then the letters that appear once, in ASCII order. A letter repeated in
// one term takes the diagonal; a letter absent from the output is summed
// over; sizes of 1 broadcast. Operands are contracted left to right, each
// contraction one batched matmul (or a broadcast mul when nothing is summed).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln
