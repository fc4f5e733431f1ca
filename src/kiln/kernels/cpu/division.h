// The three ways of dividing that PyTorch (and Python) distinguish, one
// element at a time:
//
//   floor_divide(a, b) = floor(a / b)              -7 // 2 == -4
//   remainder(a, b)    = a - floor_divide(a, b) * b  (the sign of b)   -7 % 2 == 1
//   fmod(a, b)         = a - trunc(a / b) * b        (the sign of a, C's %)
//
// The floating versions follow ATen's formulas step for step, so the bits
// (signed zeros, infinities, NaN) are PyTorch's. The integer versions
// expect b != 0 (the kernel checks first: PyTorch raises
// ZeroDivisionError) and treat b == -1 apart, where C++'s / and % would
// overflow on the most negative value: a // -1 wraps to -a, as in PyTorch.
// For uint8, T(-1) is 255, an ordinary divisor.
#pragma once

#include <cmath>
#include <type_traits>

namespace kiln::cpu {

template <typename T>
T fmod_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
    }
    return T(a % b);
  }
}

// fmod moved onto b's side of zero when the signs differ.
template <typename T>
T remainder_of(T a, T b) {
  T mod = fmod_of(a, b);
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) mod = T(mod + b);
  return mod;
}

// ATen's div_floor_floating: (a - fmod(a, b)) / b is exact, unlike
// floor(a / b), whose quotient may round up to the next integer; a division
// by zero gives IEEE's a / b.
template <typename T>
T floor_divide_floating(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  if (div == T(0)) return std::copysign(T(0), a / b);
  T floored = std::floor(div);
  if (div - floored > T(0.5)) floored += T(1);
  return floored;
}

template <typename T>
T floor_divide_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return floor_divide_floating(a, b);
  } else {
    if constexpr (std::is_unsigned_v<T>) return T(a / b);
    using U = std::make_unsigned_t<T>;
    if (b == T(-1)) return T(U(0) - U(a));
    T quotient = T(a / b), rest = T(a % b);
    return (rest != T(0) && ((rest < T(0)) != (b < T(0)))) ? T(quotient - 1) : quotient;
  }
}

}  // namespace kiln::cpu
