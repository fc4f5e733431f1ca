#include "kiln/kernels/cpu/unary.h"

namespace kiln::cpu {

void logical_not(const StridedView& out, const StridedView& in) {
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<bool, T>(out, in, [](T x) { return !(x != T(0)); });
  });
}

}  // namespace kiln::cpu
