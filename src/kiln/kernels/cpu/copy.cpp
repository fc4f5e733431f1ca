#include "kiln/kernels/cpu/copy.h"

#include <cstring>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/util/error.h"

namespace kiln::cpu {

void copy_convert(const StridedView& out, const StridedView& in) {
  visit_dtype(out.dtype, [&](auto out_tag) {
    using TOut = decltype(out_tag);
    visit_dtype(in.dtype, [&](auto in_tag) {
      using TIn = decltype(in_tag);
      unary_loop<TOut, TIn>(out, in, [](TIn v) { return static_cast<TOut>(v); });
    });
  });
}

void fill(const StridedView& out, Scalar value) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = value.to<T>();
    StridedView none = out;  // the input view is unused; any valid pointer will do
    unary_loop<T, T>(out, none, [v](T) { return v; });
  });
}

}  // namespace kiln::cpu
