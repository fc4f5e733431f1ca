#include "kiln/kernels/cpu/rnn.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/unary.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {

namespace {

// Rows split across threads only when the step is large: a batch-1 step of
// a few hundred units is over in well under a thread team's start-up.
bool split_rows(int64_t rows, int64_t hidden) {
  return rows > 1 && rows * hidden * 4 >= kParallelGrain && max_threads() > 1;
}

// Lanes [0, count) of 8 as a mask for maskload / maskstore.
__m256i lane_mask(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// gi + gh at [offset, offset + count) of one row, in 8 lanes (lanes past
// count read as 0).
__m256 gate_sum(const float* gi, const float* gh, int64_t offset, int64_t count) {
  if (count == 8) return _mm256_add_ps(_mm256_loadu_ps(gi + offset), _mm256_loadu_ps(gh + offset));
  const __m256i mask = lane_mask(count);
  return _mm256_add_ps(_mm256_maskload_ps(gi + offset, mask),
                       _mm256_maskload_ps(gh + offset, mask));
}

void store_lanes(float* dst, __m256 v, int64_t count) {
  if (count == 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  _mm256_maskstore_ps(dst, lane_mask(count), v);
}

// One row of the float32 LSTM step, 8 units at a time in registers (the
// last group masked, so every unit takes the same operations), in chunks
// of kChunk units and two passes over each: the gates and c' first (o kept
// in a small buffer), then h' = o tanh(c'). In one pass each group of 8 is
// one long dependency chain (three activations, c', then tanh(c')), longer
// than the core can overlap the next groups with: measured at 32 x 256 on
// one core, the one-pass loop took 37 µs, these two passes 23 (tanh_f32x8,
// on the cheap half of exp, gave a fifth of that). next_gi: the next row's
// gates, prefetched two lines per group of 8 units (which covers its 4H
// floats) while this row computes. In a scan, gi is a slice of x W_ihᵀ for
// all steps, megabytes written before the loop and long out of L2: without
// the prefetch the loads of gi stalled the step to 37-40 µs at 32 x 256
// (the chains leave the core no room to have many misses out at once),
// with it 25.
void lstm_row_f32(const float* gi, const float* gh, const float* c, float* h_out, float* c_out,
                  int64_t H, const float* next_gi) {
  constexpr int64_t kChunk = 64;
  alignas(32) float o_chunk[kChunk];
  const char* next = reinterpret_cast<const char*>(next_gi);
  for (int64_t j0 = 0; j0 < H; j0 += kChunk) {
    const int64_t j1 = std::min(H, j0 + kChunk);
    for (int64_t j = j0; j < j1; j += 8) {
      const int64_t count = std::min<int64_t>(8, j1 - j);
      if (next) {
        _mm_prefetch(next + j * 16, _MM_HINT_T0);
        _mm_prefetch(next + j * 16 + 64, _MM_HINT_T0);
      }
      const __m256 i = sigmoid_f32x8(gate_sum(gi, gh, j, count));
      const __m256 f = sigmoid_f32x8(gate_sum(gi, gh, H + j, count));
      const __m256 g = tanh_f32x8(gate_sum(gi, gh, 2 * H + j, count));
      const __m256 o = sigmoid_f32x8(gate_sum(gi, gh, 3 * H + j, count));
      const __m256 c_prev =
          count == 8 ? _mm256_loadu_ps(c + j) : _mm256_maskload_ps(c + j, lane_mask(count));
      store_lanes(c_out + j, _mm256_fmadd_ps(f, c_prev, _mm256_mul_ps(i, g)), count);
      _mm256_store_ps(o_chunk + (j - j0), o);
    }
    for (int64_t j = j0; j < j1; j += 8) {
      const int64_t count = std::min<int64_t>(8, j1 - j);
      const __m256 c_new =
          count == 8 ? _mm256_loadu_ps(c_out + j) : _mm256_maskload_ps(c_out + j, lane_mask(count));
      store_lanes(h_out + j, _mm256_mul_ps(_mm256_load_ps(o_chunk + (j - j0)), tanh_f32x8(c_new)),
                  count);
    }
  }
}

}  // namespace

// float32 runs lstm_row_f32 on each row. Other types loop over the units
// of a row with the activations inlined (sigmoid_of and tanh_of), so they
// vectorize; each gate is read once.
template <typename T>
void lstm_cell_pointwise(const T* gi, const T* gh, const T* c, T* h_out, T* c_out, int64_t rows,
                         int64_t hidden) {
  const int64_t H = hidden;
  if constexpr (std::is_same_v<T, float>) {
    parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
      const float* next_gi = r + 1 < rows ? gi + (r + 1) * 4 * H : nullptr;
      lstm_row_f32(gi + r * 4 * H, gh + r * 4 * H, c + r * H, h_out + r * H, c_out + r * H, H,
                   next_gi);
    });
    return;
  }
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    // One pointer per gate, and `omp simd`: over offsets into one row,
    // GCC's dependence analysis gives up on this loop (five
    // transcendentals, eight streams) and leaves it scalar, 13x slower at
    // 32 x 256 than vectorized.
    const T* __restrict xi = gi + r * 4 * H;
    const T* __restrict xf = xi + H;
    const T* __restrict xg = xi + 2 * H;
    const T* __restrict xo = xi + 3 * H;
    const T* __restrict hi = gh + r * 4 * H;
    const T* __restrict hf = hi + H;
    const T* __restrict hg = hi + 2 * H;
    const T* __restrict ho = hi + 3 * H;
    const T* __restrict cr = c + r * H;
    T* __restrict hr = h_out + r * H;
    T* __restrict cn = c_out + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_of<T>(xi[j] + hi[j]);
      const T f = sigmoid_of<T>(xf[j] + hf[j]);
      const T g = tanh_of<T>(xg[j] + hg[j]);
      const T o = sigmoid_of<T>(xo[j] + ho[j]);
      const T c_new = f * cr[j] + i * g;
      cn[j] = c_new;
      hr[j] = o * tanh_of<T>(c_new);
    }
  });
}

