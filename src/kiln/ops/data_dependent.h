// Ops whose output shape depends on the input's values, not only on its
// shape: nonzero, argwhere, unique, bincount, and repeat_interleave with a
// tensor of counts.
//
// Note [Data-dependent output shapes]: kiln's op table infers every output
// shape from input metadata (OpDef::infer), and a compiled plan allocates
// every buffer from those shapes before anything runs (symbolic dims are
// sizes known from the call's input shapes). Neither can express "as many
// rows as there are nonzero elements". So these are C++ API functions over
// concrete data, for eager code, and not ops of the table. Each refuses to
// run while a trace records (kiln.jit.trace, hybridize, kiln.compile), with
// an error naming the function, rather than freeze one call's result into
// the graph; torch.export refuses such ops the same way. Their integer outputs carry no gradient;
// repeat_interleave's values come from index_select, so its gradient is index_select's.
#pragma once

#include <optional>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// The indices of x's nonzero elements (NaN counts), one row of x.dim()
// coordinates each, in row-major order: int64 of shape [n, x.dim()].
Tensor nonzero(const Tensor& x);
// as_tuple=True: one 1-D int64 tensor of indices per dim (a 0-d x counts
// as 1-D).
std::vector<Tensor> nonzero_tuple(const Tensor& x);
Tensor argwhere(const Tensor& x);  // nonzero under NumPy's name

// The distinct values of x (dim unset: flattened) or its distinct slices
// along dim, in ascending order (NaNs last, each its own value; sorted=false
// gives the same order, which PyTorch's CPU kernel also does). inverse: the
// position in `values` of each element (shape of x) or slice ([x.size(dim)]);
// counts: how often each value occurs. Both int64, undefined unless asked.
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                    bool return_counts = false, std::optional<int64_t> dim = std::nullopt);

// How often each value 0..max(x) occurs in the 1-D non-negative integer
// tensor x (at least minlength bins): int64, or with `weights` (x's length)
// their sums: float32 weights give float32, others float64, as PyTorch.
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0);

// The indices 0, 1, ... each repeated repeats[i] times (torch.repeat_interleave(repeats)).
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = std::nullopt);
// Each element (dim unset: of the flattened x) or slice along dim repeated
// repeats[i] times; a one-element repeats applies to all. output_size, when
// given, must be the result's size along dim.
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);

}  // namespace kiln
