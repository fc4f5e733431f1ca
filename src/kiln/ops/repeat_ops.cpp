// repeat, tile and repeat_interleave (integer count) as view + expand +
// reshape: see repeat.h.
#include "kiln/core/shape.h"
#include "kiln/core/sym_shape.h"
#include "kiln/core/trace_hook.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/repeat.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// The reshape and expand calls take Dims only while a trace records (where
// sizes may be symbolic) and plain integers otherwise.
Tensor reshape_to(const Tensor& x, const DimList& shape) {
  if (is_static(shape)) return reshape(x, to_static(shape));
  return reshape(x, std::span<const Dim>(shape));
}

Tensor expand_to(const Tensor& x, const DimList& shape) {
  if (is_static(shape)) return expand(x, to_static(shape));
  return expand(x, std::span<const Dim>(shape));
}

// The expand + reshape leaves x itself (or a view of it) when nothing is
// repeated; PyTorch's repeat always returns a new tensor.
Tensor fresh(const Tensor& result, const Tensor& x) {
  return result.is_alias_of(x) ? clone(result) : result;
}

}  // namespace

Tensor repeat(const Tensor& x, const IntList& repeats) {
  KILN_CHECK_VALUE(int64_t(repeats.size()) >= x.dim(),
                   "repeat: number of dimensions of repeat dims (", repeats.size(),
                   ") can not be smaller than number of dimensions of tensor (", x.dim(),
                   ", shape ", x.shape(), ")");
  for (int64_t r : repeats) {
    KILN_CHECK_VALUE(r >= 0, "repeat: repeats can not be negative, got ", repeats);
  }
  // x as [1, s0, 1, s1, ...] (leading dims x lacks are size 1), expanded to
  // [r0, s0, r1, s1, ...] and merged pairwise into [r0 s0, r1 s1, ...].
  const DimList shape = sym_shape(x);
  const size_t leading = repeats.size() - shape.size();
  DimList spread, expanded, merged;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const Dim size = i < leading ? Dim(1) : shape[i - leading];
    spread.insert(spread.end(), {Dim(1), size});
    expanded.insert(expanded.end(), {Dim(repeats[i]), size});
    merged.push_back(Dim(repeats[i]) * size);
  }
  return fresh(reshape_to(expand_to(reshape_to(x, spread), expanded), merged), x);
}

Tensor tile(const Tensor& x, const IntList& dims) {
  IntList repeats = dims;
  if (int64_t(repeats.size()) < x.dim()) repeats.insert(repeats.begin(), x.dim() - dims.size(), 1);
  return repeat(x, repeats);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  KILN_CHECK_VALUE(repeats >= 0, "repeat_interleave: repeats can not be negative, got ", repeats);
  // Unset dim: over the flattened tensor, as PyTorch.
  const Tensor input = dim ? x : reshape(x, IntList{-1});
  const int64_t d =
      dim ? wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave", x.shape()) : 0;
  const Tensor base = input.dim() == 0 ? reshape(input, IntList{1}) : input;
  // base as [..., s_d, 1, ...], expanded to [..., s_d, r, ...] and merged.
  DimList shape = sym_shape(base);
  DimList spread = shape, expanded = shape, merged = shape;
  spread.insert(spread.begin() + d + 1, Dim(1));
  expanded.insert(expanded.begin() + d + 1, Dim(repeats));
  merged[d] = shape[d] * Dim(repeats);
  if (output_size) {
    KILN_CHECK_VALUE(merged[d] == Dim(*output_size), "repeat_interleave: output_size ",
                     *output_size, " does not match the required size ", merged[d],
                     " (allocated size does not match required size)");
  }
  return fresh(reshape_to(expand_to(reshape_to(base, spread), expanded), merged), x);
}

}  // namespace kiln
