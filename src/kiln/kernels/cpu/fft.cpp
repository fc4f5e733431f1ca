#include "kiln/kernels/cpu/fft.h"

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

using Complex = std::complex<double>;

bool is_power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// e^(-i pi num / den), with num reduced modulo 2 den first so that the angle
// stays exact for the large k^2 of Bluestein's chirp.
Complex unit(int64_t num, int64_t den) {
  const double angle = -std::numbers::pi * double(num % (2 * den)) / double(den);
  return {std::cos(angle), std::sin(angle)};
}

// An in-place radix-2 transform of a power-of-two size, forward (e^-) only:
// the inverse is conj(forward(conj(x))).
class Radix2 {
 public:
  explicit Radix2(int64_t m) : m_(m), twiddles_(size_t(m / 2)) {
    for (int64_t k = 0; k < m / 2; ++k)
      twiddles_[size_t(k)] = unit(2 * k, m);
  }

  int64_t size() const { return m_; }

  void forward(Complex* a) const {
    for (int64_t i = 1, j = 0; i < m_; ++i) {  // bit-reversed order
      int64_t bit = m_ >> 1;
      for (; j & bit; bit >>= 1)
        j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= m_; len <<= 1) {
      const int64_t half = len / 2, step = m_ / len;
      for (int64_t start = 0; start < m_; start += len) {
        for (int64_t j = 0; j < half; ++j) {
          const Complex u = a[start + j], v = a[start + j + half] * twiddles_[size_t(j * step)];
          a[start + j] = u + v;
          a[start + j + half] = u - v;
        }
      }
    }
  }

 private:
  int64_t m_;
  std::vector<Complex> twiddles_;
};

int64_t bluestein_size(int64_t n) {
  int64_t m = 1;
  while (m < 2 * n - 1)
    m <<= 1;
  return m;
}

// The unscaled transform of one length n, made once per kernel call.
// Bluestein: with w_k = e^(-i pi k^2 / n), X_k = w_k sum_j (x_j w_j)
// conj(w_(k-j)), a convolution, done as a product of radix-2 transforms.
class FftPlan {
 public:
  explicit FftPlan(int64_t n) : n_(n), radix2_(is_power_of_two(n) ? n : bluestein_size(n)) {
    if (is_power_of_two(n)) return;
    const int64_t m = radix2_.size();
    chirp_.resize(size_t(n));
    filter_.assign(size_t(m), Complex(0));
    for (int64_t k = 0; k < n; ++k) {
      chirp_[size_t(k)] = unit(k * k, n);
      filter_[size_t(k)] = std::conj(chirp_[size_t(k)]);
      if (k > 0) filter_[size_t(m - k)] = filter_[size_t(k)];
    }
    radix2_.forward(filter_.data());
  }

  // Scratch of this size lets run() allocate nothing.
  int64_t scratch_size() const { return chirp_.empty() ? 0 : radix2_.size(); }

  // In place over data[0, n): forward (e^-) or unscaled inverse (e^+).
  void run(Complex* data, bool inverse, Complex* scratch) const {
    if (inverse) conjugate(data, n_);
    if (chirp_.empty()) {
      radix2_.forward(data);
    } else {
      bluestein(data, scratch);
    }
    if (inverse) conjugate(data, n_);
  }

 private:
  static void conjugate(Complex* data, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      data[i] = std::conj(data[i]);
  }

  void bluestein(Complex* data, Complex* a) const {
    const int64_t m = radix2_.size();
    for (int64_t k = 0; k < m; ++k)
      a[k] = k < n_ ? data[k] * chirp_[size_t(k)] : Complex(0);
    radix2_.forward(a);
    for (int64_t k = 0; k < m; ++k)  // the product, conjugated for the inverse below
      a[k] = std::conj(a[k] * filter_[size_t(k)]);
    radix2_.forward(a);
    const double scale = 1.0 / double(m);
    for (int64_t k = 0; k < n_; ++k)
      data[k] = chirp_[size_t(k)] * std::conj(a[k]) * scale;
  }

  int64_t n_;
  Radix2 radix2_;
  std::vector<Complex> chirp_;   // empty for a power of two
  std::vector<Complex> filter_;  // the transform of the conjugate chirp
};

