#include "kiln/kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

constexpr int kMR = 6;           // query rows per tile (6 x 2 accumulators, as the GEMM's)
constexpr int kNR = 16;          // keys per packed panel, Ev columns per output chunk
constexpr int64_t kBlock = 256;  // keys per block of scores
constexpr int64_t kMinSplitWork = int64_t(1) << 18;  // multiply-adds worth a second thread

// Where batch b's matrix starts in a view whose leading dims (all but the
// last two) are walked in row-major order.
int64_t batch_offset(const StridedView& view, int64_t b) {
  int64_t offset = 0;
  for (int d = view.ndim - 3; d >= 0; --d) {
    offset += (b % view.shape[d]) * view.strides[d];
    b /= view.shape[d];
  }
  return offset;
}

int64_t row_stride(const StridedView& view) {
  return view.strides[view.ndim - 2];
}

// One batch's mask: bool (keep where true) or additive of type T.
template <typename T>
struct MaskRows {
  const void* data = nullptr;
  bool is_bool = false;
  int64_t row_stride = 0, col_stride = 0;

  bool present() const { return data != nullptr; }
  // The score of query i, key j, after the mask.
  T apply(T score, int64_t i, int64_t j) const {
    const int64_t at = i * row_stride + j * col_stride;
    if (is_bool) {
      return static_cast<const bool*>(data)[at] ? score : -std::numeric_limits<T>::infinity();
    }
    return score + static_cast<const T*>(data)[at];
  }
};

template <typename T>
MaskRows<T> mask_rows(const StridedView& mask, int64_t b) {
  if (!mask.data) return {};
  const size_t item = mask.dtype == DType::Bool ? sizeof(bool) : sizeof(T);
  const char* base = static_cast<const char*>(mask.data) + batch_offset(mask, b) * int64_t(item);
  return {base, mask.dtype == DType::Bool, mask.strides[mask.ndim - 2],
          mask.strides[mask.ndim - 1]};
}

// Scores s[0, n) of query i against keys j0.. are scaled, masked and
// causally cut; returns their max (NaN once any is NaN).
template <typename T>
T finish_scores(T* s, int64_t n, int64_t i, int64_t j0, T scale, const MaskRows<T>& mask,
                bool causal) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T row_max = kNegInf;
  for (int64_t j = 0; j < n; ++j) {
    T x = s[j] * scale;
    if (mask.present()) x = mask.apply(x, i, j0 + j);
    if (causal && j0 + j > i) x = kNegInf;
    s[j] = x;
    if (x > row_max || std::isnan(x)) row_max = std::isnan(row_max) ? row_max : x;
  }
  return row_max;
}

// The online softmax of one row for one block: the new running max, the
// factor the old sum and output are scaled by, and the block's weights
// (in place of the scores). A row that has seen only masked keys keeps
// max -inf and gets weights 0.
template <typename T>
struct BlockUpdate {
  T new_max, rescale;
};

template <typename T>
BlockUpdate<T> running_max(T old_max, T block_max) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const T new_max = std::isnan(block_max) ? block_max : std::max(old_max, block_max);
  if (new_max == kNegInf) return {new_max, T(1)};
  return {new_max, std::exp(old_max - new_max)};
}

// ---- the scalar reference (float64; float32 with other strides)

