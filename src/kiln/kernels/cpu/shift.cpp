#include "kiln/kernels/cpu/shift.h"

#include <climits>
#include <type_traits>

#include "kiln/kernels/cpu/loops.h"

namespace kiln::cpu {
namespace {

// ATen's lshift_wrapper: a count below 0 or at least the width shifts every
// bit out. The shift runs on the unsigned type, so a signed value's bits
// move as they are (C++20 defines the conversion back).
template <typename T>
T shift_left_of(T a, T b) {
  constexpr int kWidth = int(sizeof(T) * CHAR_BIT);
  using U = std::make_unsigned_t<T>;
  if (std::make_signed_t<T>(b) < 0 || int64_t(b) >= kWidth) return T(0);
  return T(U(U(a) << int(b)));
}

// ATen's rshift_wrapper: an out-of-range count keeps only the sign (all
// ones for a negative signed value, else 0); >> of a signed value is
// arithmetic in C++20.
template <typename T>
T shift_right_of(T a, T b) {
  constexpr int kMaxShift = int(sizeof(T) * CHAR_BIT) - int(std::is_signed_v<T>);
  if (std::make_signed_t<T>(b) < 0 || int64_t(b) >= kMaxShift) return T(a >> kMaxShift);
  return T(a >> int(b));
}

}  // namespace

void shift(bool left, const StridedView& out, const StridedView& a, const StridedView& b) {
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      if (left)
        return binary_loop<T, T, T>(out, a, b, [](T x, T y) { return shift_left_of(x, y); });
      binary_loop<T, T, T>(out, a, b, [](T x, T y) { return shift_right_of(x, y); });
    }
  });
}

}  // namespace kiln::cpu
