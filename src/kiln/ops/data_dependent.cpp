// nonzero, unique, bincount and repeat_interleave with tensor counts over
// concrete data; see Note [Data-dependent output shapes] in data_dependent.h.
#include "kiln/ops/data_dependent.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/core/shape.h"
#include "kiln/kernels/cpu/non_max_suppression.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/repeat.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

void refuse_while_tracing(const char* fn) {
  KILN_CHECK(dispatch_observer() == nullptr, fn,
             ": the shape of its output depends on the values of its input (a data-dependent "
             "output shape), which a traced or compiled graph cannot capture; call ",
             fn, "() outside the function being traced (kiln.jit.trace, hybridize, kiln.compile)");
}

// A new int64 tensor holding `values`.
Tensor int64_tensor(const std::vector<int64_t>& values, const IntList& shape) {
  Tensor out = make_tensor(shape, DType::Int64);
  std::copy(values.begin(), values.end(), out.data<int64_t>());
  return out;
}

// x's elements in row-major order, as int64 (an integer tensor's values).
std::vector<int64_t> int_values(const Tensor& x) {
  Tensor c = contiguous(to(x, DType::Int64));
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// Ascending with NaN after everything (and equivalent to other NaNs), so
// sorting is a strict weak order; equality stays IEEE's, so each NaN is a
// value of its own, as in PyTorch.
template <typename T>
bool before(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// The groups of equal items in `order` (sorted): the group of each
// position and, per group, its first position and size.
struct Groups {
  std::vector<int64_t> of_position, first, count;
};

template <typename Equal>
Groups group_sorted(const std::vector<int64_t>& order, Equal equal) {
  Groups g;
  g.of_position.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || !equal(order[k - 1], order[k])) {
      g.first.push_back(int64_t(k));
      g.count.push_back(0);
    }
    g.of_position[k] = int64_t(g.first.size()) - 1;
    ++g.count.back();
  }
  return g;
}

// The groups in output order: ascending (as sorted), or by first occurrence
// (the smallest position in a group is its first, the sort being stable).
std::vector<int64_t> output_order(const std::vector<int64_t>& order, const Groups& g, bool sorted) {
  std::vector<int64_t> groups(g.first.size(), 0);
  std::iota(groups.begin(), groups.end(), 0);
  if (sorted) return groups;
  std::sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) {
    return order[size_t(g.first[size_t(a)])] < order[size_t(g.first[size_t(b)])];
  });
  return groups;
}

// Everything of a unique() but the values: the first position of each
// output group, its count, and the output group of each item.
struct UniqueIndices {
  std::vector<int64_t> first, counts, inverse;
};

UniqueIndices unique_indices(const std::vector<int64_t>& order, const Groups& g, bool sorted) {
  const std::vector<int64_t> groups = output_order(order, g, sorted);
  std::vector<int64_t> rank(groups.size());
  UniqueIndices r;
  for (size_t i = 0; i < groups.size(); ++i) {
    rank[size_t(groups[i])] = int64_t(i);
    r.first.push_back(order[size_t(g.first[size_t(groups[i])])]);
    r.counts.push_back(g.count[size_t(groups[i])]);
  }
  r.inverse.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k)
    r.inverse[size_t(order[k])] = rank[size_t(g.of_position[k])];
  return r;
}

void fill_indices(UniqueAll& r, const UniqueIndices& u, const IntList& inverse_shape) {
  const int64_t n = int64_t(u.first.size());
  r.first_indices = int64_tensor(u.first, {n});
  r.inverse = int64_tensor(u.inverse, inverse_shape);
  r.counts = int64_tensor(u.counts, {n});
}

UniqueAll unique_elements(const Tensor& x, bool sorted) {
  Tensor flat = contiguous(reshape(x, IntList{-1}));
  const int64_t n = flat.numel();
  std::vector<int64_t> order(size_t(n), 0);
  std::iota(order.begin(), order.end(), 0);
  UniqueAll r;
  visit_dtype(flat.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = flat.data<T>();
    std::stable_sort(order.begin(), order.end(),
                     [p](int64_t a, int64_t b) { return before(p[a], p[b]); });
    Groups g = group_sorted(order, [p](int64_t a, int64_t b) { return p[a] == p[b]; });
    UniqueIndices u = unique_indices(order, g, sorted);
    r.values = make_tensor({int64_t(u.first.size())}, flat.dtype());
    T* values = r.values.data<T>();
    for (size_t i = 0; i < u.first.size(); ++i)
      values[i] = p[u.first[i]];
    fill_indices(r, u, x.shape());
  });
  return r;
}