template <typename T>
void reference_batch(const StridedView& out, const StridedView& q, const StridedView& k,
                     const StridedView& v, const StridedView& mask, T scale, bool causal,
                     int64_t b) {
  const int64_t L = q.shape[q.ndim - 2], E = q.shape[q.ndim - 1];
  const int64_t S = k.shape[k.ndim - 2], Ev = v.shape[v.ndim - 1];
  const T* qb = q.ptr<const T>() + batch_offset(q, b);
  const T* kb = k.ptr<const T>() + batch_offset(k, b);
  const T* vb = v.ptr<const T>() + batch_offset(v, b);
  T* ob = out.ptr<T>() + batch_offset(out, b);
  const int64_t qe = q.strides[q.ndim - 1], ke = k.strides[k.ndim - 1];
  const int64_t ve = v.strides[v.ndim - 1], oe = out.strides[out.ndim - 1];
  const MaskRows<T> m = mask_rows<T>(mask, b);
  std::vector<T> s(static_cast<size_t>(std::min(kBlock, std::max<int64_t>(S, 1))));
  std::vector<T> o(static_cast<size_t>(Ev));
  for (int64_t i = 0; i < L; ++i) {
    T row_max = -std::numeric_limits<T>::infinity(), total = 0;
    std::fill(o.begin(), o.end(), T(0));
    for (int64_t j0 = 0; j0 < S; j0 += kBlock) {
      const int64_t n = std::min(kBlock, S - j0);
      for (int64_t j = 0; j < n; ++j) {
        T dot = 0;
        for (int64_t e = 0; e < E; ++e)
          dot += qb[i * row_stride(q) + e * qe] * kb[(j0 + j) * row_stride(k) + e * ke];
        s[size_t(j)] = dot;
      }
      const BlockUpdate<T> u =
          running_max(row_max, finish_scores(s.data(), n, i, j0, scale, m, causal));
      row_max = u.new_max;
      total *= u.rescale;
      for (T& value : o)
        value *= u.rescale;
      if (row_max == -std::numeric_limits<T>::infinity()) continue;
      for (int64_t j = 0; j < n; ++j) {
        const T p = std::exp(s[size_t(j)] - row_max);
        total += p;
        for (int64_t c = 0; c < Ev; ++c)
          o[size_t(c)] += p * vb[(j0 + j) * row_stride(v) + c * ve];
      }
    }
    for (int64_t c = 0; c < Ev; ++c)
      ob[i * row_stride(out) + c * oe] = total == T(0) ? T(0) : o[size_t(c)] / total;
  }
}

// ---- float32, AVX2

// Keys of batch b as kᵀ in panels of 16: panel p holds [E][16], key 16p + jj
// at column jj (zeros past S).
void pack_keys(const float* kb, int64_t ldk, int64_t S, int64_t E, float* panels) {
  for (int64_t p = 0; p * kNR < S; ++p) {
    float* dst = panels + p * E * kNR;
    for (int64_t jj = 0; jj < kNR; ++jj) {
      const int64_t j = p * kNR + jj;
      if (j >= S) {
        for (int64_t e = 0; e < E; ++e)
          dst[e * kNR + jj] = 0.0f;
        continue;
      }
      const float* row = kb + j * ldk;
      for (int64_t e = 0; e < E; ++e)
        dst[e * kNR + jj] = row[e];
    }
  }
}

// s[MR][16] = q[MR][E] · panel[E][16]. Every loop over the accumulators
// is unrolled, as in gemm_f32.cpp (else GCC keeps them on the stack).
template <int MR>
void score_tile(const float* q, int64_t ldq, int64_t E, const float* panel, float* s, int64_t lds) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t e = 0; e < E; ++e) {
    const __m256 b0 = _mm256_loadu_ps(panel + e * kNR), b1 = _mm256_loadu_ps(panel + e * kNR + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(q + i * ldq + e);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(s + i * lds, acc[i][0]);
    _mm256_storeu_ps(s + i * lds + 8, acc[i][1]);
  }
}

// Lanes [0, count) of a vector load (count in 0..8).
__m256i lane_mask(int64_t count) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(count, 0, 8))), index);
}

// o[MR][c0 .. c0 + cols) = o · rescale + p[MR][n] · v[n][c0 .. c0 + cols),
// cols <= 16; o is this tile's own buffer (16 columns always there).
template <int MR>
void weighted_sum_tile(const float* p, int64_t ldp, int64_t n, const float* v, int64_t ldv,
                       int64_t c0, int64_t cols, float* o, int64_t ldo, const float* rescale) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m256 r = _mm256_set1_ps(rescale[i]);
    acc[i][0] = _mm256_mul_ps(_mm256_loadu_ps(o + i * ldo + c0), r);
    acc[i][1] = _mm256_mul_ps(_mm256_loadu_ps(o + i * ldo + c0 + 8), r);
  }
  const bool full = cols == kNR;
  const __m256i lo = lane_mask(cols), hi = lane_mask(cols - 8);
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * ldv + c0;
    const __m256 b0 = full ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, lo);
    const __m256 b1 = full ? _mm256_loadu_ps(row + 8) : _mm256_maskload_ps(row + 8, hi);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(p + i * ldp + j);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(o + i * ldo + c0, acc[i][0]);
    _mm256_storeu_ps(o + i * ldo + c0 + 8, acc[i][1]);
  }
}