template <typename T>
void gru_cell_pointwise(const T* gi, const T* gh, const T* h, T* h_out, int64_t rows,
                        int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* xi = gi + r * 3 * H;
    const T* hi = gh + r * 3 * H;
    const T* hr = h + r * H;
    T* out = h_out + r * H;
    for (int64_t j = 0; j < H; ++j) {
      const T reset = sigmoid_of<T>(xi[j] + hi[j]);
      const T update = sigmoid_of<T>(xi[H + j] + hi[H + j]);
      const T n = tanh_of<T>(xi[2 * H + j] + reset * hi[2 * H + j]);
      out[j] = n + update * (hr[j] - n);
    }
  });
}

// Derivatives of sigmoid and tanh from their values.
template <typename T>
T dsigmoid(T s) {
  return s * (T(1) - s);
}
template <typename T>
T dtanh(T t) {
  return T(1) - t * t;
}

//   dc = dc_out + dh o (1 - t²), t = tanh(c_out)
//   da_i = dc g i' ; da_f = dc c f' ; da_g = dc i g' ; da_o = dh t o' ; dc_prev = dc f
template <typename T>
void lstm_cell_pointwise_backward(const T* gi, const T* gh, const T* c, const T* c_out,
                                  const T* dh_out, const T* dc_out, T* dgates, T* dc, int64_t rows,
                                  int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* __restrict xi = gi + r * 4 * H;
    const T* __restrict xf = xi + H;
    const T* __restrict xg = xi + 2 * H;
    const T* __restrict xo = xi + 3 * H;
    const T* __restrict hi = gh + r * 4 * H;
    const T* __restrict hf = hi + H;
    const T* __restrict hg = hi + 2 * H;
    const T* __restrict ho = hi + 3 * H;
    const T* __restrict cr = c + r * H;
    const T* __restrict cn = c_out + r * H;
    const T* __restrict dhr = dh_out + r * H;
    const T* __restrict dcn = dc_out + r * H;
    T* __restrict di = dgates + r * 4 * H;
    T* __restrict df = di + H;
    T* __restrict dg = di + 2 * H;
    T* __restrict d_o = di + 3 * H;
    T* __restrict dcr = dc + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_of<T>(xi[j] + hi[j]);
      const T f = sigmoid_of<T>(xf[j] + hf[j]);
      const T g = tanh_of<T>(xg[j] + hg[j]);
      const T o = sigmoid_of<T>(xo[j] + ho[j]);
      const T t = tanh_of<T>(cn[j]);
      const T dcell = dcn[j] + dhr[j] * o * dtanh(t);
      di[j] = dcell * g * dsigmoid(i);
      df[j] = dcell * cr[j] * dsigmoid(f);
      dg[j] = dcell * i * dtanh(g);
      d_o[j] = dhr[j] * t * dsigmoid(o);
      dcr[j] = dcell * f;
    }
  });
}

