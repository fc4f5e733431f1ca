#include "kiln/core/shape.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln {

int64_t numel_of(const IntList& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

IntList contiguous_strides(const IntList& shape) {
  IntList strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

bool is_contiguous(const IntList& shape, const IntList& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // a size-1 dim's stride never matters
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, const IntList& shape) {
  int64_t range = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1
  KILN_CHECK_INDEX(dim >= -range && dim < range, op, ": dim ", dim,
                   " is out of range for a tensor of ", ndim, " dims (shape ", shape,
                   "); expected a dim in [", -range, ", ", range - 1, "]");
  return dim < 0 ? dim + range : dim;
}

IntList broadcast_shapes(const IntList& a, const IntList& b, std::string_view op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  IntList out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
               " cannot be broadcast: size ", da, " vs ", db, " at dim ", i,
               " of the broadcast shape");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<IntList> view_strides(const IntList& shape, const IntList& strides,
                                    const IntList& new_shape) {
  int64_t numel = numel_of(shape);
  if (numel == 0 || shape.empty()) return contiguous_strides(new_shape);
  // Walk the old dims in chunks that are contiguous among themselves; each
  // chunk must map onto a run of new dims with the same element count.
  IntList out(new_shape.size());
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    bool chunk_ends =
        d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

IntList infer_reshape(const IntList& target, int64_t numel, std::string_view op,
                      const IntList& shape) {
  IntList out = target;
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer_at < 0, op, ": only one dimension can be inferred (-1) in ", target);
      infer_at = int64_t(i);
      continue;
    }
    KILN_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " at dim ", i, " of ", target);
    known *= out[i];
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, op, ": shape ", target,
               " is invalid for input of size ", numel, " (shape ", shape, ")");
    out[infer_at] = numel / known;
    return out;
  }
  KILN_CHECK(known == numel, op, ": shape ", target, " is invalid for input of size ", numel,
             " (shape ", shape, ")");
  return out;
}

}  // namespace kiln