// s[0, n) -> exp(s - row_max) in place; returns their sum.
float exponentiate(float* s, int64_t n, float row_max) {
  const __m256 shift = _mm256_set1_ps(row_max);
  __m256 sum = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_nonpositive_f32x8(_mm256_sub_ps(_mm256_loadu_ps(s + j), shift));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; j < n; ++j) {
    s[j] = exp_nonpositive_f32(s[j] - row_max);
    total += s[j];
  }
  return total;
}

// finish_scores for float32, eight at a time where the mask allows it (none,
// or additive with contiguous keys); the causal cut fills the keys past
// query i with -inf instead of testing each. Same values as finish_scores.
float finish_scores_f32(float* s, int64_t n, int64_t i, int64_t j0, float scale,
                        const MaskRows<float>& mask, bool causal) {
  if (mask.present() && (mask.is_bool || mask.col_stride != 1))
    return finish_scores(s, n, i, j0, scale, mask, causal);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t seen = causal ? std::clamp<int64_t>(i - j0 + 1, 0, n) : n;
  const float* added =
      mask.present() ? static_cast<const float*>(mask.data) + i * mask.row_stride + j0 : nullptr;
  const __m256 scale8 = _mm256_set1_ps(scale);
  __m256 max8 = _mm256_set1_ps(kNegInf), nan8 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= seen; j += 8) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), scale8);
    if (added) x = _mm256_add_ps(x, _mm256_loadu_ps(added + j));
    _mm256_storeu_ps(s + j, x);
    max8 = _mm256_max_ps(max8, x);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max8);
  float row_max = kNegInf;
  for (float lane : lanes)
    row_max = std::max(row_max, lane);
  bool has_nan = _mm256_movemask_ps(nan8) != 0;
  for (; j < seen; ++j) {
    s[j] = s[j] * scale;
    if (added) s[j] = s[j] + added[j];
    has_nan = has_nan || std::isnan(s[j]);
    row_max = std::max(row_max, s[j]);
  }
  std::fill(s + seen, s + n, kNegInf);
  return has_nan ? std::numeric_limits<float>::quiet_NaN() : row_max;
}

// Per-thread buffers of the float32 kernel.
struct Scratch {
  std::vector<float> keys, scores, acc;
  void fit(int64_t S, int64_t E, int64_t Ev) {
    keys.resize(size_t((S + kNR - 1) / kNR * E * kNR));
    scores.resize(size_t(kMR * kBlock));
    acc.resize(size_t(kMR * ((Ev + kNR - 1) / kNR * kNR)));
  }
};

struct F32Batch {
  const float *q, *k, *v;
  float* out;
  int64_t ldq, ldk, ldv, ldo, L, S, E, Ev;
  MaskRows<float> mask;
  float scale;
  bool causal;
};

