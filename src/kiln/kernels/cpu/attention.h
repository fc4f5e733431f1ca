// Fused scaled dot-product attention: out = softmax(q kᵀ · scale + mask) v
// over the last two dims of q [..., L, E], k [..., S, E], v [..., S, Ev],
// without the [L, S] score matrix: queries go in tiles of up to 6 rows,
// keys in blocks of up to 256, and each tile keeps a running max and sum
// per row (the online softmax of FlashAttention), so at most one 6 x 256
// block of scores exists at a time.
//
// mask (optional) is already broadcast to [..., L, S] (stride 0 along
// broadcast dims): bool (true: the key may be seen) or of q's dtype (added
// to the scores). causal: query i sees keys 0..i (torch's tril(ones(L,
// S))), on top of the mask. A query that sees no key gets zeros, as
// torch's scaled_dot_product_attention gives.
//
// float32 with the last dims of q, k, v and out contiguous runs the AVX2
// kernel (Kᵀ packed per batch into 16-key panels, a 6 x 16 FMA tile for
// the scores and another for the weighted sum of v). Anything else
// (float64, other strides) runs the scalar reference, the same algorithm
// in the same order of blocks.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

void scaled_dot_product_attention(const StridedView& out, const StridedView& q,
                                  const StridedView& k, const StridedView& v,
                                  const StridedView& mask, double scale, bool causal);

}  // namespace kiln::cpu
