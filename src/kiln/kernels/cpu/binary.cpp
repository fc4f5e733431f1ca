#include "kiln/kernels/cpu/binary.h"

#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <type_traits>

#include "kiln/kernels/cpu/division.h"
#include "kiln/kernels/cpu/loops.h"

namespace kiln::cpu {
namespace {

// Integer power by squaring, in unsigned arithmetic so overflow wraps
// instead of being undefined. A negative exponent gives what PyTorch gives
// for integer tensors: 1 and -1 keep their magnitude, anything else is 0.
template <typename T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = U(base);
  for (T e = exp; e > 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return T(result);
}

template <typename T>
T pow_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    return int_pow(a, b);
  }
}

// NaN wins: a NaN `a` is picked by `a != a`, a NaN `b` by the failed
// comparison. One select, so the loop still vectorizes.
template <typename T>
T maximum_of(T a, T b) {
  return (a != a || a > b) ? a : b;
}
template <typename T>
T minimum_of(T a, T b) {
  return (a != a || a < b) ? a : b;
}

// Whether any element of v is 0. Integer division ops look before they
// write, so a zero divisor leaves the output (maybe the input, in place)
// untouched and the error comes from this thread, not from inside a
// parallel loop.
template <typename T>
bool has_zero(const StridedView& v) {
  std::atomic<bool> found{false};
  auto inner = [&found](const std::array<char*, 1>& p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (*reinterpret_cast<const T*>(p[0] + i * s[0]) == T(0)) {
        found.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  for_each_run<1>({v}, inner);
  return found.load();
}

const char* division_name(BinaryOp op) {
  if (op == BinaryOp::Remainder) return "remainder";
  if (op == BinaryOp::Fmod) return "fmod";
  return "floor_divide";
}

// remainder, fmod, floor_divide (never bool: inference rejects it).
template <typename T>
void division(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    KILN_CHECK(!has_zero<T>(b), division_name(op), ": ZeroDivisionError (an integer divisor is 0)");
  }
  auto run = [&](auto f) { binary_loop<T, T, T>(out, a, b, f); };
  if constexpr (!std::is_same_v<T, bool>) {
    if (op == BinaryOp::Remainder) return run([](T x, T y) { return remainder_of(x, y); });
    if (op == BinaryOp::Fmod) return run([](T x, T y) { return fmod_of(x, y); });
    run([](T x, T y) { return floor_divide_of(x, y); });
  }
}

// &, |, ^ on integers and bools (inference rejects floating operands).
template <typename T>
void bitwise(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b) {
  if constexpr (std::is_integral_v<T>) {
    auto run = [&](auto f) {
      binary_loop<T, T, T>(out, a, b, [f](T x, T y) { return T(f(x, y)); });
    };
    if (op == BinaryOp::BitwiseAnd) return run([](T x, T y) { return x & y; });
    if (op == BinaryOp::BitwiseOr) return run([](T x, T y) { return x | y; });
    run([](T x, T y) { return x ^ y; });
  }
}

// Whether v is one element, repeated or not (stride 0), equal to `value`.
template <typename T>
bool is_single(const StridedView& v, T value) {
  if (!v.data || v.numel() == 0) return false;
  for (int d = 0; d < v.ndim; ++d) {
    if (v.shape[d] != 1 && v.strides[d] != 0) return false;
  }
  return *v.ptr<const T>() == value;
}

// Bool arithmetic follows PyTorch: add is `or`, mul is `and` (bitwise on
// 0/1 bytes, which vectorizes where || and && do not). Sub and pow of
// bools are rejected by inference; div never sees bool (it computes in float).
template <typename T>
void arithmetic(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b) {
  auto run = [&](auto f) { binary_loop<T, T, T>(out, a, b, [f](T x, T y) { return T(f(x, y)); }); };
  switch (op) {
    case BinaryOp::Add:
      if constexpr (std::is_same_v<T, bool>) return run([](T x, T y) { return x | y; });
      return run([](T x, T y) { return x + y; });
    case BinaryOp::Sub:
      return run([](T x, T y) { return x - y; });
    case BinaryOp::Mul:
      if constexpr (std::is_same_v<T, bool>) return run([](T x, T y) { return x & y; });
      return run([](T x, T y) { return x * y; });
    case BinaryOp::Div:
      return run([](T x, T y) { return x / y; });
    case BinaryOp::Pow:
      // A square (ONNX Pow by a constant 2: a melspectrogram's |STFT|^2)
      // as x * x: x^2 rounded once, where pow may be an ulp off, and ten
      // times faster. PyTorch and ONNX Runtime special-case it too.
      if constexpr (std::is_floating_point_v<T>) {
        if (is_single(b, T(2))) return run([](T x, T) { return x * x; });
      }
      if constexpr (!std::is_same_v<T, bool>) return run([](T x, T y) { return pow_of(x, y); });
      return;
    case BinaryOp::Maximum:
      return run([](T x, T y) { return maximum_of(x, y); });
    case BinaryOp::Minimum:
      return run([](T x, T y) { return minimum_of(x, y); });
    default:
      return;
  }
}

template <typename T>
void comparison(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b) {
  auto run = [&](auto f) { binary_loop<bool, T, T>(out, a, b, f); };
  switch (op) {
    case BinaryOp::Eq:
      return run([](T x, T y) { return x == y; });
    case BinaryOp::Ne:
      return run([](T x, T y) { return x != y; });
    case BinaryOp::Lt:
      return run([](T x, T y) { return x < y; });
    case BinaryOp::Le:
      return run([](T x, T y) { return x <= y; });
    case BinaryOp::Gt:
      return run([](T x, T y) { return x > y; });
    case BinaryOp::Ge:
      return run([](T x, T y) { return x >= y; });
    default:
      return;
  }
}

bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::Eq;
}
bool is_division(BinaryOp op) {
  return op == BinaryOp::Remainder || op == BinaryOp::Fmod || op == BinaryOp::FloorDivide;
}
bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor;
}

