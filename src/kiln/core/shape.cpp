#include "kiln/core/shape.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln {

int64_t numel_of(const IntList& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    // A wrapped product would size a storage smaller than its tensor.
    KILN_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape,
               " has more elements than int64 can count");
  }
  return n;
}

Dim numel_of(const DimList& shape) {
  Dim n = 1;
  for (const Dim& s : shape)
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

DimList contiguous_strides(const DimList& shape) {
  DimList strides(shape.size());
  Dim running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= shape[i].is_static() ? Dim(std::max<int64_t>(shape[i].static_value(), 1)) : shape[i];
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

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, const DimList& shape) {
  int64_t range = std::max<int64_t>(ndim, 1);
  KILN_CHECK_INDEX(dim >= -range && dim < range, op, ": dim ", dim,
                   " is out of range for a tensor of ", ndim, " dims (shape ", shape,
                   "); expected a dim in [", -range, ", ", range - 1, "]");
  return dim < 0 ? dim + range : dim;
}

DimList broadcast_shapes(const DimList& a, const DimList& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  DimList out(n);
  for (size_t i = 0; i < n; ++i) {
    Dim da = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim db = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    // A side that is 1 as written takes the other with no decision (and so
    // no guard): only sizes that may or may not be 1 ask the ShapeEnv.
    if (db.is_static() && db.static_value() == 1) {
      out[i] = da;
      continue;
    }
    if (da.is_static() && da.static_value() == 1) {
      out[i] = db;
      continue;
    }
    if (da == db || db == 1) {
      out[i] = da;
      continue;
    }
    if (da == 1) {
      out[i] = db;
      continue;
    }
    // Neither side is 1 as far as anything knows: they must be equal, which
    // a graph built without example values may assume (equal_or_assumed).
    KILN_CHECK(equal_or_assumed(da, db), op, ": shapes ", a, " and ", b,
               " cannot be broadcast: size ", da, " vs ", db, " at dim ", i,
               " of the broadcast shape");
    out[i] = da;
  }
  return out;
}

IntList broadcast_shapes(const IntList& a, const IntList& b, std::string_view op) {
  if (a == b) return a;
  return to_static(broadcast_shapes(to_dims(a), to_dims(b), op));
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

DimList infer_reshape(const DimList& target, const Dim& numel, std::string_view op,
                      const DimList& shape) {
  DimList out = target;
  Dim known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_static() && out[i].static_value() == -1) {
      KILN_CHECK(infer_at < 0, op, ": only one dimension can be inferred (-1) in ", target);
      infer_at = int64_t(i);
      continue;
    }
    KILN_CHECK(out[i].is_symbolic() || out[i].static_value() >= 0, op, ": invalid size ", out[i],
               " at dim ", i, " of ", target);
    known *= out[i];
  }
  if (infer_at >= 0) {
    std::optional<Dim> rest = exact_divide(numel, known);
    // [4, -1] of [batch, 3, 2] divides only for some batches: while tracing,
    // the ShapeEnv decides it (a guard on the remainder) and -1 is the floor.
    bool by_guard = !rest && numel.is_symbolic() && known.is_static() && known.static_value() > 0 &&
                    current_shape_env() != nullptr;
    if (by_guard && mod(numel, known.static_value()) == Dim(0))
      rest = floordiv(numel, known.static_value());
    KILN_CHECK(rest.has_value(), op, ": shape ", target, " is invalid for input of size ", numel,
               " (shape ", shape, ")");
    out[size_t(infer_at)] = *rest;
    return out;
  }
  KILN_CHECK(known == numel, op, ": shape ", target, " is invalid for input of size ", numel,
             " (shape ", shape, ")");
  return out;
}

IntList infer_reshape(const IntList& target, int64_t numel, std::string_view op,
                      const IntList& shape) {
  return to_static(infer_reshape(to_dims(target), numel, op, to_dims(shape)));
}

}  // namespace kiln
