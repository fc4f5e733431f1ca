#include "kiln/kernels/cpu/softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/kernels/cpu/reduce_geometry.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

// One row: n elements, `in_stride` and `out_stride` apart. A NaN anywhere
// makes the max NaN and so the whole row NaN, as in PyTorch.
template <typename T>
void softmax_row(T* y, const T* x, int64_t n, int64_t in_stride, int64_t out_stride, bool log) {
  T row_max = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i * in_stride];
    if (v > row_max || std::isnan(v)) row_max = v;
    if (std::isnan(row_max)) break;
  }
  double total = 0.0;
  if (log) {
    for (int64_t i = 0; i < n; ++i) {
      total += double(std::exp(x[i * in_stride] - row_max));
    }
    // (x - max) first: it is exact near the max, where folding max and
    // log(total) into one shift would round away the small result.
    const T log_total = T(std::log(total));
    for (int64_t i = 0; i < n; ++i) {
      y[i * out_stride] = (x[i * in_stride] - row_max) - log_total;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::exp(x[i * in_stride] - row_max);
    y[i * out_stride] = e;
    total += double(e);
  }
  const T scale = T(1.0 / total);
  for (int64_t i = 0; i < n; ++i)
    y[i * out_stride] *= scale;
}

// softmax_row for a dense float32 row: the max, exp(x - max) (vec_math.h's
// exp of a non-positive argument, 1 ulp, eight at a time) and their sum in
// double (four lanes, then the tail), y = e * (1 / sum) as the scalar row. About 8x
// the scalar row's speed (libm's expf per element and a serial double sum
// bound it): a transformer's attention weights, [heads, L, S] rows of S.
void softmax_row_dense_f32(float* y, const float* x, int64_t n) {
  const int64_t vec_end = n / 8 * 8;
  __m256 max8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan8 = _mm256_setzero_ps();
  for (int64_t i = 0; i < vec_end; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    max8 = _mm256_max_ps(max8, v);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max8);
  float row_max = -std::numeric_limits<float>::infinity();
  for (float lane : lanes)
    row_max = std::max(row_max, lane);
  bool has_nan = _mm256_movemask_ps(nan8) != 0;
  for (int64_t i = vec_end; i < n; ++i) {
    has_nan = has_nan || std::isnan(x[i]);
    row_max = std::max(row_max, x[i]);
  }
  if (has_nan) row_max = std::numeric_limits<float>::quiet_NaN();  // the whole row NaN
  const __m256 shift = _mm256_set1_ps(row_max);
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < vec_end; i += 8) {
    const __m256 e = exp_nonpositive_f32x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
    _mm256_storeu_ps(y + i, e);
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double halves[4];
  _mm256_store_pd(halves, _mm256_add_pd(sum_lo, sum_hi));
  double total = (halves[0] + halves[1]) + (halves[2] + halves[3]);
  for (int64_t i = vec_end; i < n; ++i) {
    y[i] = exp_nonpositive_f32(x[i] - row_max);
    total += double(y[i]);
  }
  const float inverse = float(1.0 / total);
  const __m256 scale = _mm256_set1_ps(inverse);
  for (int64_t i = 0; i < vec_end; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), scale));
  for (int64_t i = vec_end; i < n; ++i)
    y[i] *= inverse;
}

// Softmax along a dim that is not the last, over float32 slabs of n rows
// of `width` contiguous columns: eight neighbouring rows (columns of the
// slab) at once, one per lane, each vector load reading one element of
// eight rows (YOLOv8's box head, a softmax over 16 bins of [1, 16, 4,
// 2100] along dim 1: rows 8400 floats apart, which the row-at-a-time loop
// walked with a cache miss per element and libm's expf, 0.95 ms; now 0.09,
// PyTorch 0.11). Each lane does what softmax_row_dense_f32 does for a row
// (the max, NaN if any element is; exp(x - max) with vec_math.h's exp; the
// sum in double; y = e * float(1 / sum)) but sums in row order. Columns
// left over (width % 8) take the strided row loop.
void softmax_columns_f32(float* y, const float* x, int64_t n, int64_t in_stride, int64_t out_stride,
                         int64_t width) {
  const int64_t vec_end = width / 8 * 8;
  const __m256 nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
  for (int64_t j = 0; j < vec_end; j += 8) {
    __m256 max8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    __m256 nan8 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; ++i) {
      const __m256 v = _mm256_loadu_ps(x + i * in_stride + j);
      max8 = _mm256_max_ps(max8, v);
      nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    max8 = _mm256_blendv_ps(max8, nan, nan8);
    __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
    for (int64_t i = 0; i < n; ++i) {
      const __m256 e =
          exp_nonpositive_f32x8(_mm256_sub_ps(_mm256_loadu_ps(x + i * in_stride + j), max8));
      _mm256_storeu_ps(y + i * out_stride + j, e);
      sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
      sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const __m256d one = _mm256_set1_pd(1.0);
    const __m256 scale = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(one, sum_hi)),
                                         _mm256_cvtpd_ps(_mm256_div_pd(one, sum_lo)));
    for (int64_t i = 0; i < n; ++i) {
      float* row = y + i * out_stride + j;
      _mm256_storeu_ps(row, _mm256_mul_ps(_mm256_loadu_ps(row), scale));
    }
  }
  for (int64_t j = vec_end; j < width; ++j)
    softmax_row(y + j, x + j, n, in_stride, out_stride, false);
}