// Slices along dim compared lexicographically, element by element.
UniqueAll unique_slices(const Tensor& x, int64_t dim, bool sorted) {
  const int64_t d = wrap_dim(dim, x.dim(), "unique", x.shape());
  const int64_t rows = x.size(d);
  IntList order_of_dims(size_t(x.dim()), 0);
  std::iota(order_of_dims.begin(), order_of_dims.end(), 0);
  std::rotate(order_of_dims.begin(), order_of_dims.begin() + d, order_of_dims.begin() + d + 1);
  Tensor moved = contiguous(permute(x, order_of_dims));  // dim first
  const int64_t width = rows == 0 ? 0 : moved.numel() / rows;
  std::vector<int64_t> order(size_t(rows), 0);
  std::iota(order.begin(), order.end(), 0);
  UniqueAll r;
  visit_dtype(moved.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = moved.data<T>();
    auto row_before = [p, width](int64_t a, int64_t b) {
      for (int64_t j = 0; j < width; ++j) {
        T u = p[a * width + j], v = p[b * width + j];
        if (before(u, v)) return true;
        if (before(v, u)) return false;
      }
      return false;
    };
    auto row_equal = [p, width](int64_t a, int64_t b) {
      for (int64_t j = 0; j < width; ++j) {
        if (!(p[a * width + j] == p[b * width + j])) return false;
      }
      return true;
    };
    std::stable_sort(order.begin(), order.end(), row_before);
    Groups g = group_sorted(order, row_equal);
    UniqueIndices u = unique_indices(order, g, sorted);
    fill_indices(r, u, {rows});
    r.values = contiguous(index_select(x, d, r.first_indices));
  });
  return r;
}

// The counts of repeat_interleave: 1-D (or 0-d) non-negative integers.
std::vector<int64_t> repeat_counts(const Tensor& repeats) {
  KILN_CHECK_VALUE(repeats.dim() <= 1, "repeat_interleave: repeats must be 0-dim or 1-dim tensor",
                   ", got shape ", repeats.shape());
  KILN_CHECK_TYPE(is_integral(repeats.dtype()),
                  "repeat_interleave: repeats has to be an integer tensor (int32 or int64), got ",
                  repeats.dtype());
  std::vector<int64_t> counts = int_values(repeats);
  for (int64_t c : counts) {
    KILN_CHECK_VALUE(c >= 0, "repeat_interleave: repeats can not be negative, got ", c);
  }
  return counts;
}

}  // namespace

namespace detail {

// dispatch runs these through run_data_dependent (data_dependent_ops.cpp).
Tensor nonzero_of(const Tensor& x) {
  Tensor c = contiguous(x);
  std::vector<int64_t> hits;
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      if (p[i] != T(0)) hits.push_back(i);
    }
  });
  const int64_t ndim = c.dim();
  std::vector<int64_t> coords(hits.size() * size_t(ndim));
  for (size_t k = 0; k < hits.size(); ++k) {
    int64_t rest = hits[k];
    for (int64_t d = ndim - 1; d >= 0; --d) {
      coords[k * size_t(ndim) + size_t(d)] = rest % c.size(d);
      rest /= c.size(d);
    }
  }
  return int64_tensor(coords, {int64_t(hits.size()), ndim});
}

UniqueAll unique_all_of(const Tensor& x, bool sorted, std::optional<int64_t> dim) {
  if (dim) return unique_slices(x, *dim, sorted);
  return unique_elements(x, sorted);
}

namespace {

// A scalar input of non_max_suppression as a double, or `otherwise` when absent.
double scalar_or(const Tensor& t, double otherwise, const char* what) {
  if (!t.defined()) return otherwise;
  KILN_CHECK_VALUE(t.numel() == 1, "non_max_suppression: ", what,
                   " must hold one value, got shape ", t.shape());
  return to(t, DType::Float64).data<double>()[0];
}

}  // namespace

Tensor non_max_suppression_of(std::span<const Tensor> in, bool center_point_box) {
  const Tensor boxes = contiguous(to(in[0], DType::Float32));
  const Tensor scores = contiguous(to(in[1], DType::Float32));
  const Tensor none;
  const Tensor& max_output = in.size() > 2 ? in[2] : none;
  int64_t max_per_class = 0;
  if (max_output.defined()) {
    KILN_CHECK_VALUE(max_output.numel() == 1, "non_max_suppression: max_output_boxes_per_class ",
                     "must hold one value, got shape ", max_output.shape());
    max_per_class = to(max_output, DType::Int64).data<int64_t>()[0];
  }
  const double iou = scalar_or(in.size() > 3 ? in[3] : none, 0.0, "iou_threshold");
  const Tensor& score_tensor = in.size() > 4 ? in[4] : none;
  std::optional<float> score_threshold;
  if (score_tensor.defined())
    score_threshold = float(scalar_or(score_tensor, 0, "score_threshold"));
  const cpu::NmsGeometry geometry{boxes.size(0), scores.size(1), boxes.size(1)};
  std::vector<int64_t> kept =
      cpu::non_max_suppression_f32(boxes.data<float>(), scores.data<float>(), geometry,
                                   max_per_class, float(iou), score_threshold, center_point_box);
  return int64_tensor(kept, {int64_t(kept.size()) / 3, 3});
}

}  // namespace detail