// Query rows [i0, i0 + MR) of one batch, every key block.
template <int MR>
void query_tile(const F32Batch& a, int64_t i0, Scratch& scratch) {
  const int64_t ldo_acc = (a.Ev + kNR - 1) / kNR * kNR;
  float* acc = scratch.acc.data();
  float* s = scratch.scores.data();
  std::fill(acc, acc + MR * ldo_acc, 0.0f);
  float row_max[MR], total[MR], rescale[MR];
  std::fill(row_max, row_max + MR, -std::numeric_limits<float>::infinity());
  std::fill(total, total + MR, 0.0f);
  for (int64_t j0 = 0; j0 < a.S; j0 += kBlock) {
    const int64_t n = std::min(kBlock, a.S - j0);
    for (int64_t p = 0; p * kNR < n; ++p) {
      const float* panel = scratch.keys.data() + (j0 / kNR + p) * a.E * kNR;
      score_tile<MR>(a.q + i0 * a.ldq, a.ldq, a.E, panel, s + p * kNR, kBlock);
    }
    for (int i = 0; i < MR; ++i) {
      float* si = s + i * kBlock;
      const float block_max = finish_scores_f32(si, n, i0 + i, j0, a.scale, a.mask, a.causal);
      const BlockUpdate<float> u = running_max(row_max[i], block_max);
      row_max[i] = u.new_max;
      rescale[i] = u.rescale;
      if (u.new_max == -std::numeric_limits<float>::infinity()) {
        std::fill(si, si + n, 0.0f);
        continue;
      }
      total[i] = total[i] * u.rescale + exponentiate(si, n, u.new_max);
    }
    for (int64_t c0 = 0; c0 < a.Ev; c0 += kNR) {
      weighted_sum_tile<MR>(s, kBlock, n, a.v + j0 * a.ldv, a.ldv, c0,
                            std::min<int64_t>(kNR, a.Ev - c0), acc, ldo_acc, rescale);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* row = a.out + (i0 + i) * a.ldo;
    const float* from = acc + i * ldo_acc;
    const __m256 divisor = _mm256_set1_ps(total[i]);
    const bool sees_nothing = total[i] == 0.0f;
    int64_t c = 0;
    for (; c + 8 <= a.Ev; c += 8) {
      const __m256 v = _mm256_div_ps(_mm256_loadu_ps(from + c), divisor);
      _mm256_storeu_ps(row + c, sees_nothing ? _mm256_setzero_ps() : v);
    }
    for (; c < a.Ev; ++c)
      row[c] = sees_nothing ? 0.0f : from[c] / total[i];
  }
}

void f32_batch(const F32Batch& a, Scratch& scratch) {
  scratch.fit(a.S, a.E, a.Ev);
  pack_keys(a.k, a.ldk, a.S, a.E, scratch.keys.data());
  using Tile = void (*)(const F32Batch&, int64_t, Scratch&);
  static constexpr Tile kTile[kMR + 1] = {nullptr,       query_tile<1>, query_tile<2>,
                                          query_tile<3>, query_tile<4>, query_tile<5>,
                                          query_tile<6>};
  for (int64_t i0 = 0; i0 < a.L; i0 += kMR)
    kTile[std::min<int64_t>(kMR, a.L - i0)](a, i0, scratch);
}

bool fast_path(const StridedView& out, const StridedView& q, const StridedView& k,
               const StridedView& v) {
  if (q.dtype != DType::Float32) return false;
  for (const StridedView* view : {&out, &q, &k, &v})
    if (view->strides[view->ndim - 1] != 1 && view->shape[view->ndim - 1] > 1) return false;
  return true;
}

}  // namespace

void scaled_dot_product_attention(const StridedView& out, const StridedView& q,
                                  const StridedView& k, const StridedView& v,
                                  const StridedView& mask, double scale, bool causal) {
  const int64_t L = q.shape[q.ndim - 2], E = q.shape[q.ndim - 1];
  const int64_t S = k.shape[k.ndim - 2], Ev = v.shape[v.ndim - 1];
  int64_t batch = 1;
  for (int d = 0; d < q.ndim - 2; ++d)
    batch *= q.shape[d];
  if (batch == 0 || L == 0 || Ev == 0) return;
  const bool split = max_threads() > 1 && batch > 1 && batch * L * S * (E + Ev) >= kMinSplitWork;
  if (!fast_path(out, q, k, v)) {
    visit_floating(q.dtype, [&](auto tag) {
      using T = decltype(tag);
      parallel_for(batch, split,
                   [&](int64_t b) { reference_batch<T>(out, q, k, v, mask, T(scale), causal, b); });
    });
    return;
  }
  parallel_for(batch, split, [&](int64_t b) {
    thread_local Scratch scratch;
    const F32Batch a{q.ptr<const float>() + batch_offset(q, b),
                     k.ptr<const float>() + batch_offset(k, b),
                     v.ptr<const float>() + batch_offset(v, b),
                     out.ptr<float>() + batch_offset(out, b),
                     row_stride(q),
                     row_stride(k),
                     row_stride(v),
                     row_stride(out),
                     L,
                     S,
                     E,
                     Ev,
                     mask_rows<float>(mask, b),
                     float(scale),
                     causal};
    f32_batch(a, scratch);
  });
}

}  // namespace kiln::cpu