// out[i] = c[i] ? x[i] : y[i], where x or y may be one repeated value.
void where_f32(float* out, const bool* c, const float* x, bool x_dense, const float* y,
               bool y_dense, int64_t n) {
  int64_t i = 0;
  const __m256 x_one = _mm256_set1_ps(*x), y_one = _mm256_set1_ps(*y);
  for (; i + 8 <= n; i += 8) {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + i));
    __m256i lanes = _mm256_cvtepu8_epi32(bytes);
    __m256 take_x = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lanes, _mm256_setzero_si256()));
    __m256 xv = x_dense ? _mm256_loadu_ps(x + i) : x_one;
    __m256 yv = y_dense ? _mm256_loadu_ps(y + i) : y_one;
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(yv, xv, take_x));
  }
  for (; i < n; ++i)
    out[i] = c[i] ? x[x_dense ? i : 0] : y[y_dense ? i : 0];
}

}  // namespace

void binary(BinaryOp op, const StridedView& out, const StridedView& a, const StridedView& b) {
  visit_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (is_comparison(op)) return comparison<T>(op, out, a, b);
    if (is_division(op)) return division<T>(op, out, a, b);
    if (is_bitwise(op)) return bitwise<T>(op, out, a, b);
    arithmetic<T>(op, out, a, b);
  });
}

void where(const StridedView& out, const StridedView& cond, const StridedView& a,
           const StridedView& b) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto inner = [](const std::array<char*, 4>& p, const int64_t* s, int64_t n) {
      // Dense float32 runs (a relu backward's where(x <= 0, 0, g)) select
      // 8 lanes at a time; the loop below branches per element on data a
      // branch predictor cannot guess, and GCC does not vectorize it.
      if constexpr (std::is_same_v<T, float>) {
        if (s[0] == sizeof(float) && s[1] == sizeof(bool) && (s[2] == 0 || s[2] == sizeof(float)) &&
            (s[3] == 0 || s[3] == sizeof(float))) {
          return where_f32(reinterpret_cast<float*>(p[0]), reinterpret_cast<const bool*>(p[1]),
                           reinterpret_cast<const float*>(p[2]), s[2] != 0,
                           reinterpret_cast<const float*>(p[3]), s[3] != 0, n);
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
        const char* src = c ? p[2] + i * s[2] : p[3] + i * s[3];
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(src);
      }
    };
    for_each_run<4>({out, broadcast_to(cond, out.shape, out.ndim),
                     broadcast_to(a, out.shape, out.ndim), broadcast_to(b, out.shape, out.ndim)},
                    inner);
  });
}

}  // namespace kiln::cpu