Tensor nonzero(const Tensor& x) {
  static const OpDef& nonzero_op = op("nonzero");
  return dispatch1(nonzero_op, {x});
}

std::vector<Tensor> nonzero_tuple(const Tensor& x) {
  Tensor indices = nonzero(x.dim() == 0 ? reshape(x, IntList{1}) : x);
  std::vector<Tensor> columns;
  for (int64_t d = 0; d < indices.size(1); ++d)
    columns.push_back(contiguous(select(indices, 1, d)));
  return columns;
}

Tensor argwhere(const Tensor& x) {
  return nonzero(x);
}

UniqueAll unique_all(const Tensor& x, bool sorted, std::optional<int64_t> dim) {
  static const OpDef& unique_op = op("unique");
  Attrs attrs{{"sorted", sorted}};
  if (dim) attrs.set("dim", *dim);
  std::vector<Tensor> out = dispatch(unique_op, {x}, attrs);
  return UniqueAll{out[0], out[1], out[2], out[3]};
}

UniqueResult unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                    std::optional<int64_t> dim) {
  (void)sorted;  // always sorted: see data_dependent.h
  UniqueAll all = unique_all(x, /*sorted=*/true, dim);
  return UniqueResult{all.values, return_inverse ? all.inverse : Tensor(),
                      return_counts ? all.counts : Tensor()};
}

Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores,
                           const Tensor& max_output_boxes_per_class, const Tensor& iou_threshold,
                           const Tensor& score_threshold, bool center_point_box) {
  static const OpDef& nms_op = op("non_max_suppression");
  return dispatch1(nms_op,
                   {boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold},
                   {{"center_point_box", center_point_box}});
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  refuse_while_tracing("bincount");
  KILN_CHECK_VALUE(minlength >= 0, "bincount: minlength should be >= 0, got ", minlength);
  KILN_CHECK_TYPE(is_integral(x.dtype()), "bincount: expected an integer (int32 or int64) input, ",
                  "got ", x.dtype(), " (shape ", x.shape(), ")");
  KILN_CHECK_VALUE(x.dim() == 1, "bincount: only supports 1-d non-negative integral inputs, got ",
                   "shape ", x.shape());
  if (weights.defined()) {
    KILN_CHECK_VALUE(weights.dim() == 1 && weights.size(0) == x.size(0),
                     "bincount: weights should be 1-d and have the same length as input (input ",
                     "shape ", x.shape(), ", weights shape ", weights.shape(), ")");
  }
  std::vector<int64_t> values = int_values(x);
  int64_t bins = minlength;
  for (size_t i = 0; i < values.size(); ++i) {
    KILN_CHECK_VALUE(values[i] >= 0, "bincount: only supports 1-d non-negative integral inputs, ",
                     "got ", values[i], " at index ", i);
    bins = std::max(bins, values[i] + 1);
  }
  if (!weights.defined()) {
    std::vector<int64_t> counts(size_t(bins), 0);
    for (int64_t v : values)
      ++counts[size_t(v)];
    return int64_tensor(counts, {bins});
  }
  const DType out_dtype = weights.dtype() == DType::Float32 ? DType::Float32 : DType::Float64;
  Tensor w = contiguous(to(weights, out_dtype));
  Tensor out = make_tensor({bins}, out_dtype);
  visit_floating(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    T* sums = out.data<T>();
    std::fill(sums, sums + bins, T(0));
    const T* wp = w.data<T>();
    for (size_t i = 0; i < values.size(); ++i)
      sums[values[i]] += wp[i];
  });
  return out;
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size) {
  refuse_while_tracing("repeat_interleave");
  std::vector<int64_t> counts = repeat_counts(repeats);
  std::vector<int64_t> indices;
  for (size_t i = 0; i < counts.size(); ++i)
    indices.insert(indices.end(), size_t(counts[i]), int64_t(i));
  KILN_CHECK_VALUE(!output_size || *output_size == int64_t(indices.size()),
                   "repeat_interleave: output_size ", output_size.value_or(0),
                   " does not match the sum of repeats, ", indices.size(),
                   " (allocated size does not match required size)");
  return int64_tensor(indices, {int64_t(indices.size())});
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  refuse_while_tracing("repeat_interleave");
  if (repeats.numel() == 1 && repeats.dim() <= 1) {  // one count for every element
    return repeat_interleave(x, repeat_counts(repeats)[0], dim, output_size);
  }
  const Tensor input = dim ? x : reshape(x, IntList{-1});
  const int64_t d =
      dim ? wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave", x.shape()) : 0;
  const Tensor base = input.dim() == 0 ? reshape(input, IntList{1}) : input;
  KILN_CHECK_VALUE(repeats.dim() == 1 && repeats.size(0) == base.size(d),
                   "repeat_interleave: repeats must have the same size as input along dim, but "
                   "got repeats.size(0) = ",
                   repeats.numel(), " and input.size(", d, ") = ", base.size(d));
  return index_select(base, d, repeat_interleave(repeats, output_size));
}

}  // namespace kiln
