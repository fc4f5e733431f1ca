#include "kiln/kernels/cpu/reduce.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// A reduction is a fold: an accumulator starts at identity(), takes each
// element through step(), and partial folds (lanes, threads) combine with
// merge(). Ops are small values so one can carry state (the mean in variance).
template <typename T, typename A>
struct SumOp {
  using Acc = A;
  Acc identity() const { return Acc(0); }
  Acc step(Acc a, T v) const { return a + Acc(v); }
  Acc merge(Acc a, Acc b) const { return a + b; }
};

template <typename T, typename A>
struct ProdOp {
  using Acc = A;
  Acc identity() const { return Acc(1); }
  Acc step(Acc a, T v) const { return a * Acc(v); }
  Acc merge(Acc a, Acc b) const { return a * b; }
};

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;  // plain compare: vectorizes
  return false;
}

// NaN wins: once the accumulator is NaN no comparison replaces it.
template <typename T>
struct MaxOp {
  using Acc = T;
  Acc identity() const {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  Acc step(Acc a, T v) const {
    return ((v > a) | is_nan(v)) ? v : a;
  }  // `|`: no branch, vectorizes
  Acc merge(Acc a, Acc b) const { return step(a, b); }
};

template <typename T>
struct MinOp {
  using Acc = T;
  Acc identity() const {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::max();
  }
  Acc step(Acc a, T v) const { return ((v < a) | is_nan(v)) ? v : a; }
  Acc merge(Acc a, Acc b) const { return step(a, b); }
};

// Sum of squared deviations from a known mean (variance's second pass).
template <typename T>
struct SquaredDeviationOp {
  using Acc = double;
  double mean;
  Acc identity() const { return 0.0; }
  Acc step(Acc a, T v) const {
    double d = double(v) - mean;
    return a + d * d;
  }
  Acc merge(Acc a, Acc b) const { return a + b; }
};

// Folds n elements `stride` apart into acc. A contiguous run is folded into
// kLanes independent accumulators, which the compiler turns into four SIMD
// registers: enough independent chains to hide the add/compare latency (and
// they also shorten the rounding chain of a long sum).
template <typename Op, typename T>
typename Op::Acc fold_run(const Op& op, const T* p, int64_t stride, int64_t n,
                          typename Op::Acc acc) {
  using Acc = typename Op::Acc;
  constexpr int kLanes = 4 * 32 / int(sizeof(Acc));
  int64_t i = 0;
  if (stride == 1 && n >= 2 * kLanes) {
    Acc lanes[kLanes];
    for (int j = 0; j < kLanes; ++j)
      lanes[j] = op.identity();
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j)
        lanes[j] = op.step(lanes[j], p[i + j]);
    }
    for (int j = 0; j < kLanes; ++j)
      acc = op.merge(acc, lanes[j]);
  }
  for (; i < n; ++i)
    acc = op.step(acc, p[i * stride]);
  return acc;
}

template <typename Op, typename T>
typename Op::Acc fold_range(const Op& op, const ReduceGeometry& g, const T* base, int64_t begin,
                            int64_t end) {
  typename Op::Acc acc = op.identity();
  for_each_reduced_run(g, begin, end, [&](int64_t offset, int64_t stride, int64_t n) {
    acc = fold_run(op, base + offset, stride, n, acc);
  });
  return acc;
}

// One output, many elements (a full sum): each thread folds a slice of the
// reduced range, and the partial results merge in thread order.
template <typename Op, typename T>
typename Op::Acc fold_parallel(const Op& op, const ReduceGeometry& g, const T* base) {
  using Acc = typename Op::Acc;
  std::vector<Acc> partials(size_t(max_threads()), op.identity());
#pragma omp parallel
  {
    const int64_t threads = omp_threads_in_region();
    const int64_t me = omp_thread_id_in_region();
    const int64_t chunk = (g.reduce_len + threads - 1) / threads;
    const int64_t begin = std::min(g.reduce_len, chunk * me);
    const int64_t end = std::min(g.reduce_len, begin + chunk);
    partials[size_t(me)] = fold_range(op, g, base, begin, end);
  }
  Acc acc = op.identity();
  for (const Acc& partial : partials)
    acc = op.merge(acc, partial);
  return acc;
}

