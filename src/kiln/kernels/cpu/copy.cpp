#include "kiln/kernels/cpu/copy.h"

#include <algorithm>
#include <cstring>

#include "kiln/core/element_cast.h"
#include "kiln/kernels/cpu/loops.h"

namespace kiln::cpu {

void copy_convert(const StridedView& out, const StridedView& in) {
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
