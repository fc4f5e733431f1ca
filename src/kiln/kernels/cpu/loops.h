// The elementwise loop driver. Operands (output first) are strided views of
// one shape, inputs already broadcast to it. Dims that are contiguous for
// every operand are merged, so the common cases reduce to one flat loop the
// compiler vectorizes; large loops are split across OpenMP threads.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// Below this many elements a loop runs on one thread: starting a parallel
// region costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

template <int N>
struct LoopPlan {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t byte_strides[N][kMaxDims] = {};
  char* base[N] = {};
  int64_t numel = 1;
};

template <int N>
LoopPlan<N> make_loop_plan(const std::array<StridedView, N>& operands) {
  LoopPlan<N> plan;
  const StridedView& out = operands[0];
  for (int k = 0; k < N; ++k)
    plan.base[k] = static_cast<char*>(operands[k].data);
  // Walk dims innermost first, merging a dim into the previous kept one when
  // every operand steps through it contiguously.
  int kept = 0;
  int64_t rev_shape[kMaxDims];
  int64_t rev_strides[N][kMaxDims];
  for (int d = out.ndim - 1; d >= 0; --d) {
    int64_t size = out.shape[d];
    plan.numel *= size;
    if (size == 1) continue;
    bool merge = kept > 0;
    for (int k = 0; k < N && merge; ++k) {
      int64_t elem = int64_t(element_size(operands[k].dtype));
      merge = operands[k].strides[d] * elem == rev_strides[k][kept - 1] * rev_shape[kept - 1];
    }
    if (merge) {
      rev_shape[kept - 1] *= size;
      continue;
    }
    rev_shape[kept] = size;
    for (int k = 0; k < N; ++k) {
      rev_strides[k][kept] = operands[k].strides[d] * int64_t(element_size(operands[k].dtype));
    }
    ++kept;
  }
  plan.ndim = kept;
  for (int d = 0; d < kept; ++d) {
    plan.shape[d] = rev_shape[kept - 1 - d];
    for (int k = 0; k < N; ++k)
      plan.byte_strides[k][d] = rev_strides[k][kept - 1 - d];
  }
  return plan;
}

// Calls inner(ptrs, inner_byte_strides, n) for every innermost run that
// overlaps the linear range [begin, end).
template <int N, typename Inner>
void run_range(const LoopPlan<N>& plan, int64_t begin, int64_t end, Inner& inner) {
  if (plan.ndim == 0) {
    if (begin < end) {
      std::array<char*, N> ptrs;
      int64_t zero[N] = {};
      for (int k = 0; k < N; ++k)
        ptrs[k] = plan.base[k];
      inner(ptrs, zero, int64_t(1));
    }
    return;
  }
  const int last = plan.ndim - 1;
  int64_t index[kMaxDims];
  int64_t rem = begin;
  for (int d = last; d >= 0; --d) {
    index[d] = rem % plan.shape[d];
    rem /= plan.shape[d];
  }
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k)
    inner_strides[k] = plan.byte_strides[k][last];
  int64_t pos = begin;
  while (pos < end) {
    std::array<char*, N> ptrs;
    for (int k = 0; k < N; ++k) {
      char* p = plan.base[k];
      for (int d = 0; d <= last; ++d)
        p += index[d] * plan.byte_strides[k][d];
      ptrs[k] = p;
    }
    int64_t n = std::min(plan.shape[last] - index[last], end - pos);
    inner(ptrs, inner_strides, n);
    pos += n;
    index[last] += n;
    for (int d = last; d > 0 && index[d] == plan.shape[d]; --d) {
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

template <int N, typename Inner>
void for_each_run(const std::array<StridedView, N>& operands, Inner inner) {
  LoopPlan<N> plan = make_loop_plan<N>(operands);
  if (plan.numel == 0) return;
  if (plan.numel < kParallelGrain) {
    run_range<N>(plan, 0, plan.numel, inner);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel
  {
    int threads = omp_threads_in_region();
    int me = omp_thread_id_in_region();
    int64_t chunk = (plan.numel + threads - 1) / threads;
    int64_t begin = std::min<int64_t>(plan.numel, chunk * me);
    int64_t end = std::min<int64_t>(plan.numel, begin + chunk);
    Inner local = inner;
    run_range<N>(plan, begin, end, local);
  }
#else
  parallel_for_needs_openmp();  // parallel.h: built without OpenMP, it would not split
#endif
}

// out[i] = f(a[i]); contiguous runs are written as a plain indexed loop.
template <typename TOut, typename TIn, typename F>
void unary_loop(const StridedView& out, const StridedView& in, F f) {
  auto inner = [f_in_closure = f](const std::array<char*, 2>& p, const int64_t* s, int64_t n) {
    // A local copy: read through the closure, a functor's parameter (leaky
    // relu's slope) is loaded again after every store, which keeps GCC from
    // vectorizing the loop (8x slower).
    const F f = f_in_closure;
    auto* o = reinterpret_cast<TOut*>(p[0]);
    auto* a = reinterpret_cast<const TIn*>(p[1]);
    if (s[0] == sizeof(TOut) && s[1] == sizeof(TIn)) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = f(a[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<TOut*>(p[0] + i * s[0]) = f(*reinterpret_cast<const TIn*>(p[1] + i * s[1]));
    }
  };
  for_each_run<2>({out, broadcast_to(in, out.shape, out.ndim)}, inner);
}

// out[i] = f(a[i], b[i]), with fast paths for contiguous and scalar operands.
template <typename TOut, typename TA, typename TB, typename F>
void binary_loop(const StridedView& out, const StridedView& a, const StridedView& b, F f) {
  auto inner = [f_in_closure = f](const std::array<char*, 3>& p, const int64_t* s, int64_t n) {
    const F f = f_in_closure;  // as in unary_loop: lets the loops vectorize
    auto* o = reinterpret_cast<TOut*>(p[0]);
    auto* x = reinterpret_cast<const TA*>(p[1]);
    auto* y = reinterpret_cast<const TB*>(p[2]);
    if (s[0] == sizeof(TOut)) {
      if (s[1] == sizeof(TA) && s[2] == sizeof(TB)) {
        for (int64_t i = 0; i < n; ++i)
          o[i] = f(x[i], y[i]);
        return;
      }
      if (s[1] == sizeof(TA) && s[2] == 0) {
        const TB yv = *y;
        for (int64_t i = 0; i < n; ++i)
          o[i] = f(x[i], yv);
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(TB)) {
        const TA xv = *x;
        for (int64_t i = 0; i < n; ++i)
          o[i] = f(xv, y[i]);
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<TOut*>(p[0] + i * s[0]) = f(*reinterpret_cast<const TA*>(p[1] + i * s[1]),
                                                    *reinterpret_cast<const TB*>(p[2] + i * s[2]));
    }
  };
  for_each_run<3>({out, broadcast_to(a, out.shape, out.ndim), broadcast_to(b, out.shape, out.ndim)},
                  inner);
}

}  // namespace kiln::cpu