// Reducing outer dims while the innermost kept dim is contiguous (a column
// sum, e.g. a bias gradient): a block of neighbouring outputs is updated
// together from each input row, so the inner loop runs along memory.
bool is_column_reduction(const ReduceGeometry& g) {
  if (g.red_ndim == 0 || g.kept_ndim == 0) return false;
  if (g.red_in[g.red_ndim - 1] == 1) return false;  // rows are contiguous: fold them directly
  const int last = g.kept_ndim - 1;
  return g.kept_in[last] == 1 && g.kept_out[last] == 1 && g.kept_shape[last] >= 8;
}

template <typename Op, typename T, typename Out, typename Finish>
void column_reduce(const Op& op, const ReduceGeometry& g, const T* src, Out* dst, Finish finish) {
  using Acc = typename Op::Acc;
  constexpr int64_t kBlock = 256;
  const int last = g.kept_ndim - 1;
  const int64_t width = g.kept_shape[last];
  const int64_t blocks_per_row = (width + kBlock - 1) / kBlock;
  const int64_t units = g.num_outputs / width * blocks_per_row;
  parallel_ranges(units, g.num_outputs * g.reduce_len, [&](int64_t begin, int64_t end) {
    Odometer<2> row(last, g.kept_shape, {g.kept_in, g.kept_out});
    Acc acc[kBlock];
    for (int64_t unit = begin; unit < end; ++unit) {
      row.seek(unit / blocks_per_row);
      const int64_t col = unit % blocks_per_row * kBlock;
      const int64_t w = std::min(kBlock, width - col);
      for (int64_t j = 0; j < w; ++j)
        acc[j] = op.identity();
      const T* base = src + row.offset[0] + col;
      for_each_reduced_run(g, 0, g.reduce_len, [&](int64_t offset, int64_t stride, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          const T* in_row = base + offset + k * stride;
          for (int64_t j = 0; j < w; ++j)
            acc[j] = op.step(acc[j], in_row[j]);
        }
      });
      Out* out_row = dst + row.offset[1] + col;
      for (int64_t j = 0; j < w; ++j)
        out_row[j] = finish(acc[j]);
    }
  });
}

// Picks the loop for the layout: one big fold split across threads, the
// column loop, or one fold per output (contiguous or strided runs).
template <typename Op, typename T, typename Out, typename Finish>
void reduce_with(const Op& op, const ReduceGeometry& g, const StridedView& out,
                 const StridedView& in, Finish finish) {
  const T* src = in.ptr<const T>();
  Out* dst = out.ptr<Out>();
  if (g.num_outputs == 0) return;
  if (g.num_outputs == 1 && g.reduce_len >= kParallelGrain) {
    dst[0] = finish(fold_parallel(op, g, src));
    return;
  }
  if (is_column_reduction(g)) {
    column_reduce(op, g, src, dst, finish);
    return;
  }
  for_each_output(g, [&](int64_t in_offset, int64_t out_offset) {
    dst[out_offset] = finish(fold_range(op, g, src + in_offset, 0, g.reduce_len));
  });
}

template <typename T>
using WideAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Sum and prod: the output is the input's dtype, or int64 for bool/int inputs.
template <template <typename, typename> class OpT>
void reduce_additive(const ReduceGeometry& g, const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = WideAcc<T>;
    const OpT<T, Acc> op;
    if (out.dtype == in.dtype) {
      reduce_with<OpT<T, Acc>, T, T>(op, g, out, in, [](Acc a) { return T(a); });
      return;
    }
    if constexpr (!std::is_floating_point_v<T>) {
      KILN_ASSERT(out.dtype == DType::Int64, "integer reduction into ", to_string(out.dtype));
      reduce_with<OpT<T, Acc>, T, int64_t>(op, g, out, in, [](Acc a) { return int64_t(a); });
      return;
    }
    KILN_ASSERT(false, "floating reduction of ", to_string(in.dtype), " into ",
                to_string(out.dtype));
  });
}