// Element offsets of line `line` in x and out: row-major over every dim but
// the transformed one and the last (the two views share those sizes).
void line_offsets(const StridedView& x, const StridedView& out, int axis, int64_t line,
                  int64_t& x_offset, int64_t& out_offset) {
  x_offset = out_offset = 0;
  for (int d = x.ndim - 2; d >= 0; --d) {
    if (d == axis) continue;
    const int64_t i = line % x.shape[d];
    line /= x.shape[d];
    x_offset += i * x.strides[d];
    out_offset += i * out.strides[d];
  }
}

template <typename T>
struct Line {
  const T* x;
  int64_t x_len, x_stride, x_part;  // part: the stride to the imaginary part
  bool x_complex;
  T* out;
  int64_t out_len, out_stride, out_part;
};

// The full spectrum of n bins a onesided one stands for: X_(n-k) = conj(X_k).
template <typename T>
void hermitian_fill(Complex* buf, const Line<T>& l, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const bool mirrored = k > n / 2;
    const int64_t source = mirrored ? n - k : k;
    Complex v = 0;
    if (source < l.x_len) {
      const T* p = l.x + source * l.x_stride;
      v = Complex(double(p[0]), double(p[l.x_part]));
    }
    if (k == 0 || 2 * k == n) v.imag(0);
    buf[k] = mirrored ? std::conj(v) : v;
  }
}

template <typename T>
void transform_line(const Line<T>& l, const FftPlan& plan, const DftParams& p, Complex* buf,
                    Complex* scratch) {
  const int64_t n = p.length;
  const bool to_real = p.inverse && p.onesided;
  if (to_real) {
    hermitian_fill(buf, l, n);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const T* v = l.x + j * l.x_stride;
      buf[j] = j >= l.x_len ? Complex(0)
                            : Complex(double(v[0]), l.x_complex ? double(v[l.x_part]) : 0.0);
    }
  }
  plan.run(buf, p.inverse, scratch);
  const double scale = p.inverse ? 1.0 / double(n) : 1.0;
  for (int64_t k = 0; k < l.out_len; ++k) {
    T* o = l.out + k * l.out_stride;
    o[0] = T(buf[k].real() * scale);
    if (!to_real) o[l.out_part] = T(buf[k].imag() * scale);
  }
}

template <typename T>
void dft_typed(const StridedView& out, const StridedView& x, const DftParams& p) {
  const int last = x.ndim - 1, axis = p.axis;
  int64_t lines = 1;
  for (int d = 0; d < last; ++d)
    lines *= d == axis ? 1 : x.shape[d];
  if (lines == 0 || out.shape[axis] == 0) return;
  const FftPlan plan(p.length);
  const int64_t chunk = 16, chunks = (lines + chunk - 1) / chunk;
  const bool split = chunks > 1 && lines * p.length > 32768;
  parallel_for(chunks, split, [&](int64_t c) {
    std::vector<Complex> buf(size_t(p.length)), scratch(size_t(plan.scratch_size()));
    for (int64_t line = c * chunk; line < std::min(lines, (c + 1) * chunk); ++line) {
      int64_t x_offset = 0, out_offset = 0;
      line_offsets(x, out, axis, line, x_offset, out_offset);
      const Line<T> l{x.ptr<T>() + x_offset, std::min(x.shape[axis], p.length),
                      x.strides[axis],       x.strides[last],
                      x.shape[last] == 2,    out.ptr<T>() + out_offset,
                      out.shape[axis],       out.strides[axis],
                      out.strides[last]};
      transform_line(l, plan, p, buf.data(), scratch.data());
    }
  });
}

}  // namespace

void dft(const StridedView& out, const StridedView& x, const DftParams& p) {
  KILN_ASSERT(x.ndim >= 2 && out.ndim == x.ndim && p.axis >= 0 && p.axis < x.ndim - 1,
              "dft kernel: bad views");
  KILN_ASSERT(p.length >= 1 && x.dtype == out.dtype, "dft kernel: bad length or dtypes");
  if (x.dtype == DType::Float64) return dft_typed<double>(out, x, p);
  KILN_ASSERT(x.dtype == DType::Float32, "dft kernel: float32 or float64 only");
  dft_typed<float>(out, x, p);
}

}  // namespace kiln::cpu
