#include "kiln/kernels/cpu/copy.h"

#include <algorithm>
#include <cstring>

#include "kiln/core/element_cast.h"
#include "kiln/kernels/cpu/loops.h"

namespace kiln::cpu {

namespace {

// Whether `a` and `b` are the same elements in the same order: copying one
// onto the other changes nothing (a loop's pass-through carried value,
// control_flow_exec.cpp, is its own next value).
bool same_view(const StridedView& a, const StridedView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] > 1 && a.strides[d] != b.strides[d])) return false;
  return true;
}

}  // namespace

void copy_convert(const StridedView& out, const StridedView& in) {
  if (same_view(out, in) || copy_image_transposed_f32(out, in)) return;
  visit_dtype(out.dtype, [&](auto out_tag) {
    using TOut = decltype(out_tag);
    visit_dtype(in.dtype, [&](auto in_tag) {
      using TIn = decltype(in_tag);
      unary_loop<TOut, TIn>(out, in, [](TIn v) { return element_cast<TOut>(v); });
    });
  });
}

void fill(const StridedView& out, Scalar value) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = value.to<T>();
    // Writes only: the output's old contents may be uninitialized memory.
    for_each_run<1>({out}, [v](const std::array<char*, 1>& p, const int64_t* s, int64_t n) {
      if (s[0] == int64_t(sizeof(T))) {
        std::fill_n(reinterpret_cast<T*>(p[0]), n, v);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
    });
  });
}

}  // namespace kiln::cpu
