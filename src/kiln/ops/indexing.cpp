// index_fill, index_copy, take_along_dim, masked_select and masked_scatter
// as compositions of ops (scatter, gather, index_select, where), so each
// traces and differentiates as its parts: no kernels or backward rules of
// their own.
#include "kiln/ops/indexing.h"

#include "kiln/core/factory.h"
#include "kiln/core/shape.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/scan.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// PyTorch's checks of index_fill's index (and their exception types).
void check_fill_index(const Tensor& index) {
  KILN_CHECK_INDEX(index.dtype() == DType::Int64,
                   "index_fill_(): Expected dtype int64 for index, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, "index_fill_(): Index has to be a vector/scalar, got shape ",
             index.shape());
}

// index (1-D, n entries) laid along dim and expanded to `shape` (which has
// n at dim): the index tensor of the scatter that writes whole slices.
Tensor slice_index(const Tensor& index, int64_t dim, IntList shape) {
  IntList along(shape.size(), 1);
  along[size_t(dim)] = index.numel();
  return expand(reshape(index, along), shape);
}

// A shape with `count` at dim (the shape of the slices written).
IntList with_size_at(IntList shape, int64_t dim, int64_t count) {
  shape[size_t(dim)] = count;
  return shape;
}
IntList with_size_at(const Tensor& x, int64_t dim, int64_t count) {
  return with_size_at(x.shape(), dim, count);
}

// Runs fn on x as 1-D when x is 0-d (PyTorch treats it as one element along
// dim 0) and gives the result x's shape back.
template <typename Fn>
Tensor at_least_1d(const Tensor& x, int64_t dim, const char* fn_name, Fn fn) {
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), fn_name, x.shape());
  if (x.dim() > 0) return fn(x, d);
  return reshape(fn(reshape(x, IntList{1}), d), IntList{});
}

// value is 0-d: scatter writes it at every position (and sums its gradient).
Tensor index_fill_with(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  check_fill_index(index);
  KILN_CHECK(value.dim() == 0,
             "index_fill_(): only supports a 0-dimensional value tensor, but got tensor with ",
             value.dim(), " dimension(s)");
  return at_least_1d(x, dim, "index_fill", [&](const Tensor& x1, int64_t d) {
    const int64_t size = x1.size(d);
    // Negative indices count from the end; the scatter checks the range.
    Tensor wrapped = where(index < int64_t(0), index + size, index);
    IntList shape = with_size_at(x1, d, index.numel());
    return scatter(x1, d, slice_index(wrapped, d, shape), value);
  });
}

// PyTorch's checks of index_copy's arguments (and their exception types);
// x1 is x as at least 1-D, d the wrapped dim.
void check_index_copy(const Tensor& x, const Tensor& x1, int64_t d, const Tensor& index,
                      const Tensor& source) {
  KILN_CHECK(index.dtype() == DType::Int64,
             "index_copy_(): Expected a long tensor for index, but got ", index.dtype());
  KILN_CHECK_INDEX(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ",
                   index.dim(), ")");
  KILN_CHECK(source.dtype() == x.dtype(), "index_copy_(): self and source expected to have the ",
             "same dtype, but got (self) ", x.dtype(), " and (source) ", source.dtype());
  KILN_CHECK_INDEX(source.dim() == x.dim() || (source.dim() <= 1 && x.dim() <= 1),
                   "index_copy_(): When source and destination are not scalars, their "
                   "dimensionality must match. Source dimensionality (",
                   source.dim(), "), destination dimensionality (", x.dim(), ")");
  const int64_t along = source.dim() == 0 ? 1 : source.size(d);
  KILN_CHECK_INDEX(along == index.numel(), "index_copy_(): Number of indices (", index.numel(),
                   ") should be equal to source.size(dim) (", along, ")");
  const IntList want = with_size_at(x1, d, index.numel());
  KILN_CHECK(numel_of(want) == source.numel() && (source.dim() <= 1 || source.shape() == want),
             "index_copy_(): Source/destination tensor must have same slice shapes: source shape ",
             source.shape(), ", self shape ", x.shape(), " at dimension ", d);
}

