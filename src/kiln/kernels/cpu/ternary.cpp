#include "kiln/kernels/cpu/ternary.h"

#include <array>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/unary.h"

namespace kiln::cpu {
namespace {

// out[i] = f(in[i], t1[i], t2[i]); contiguous runs as a plain indexed loop.
template <typename T, typename F>
void ternary_loop(const StridedView& out, const StridedView& in, const StridedView& t1,
                  const StridedView& t2, F f) {
  auto inner = [f](const std::array<char*, 4>& p, const int64_t* s, int64_t n) {
    constexpr int64_t e = sizeof(T);
    if (s[0] == e && s[1] == e && s[2] == e && s[3] == e) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T *x = reinterpret_cast<const T*>(p[1]), *y = reinterpret_cast<const T*>(p[2]),
              *z = reinterpret_cast<const T*>(p[3]);
      for (int64_t i = 0; i < n; ++i)
        o[i] = f(x[i], y[i], z[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<T*>(p[0] + i * s[0]) = f(*reinterpret_cast<const T*>(p[1] + i * s[1]),
                                                 *reinterpret_cast<const T*>(p[2] + i * s[2]),
                                                 *reinterpret_cast<const T*>(p[3] + i * s[3]));
    }
  };
  for_each_run<4>({out, broadcast_to(in, out.shape, out.ndim),
                   broadcast_to(t1, out.shape, out.ndim), broadcast_to(t2, out.shape, out.ndim)},
                  inner);
}

}  // namespace

// value * t1 first, then * t2, then + in: ATen's order, so the roundings
// are PyTorch's. An integer value is converted like PyTorch's Scalar (a
// fraction truncates; bound_as keeps an out-of-range one defined).
void addcmul(const StridedView& out, const StridedView& in, const StridedView& t1,
             const StridedView& t2, double value) {
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = bound_as<T>(value);
    ternary_loop<T>(out, in, t1, t2, [v](T x, T y, T z) { return T(x + v * y * z); });
  });
}

void addcdiv(const StridedView& out, const StridedView& in, const StridedView& t1,
             const StridedView& t2, double value) {
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = T(value);
    ternary_loop<T>(out, in, t1, t2, [v](T x, T y, T z) { return x + v * y / z; });
  });
}

}  // namespace kiln::cpu