//   dn = dh_out (1 - z) ; da_n = dn n' ; da_r = da_n gh_n r' ; da_z = dh_out (h - n) z'
//   dgi = [da_r, da_z, da_n] ; dgh = [da_r, da_z, da_n r] ; dh = dh_out z
template <typename T>
void gru_cell_pointwise_backward(const T* gi, const T* gh, const T* h, const T* dh_out, T* dgi,
                                 T* dgh, T* dh, int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* __restrict xr = gi + r * 3 * H;
    const T* __restrict xz = xr + H;
    const T* __restrict xn = xr + 2 * H;
    const T* __restrict hr = gh + r * 3 * H;
    const T* __restrict hz = hr + H;
    const T* __restrict hn = hr + 2 * H;
    const T* __restrict hp = h + r * H;
    const T* __restrict dy = dh_out + r * H;
    T* __restrict dxr = dgi + r * 3 * H;
    T* __restrict dxz = dxr + H;
    T* __restrict dxn = dxr + 2 * H;
    T* __restrict dhr = dgh + r * 3 * H;
    T* __restrict dhz = dhr + H;
    T* __restrict dhn = dhr + 2 * H;
    T* __restrict dhp = dh + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T reset = sigmoid_of<T>(xr[j] + hr[j]);
      const T update = sigmoid_of<T>(xz[j] + hz[j]);
      const T n = tanh_of<T>(xn[j] + reset * hn[j]);
      const T da_n = dy[j] * (T(1) - update) * dtanh(n);
      const T da_r = da_n * hn[j] * dsigmoid(reset);
      const T da_z = dy[j] * (hp[j] - n) * dsigmoid(update);
      dxr[j] = da_r;
      dhr[j] = da_r;
      dxz[j] = da_z;
      dhz[j] = da_z;
      dxn[j] = da_n;
      dhn[j] = da_n * reset;
      dhp[j] = dy[j] * update;
    }
  });
}

template void lstm_cell_pointwise<float>(const float*, const float*, const float*, float*, float*,
                                         int64_t, int64_t);
template void lstm_cell_pointwise<double>(const double*, const double*, const double*, double*,
                                          double*, int64_t, int64_t);
template void gru_cell_pointwise<float>(const float*, const float*, const float*, float*, int64_t,
                                        int64_t);
template void gru_cell_pointwise<double>(const double*, const double*, const double*, double*,
                                         int64_t, int64_t);

template void lstm_cell_pointwise_backward<float>(const float*, const float*, const float*,
                                                  const float*, const float*, const float*, float*,
                                                  float*, int64_t, int64_t);
template void lstm_cell_pointwise_backward<double>(const double*, const double*, const double*,
                                                   const double*, const double*, const double*,
                                                   double*, double*, int64_t, int64_t);
template void gru_cell_pointwise_backward<float>(const float*, const float*, const float*,
                                                 const float*, float*, float*, float*, int64_t,
                                                 int64_t);
template void gru_cell_pointwise_backward<double>(const double*, const double*, const double*,
                                                  const double*, double*, double*, double*, int64_t,
                                                  int64_t);

}  // namespace kiln::cpu