void reduce_mean(const ReduceGeometry& g, const StridedView& out, const StridedView& in) {
  visit_floating(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const double count = double(g.reduce_len);  // 0 gives 0 / 0 = NaN, as in PyTorch
    reduce_with<SumOp<T, double>, T, T>(SumOp<T, double>{}, g, out, in,
                                        [count](double a) { return T(a / count); });
  });
}

template <template <typename> class OpT>
void reduce_extremum(const ReduceGeometry& g, const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_with<OpT<T>, T, T>(OpT<T>{}, g, out, in, [](T a) { return a; });
  });
}

}  // namespace

void reduce(const StridedView& out, const StridedView& in, DimMask mask, ReduceKind kind) {
  const ReduceGeometry g = make_reduce_geometry(out, in, mask);
  switch (kind) {
    case ReduceKind::Sum:
      return reduce_additive<SumOp>(g, out, in);
    case ReduceKind::Prod:
      return reduce_additive<ProdOp>(g, out, in);
    case ReduceKind::Mean:
      return reduce_mean(g, out, in);
    case ReduceKind::Max:
      return reduce_extremum<MaxOp>(g, out, in);
    case ReduceKind::Min:
      return reduce_extremum<MinOp>(g, out, in);
  }
}

void variance(const StridedView& out, const StridedView& in, DimMask mask, int64_t correction,
              bool take_sqrt) {
  const ReduceGeometry g = make_reduce_geometry(out, in, mask);
  visit_floating(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.ptr<const T>();
    T* dst = out.ptr<T>();
    const double count = double(g.reduce_len);
    // A divisor of 0 gives inf or NaN, as PyTorch does (with a warning).
    const double divisor = std::max<double>(0.0, count - double(correction));
    for_each_output(g, [&](int64_t in_offset, int64_t out_offset) {
      const T* base = src + in_offset;
      const double mean = fold_range(SumOp<T, double>{}, g, base, 0, g.reduce_len) / count;
      const double squares = fold_range(SquaredDeviationOp<T>{mean}, g, base, 0, g.reduce_len);
      const double var = squares / divisor;
      dst[out_offset] = T(take_sqrt ? std::sqrt(var) : var);
    });
  });
}

void reduce_with_index(const StridedView& values, const StridedView& indices, const StridedView& in,
                       DimMask mask, bool is_max) {
  const ReduceGeometry g = make_reduce_geometry(indices, in, mask);
  KILN_ASSERT(g.reduce_len > 0 || g.num_outputs == 0, "max/min over an empty dim");
  for (int d = 0; values.data && d < values.ndim; ++d) {
    KILN_ASSERT(values.strides[d] == indices.strides[d], "max/min outputs differ in layout");
  }
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.ptr<const T>();
    T* value_out = values.data ? values.ptr<T>() : nullptr;
    int64_t* index_out = indices.ptr<int64_t>();
    // Starting from the identity with index 0 keeps the first occurrence on
    // ties, including a run of identities (all -inf for max).
    const T start = is_max ? MaxOp<T>{}.identity() : MinOp<T>{}.identity();
    for_each_output(g, [&](int64_t in_offset, int64_t out_offset) {
      T best = start;
      int64_t best_index = 0;
      int64_t seen = 0;
      for_each_reduced_run(g, 0, g.reduce_len, [&](int64_t offset, int64_t stride, int64_t n) {
        const T* p = src + in_offset + offset;
        for (int64_t k = 0; k < n; ++k) {
          const T v = p[k * stride];
          const bool better = is_max ? v > best : v < best;
          if ((better || is_nan(v)) && !is_nan(best)) {
            best = v;
            best_index = seen + k;
          }
        }
        seen += n;
      });
      index_out[out_offset] = best_index;
      if (value_out) value_out[out_offset] = best;
    });
  });
}

}  // namespace kiln::cpu