// A data-dependent output shape cannot be traced: see Note [Data-dependent
// output shapes] in data_dependent.h.
void refuse_while_tracing(const char* fn) {
  KILN_CHECK(dispatch_observer() == nullptr, fn,
             ": the shape of its output depends on the values of its input (a data-dependent "
             "output shape), which a traced or compiled graph cannot capture; call ",
             fn, "() outside the function being traced (kiln.jit.trace, hybridize, kiln.compile)");
}

void check_bool_mask(const Tensor& mask, const char* fn) {
  KILN_CHECK(mask.dtype() == DType::Bool, fn, ": expected BoolTensor for mask, got ", mask.dtype(),
             " (shape ", mask.shape(), ")");
}

}  // namespace

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return index_fill_with(x, dim, index, wrap_scalar(value));
}
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  return index_fill_with(x, dim, index, value);
}
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return copy_(x, index_fill(x, dim, index, value));
}
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  return copy_(x, index_fill(x, dim, index, value));
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  return at_least_1d(x, dim, "index_copy", [&](const Tensor& x1, int64_t d) {
    check_index_copy(x, x1, d, index, source);
    Tensor src = reshape(source, with_size_at(x1, d, index.numel()));
    return scatter(x1, d, slice_index(index, d, src.shape()), src);
  });
}
const Tensor& index_copy_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  return copy_(x, index_copy(x, dim, index, source));
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  KILN_CHECK(indices.dtype() == DType::Int64,
             "torch.take_along_dim(): dtype of indices should be Long but got ", indices.dtype());
  if (!dim) return gather(reshape(x, IntList{-1}), 0, reshape(indices, IntList{-1}));
  KILN_CHECK(x.dim() == indices.dim(),
             "torch.take_along_dim(): input and indices should have the same number of "
             "dimensions, but input has ",
             x.dim(), " dimensions and indices has ", indices.dim(), " dimensions");
  const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "take_along_dim", x.shape());
  if (x.dim() == 0) return gather(x, d, indices);
  const IntList both =
      broadcast_shapes(with_size_at(x, d, 1), with_size_at(indices, d, 1), "take_along_dim");
  const IntList x_shape = with_size_at(both, d, x.size(d));
  const IntList index_shape = with_size_at(both, d, indices.size(d));
  return gather(expand(x, x_shape), d, expand(indices, index_shape));
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  refuse_while_tracing("masked_select");
  check_bool_mask(mask, "masked_select");
  const IntList shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  Tensor flat = reshape(expand(x, shape), IntList{-1});
  Tensor picked = nonzero(reshape(expand(mask, shape), IntList{-1}));
  return index_select(flat, 0, reshape(picked, IntList{-1}));
}

// Each true position reads source at (the number of trues before it): a
// cumulative sum of the mask, so the composition stays traceable.
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  check_bool_mask(mask, "masked_scatter_");
  KILN_CHECK(source.dtype() == x.dtype(),
             "masked_scatter_: expected self and source to have same dtypes but got ", x.dtype(),
             " and ", source.dtype());
  const IntList shape = broadcast_shapes(x.shape(), mask.shape(), "masked_scatter");
  Tensor full_mask = expand(mask, shape);
  if (dispatch_observer() == nullptr) {
    const int64_t trues = sum(full_mask).item<int64_t>();
    KILN_CHECK(source.numel() >= trues,
               "masked_scatter: expected source to have at least as many elements as ones in "
               "mask (",
               trues, "), got ", source.numel());
  }
  if (source.numel() == 0) return clone(expand(x, shape));  // no true in mask
  Tensor position = cumsum(reshape(full_mask, IntList{-1}), 0, DType::Int64) - int64_t(1);
  position = clamp(position, 0.0, std::nullopt);
  Tensor picked = index_select(reshape(source, IntList{-1}), 0, position);
  return where(full_mask, reshape(picked, shape), x);
}
const Tensor& masked_scatter_(const Tensor& x, const Tensor& mask, const Tensor& source) {
  KILN_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_scatter_") == x.shape(),
             "masked_scatter_: mask of shape ", mask.shape(),
             " cannot be broadcast to the shape of self ", x.shape());
  return copy_(x, masked_scatter(x, mask, source));
}

}  // namespace kiln
