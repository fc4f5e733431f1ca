#include "kiln/kernels/cpu/unary.h"

namespace kiln::cpu {

void logical_not(const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<bool, T>(out, in, [](T x) { return !(x != T(0)); });
  });
}

void classify(FloatClass which, const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (which == FloatClass::NaN) return unary_loop<bool, T>(out, in, [](T x) { return x != x; });
      if (which == FloatClass::Inf) {
        return unary_loop<bool, T>(out, in, [](T x) { return std::isinf(x); });
      }
      // x - x is 0 for finite x and NaN for NaN and the infinities.
      return unary_loop<bool, T>(out, in, [](T x) { return x - x == T(0); });
    }
    const bool finite = which == FloatClass::Finite;
    unary_loop<bool, T>(out, in, [finite](T) { return finite; });
  });
}

void copy_same(const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(out, in, [](T x) { return x; });
  });
}

}  // namespace kiln::cpu