// float32 softmax along `dim` where the input's rows are not contiguous but
// another dim of it is, at least 8 long: softmax_columns_f32 over every
// slab (each position of the other dims), whatever their strides. A dim
// that is not the last, with the last contiguous (YOLOv8 transposes before
// its softmax), writes straight into `out` when `out` is contiguous along
// that dim too; otherwise (BERT exported from TensorFlow takes the softmax
// of transposed scores, the last dim of a [1, 8, 32, 32] view whose rows
// are 32 floats apart: 80 us through the strided row loop, now 3) a slab
// goes through a buffer in the input's layout. False: not taken.
bool softmax_down_columns(const StridedView& out, const StridedView& in, int dim) {
  if (in.dtype != DType::Float32 || in.ndim < 2 || in.strides[dim] == 1) return false;
  int wide = -1;  // the contiguous dim the lanes run along, the last such
  for (int d = in.ndim - 1; d >= 0 && wide < 0; --d) {
    if (d != dim && in.strides[d] == 1 && in.shape[d] >= 8) wide = d;
  }
  if (wide < 0) return false;
  if (in.numel() == 0) return true;
  const int64_t n = in.shape[dim], width = in.shape[wide];
  const bool direct = out.strides[wide] == 1;
  std::vector<float> slab(direct ? 0 : size_t(n * width));
  int64_t index[kMaxDims] = {};
  for (;;) {
    int64_t in_offset = 0, out_offset = 0;
    for (int d = 0; d < in.ndim; ++d) {
      in_offset += index[d] * in.strides[d];
      out_offset += index[d] * out.strides[d];
    }
    const float* x = in.ptr<const float>() + in_offset;
    float* y = out.ptr<float>() + out_offset;
    if (direct) {
      softmax_columns_f32(y, x, n, in.strides[dim], out.strides[dim], width);
    } else {
      softmax_columns_f32(slab.data(), x, n, in.strides[dim], width, width);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < width; ++j)
          y[i * out.strides[dim] + j * out.strides[wide]] = slab[size_t(i * width + j)];
      }
    }
    int d = in.ndim - 1;  // the next slab: an odometer over the dims but `dim` and `wide`
    for (; d >= 0; --d) {
      if (d == dim || d == wide) continue;
      if (++index[d] < in.shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return true;
  }
}

}  // namespace

void softmax(const StridedView& out, const StridedView& in, int dim, bool log) {
  // A row is a reduction over `dim` whose result is written back along it, so
  // the reduction geometry finds the rows; its "output" is `out` itself.
  const DimMask mask = in.ndim == 0 ? 0 : DimMask(1) << dim;
  const ReduceGeometry g = make_reduce_geometry(out, in, mask);
  const int64_t n = g.reduce_len;
  const int64_t in_stride = g.red_ndim == 0 ? 1 : g.red_in[0];
  const int64_t out_stride = in.ndim == 0 ? 1 : out.strides[dim];
  if (n == 0) return;
  if (!log && softmax_down_columns(out, in, dim)) return;
  visit_floating(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = in.ptr<const T>();
    T* dst = out.ptr<T>();
    for_each_output(g, [&](int64_t in_offset, int64_t out_offset) {
      if constexpr (std::is_same_v<T, float>) {
        if (!log && in_stride == 1 && out_stride == 1) {
          softmax_row_dense_f32(dst + out_offset, src + in_offset, n);
          return;
        }
      }
      softmax_row(dst + out_offset, src + in_offset, n, in_stride, out_stride, log);
    });
  });
}

}  // namespace kiln::cpu
