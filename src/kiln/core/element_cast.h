// One element converted to another type as PyTorch converts it on x86.
//
// C++ leaves a floating value outside the target integer's range undefined.
// PyTorch's CPU kernels compile to cvttss2si/cvttsd2si, which give the most
// negative value of the 32-bit (targets of 4 bytes or less) or 64-bit result
// for NaN, the infinities and values out of range; a narrower target then
// keeps the low bits. element_cast does exactly that, defined for every input:
// 300.7f -> uint8 44, -1.5f -> uint8 255, 1e10f -> uint8 0, NaN -> int32 INT_MIN.
// Integers convert modulo 2^N (C++20), anything to bool is `!= 0`.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln {

template <typename To, typename From>
To element_cast(From v) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> &&
                !std::is_same_v<To, bool>) {
    using Wide = std::conditional_t<(sizeof(To) <= 4), int32_t, int64_t>;
    constexpr From kLow = From(std::numeric_limits<Wide>::min());  // -2^31 or -2^63, exact
    if (!(v >= kLow && v < -kLow)) return To(std::numeric_limits<Wide>::min());
    return To(Wide(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kiln
