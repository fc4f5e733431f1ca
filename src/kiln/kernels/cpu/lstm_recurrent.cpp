// A float32 LSTM layer at batch 1, one fused kernel per step (rnn.h).
//
// Why its own kernel: at batch 1 a step is bound by streaming W_hh, and as
// a linear (cpu::matvec_f32, four rows' dot products at a time) followed by
// lstm_cell_pointwise it streamed it at ~88 GB/s (1 MiB in 11.9 µs at
// H = 256, one thread) and then ran the cell as a second pass. Packed so
// that each k reads one contiguous 256-byte row of a block (a broadcast of
// h_k and 8 FMAs into 8 independent accumulators), the same 1 MiB streamed
// at ~100 GB/s (10.2 µs), and at ~112 GB/s from L2 (about what this core's
// L2 delivers: wider AVX-512 loads measured no faster); the cell of one
// block then runs while the next block's rows arrive. The whole layer
// against the step plan's two kernels: bench/kernel_choices.cpp, part 5.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/rnn.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kUnits = LstmRecurrentWeights::kUnits;
constexpr int64_t kRow = 4 * kUnits;  // floats a block reads per k
// Threads from as many weights as matvec_f32 splits at (1024 x 256, W4's
// W_hh): below, a step is over in a few µs, and the barrier between steps
// costs about what a second thread saves.
constexpr int64_t kSplitMinWeights = int64_t(1) << 18;

// Lanes [0, count) of 8 for maskload / maskstore.
__m256i lane_mask(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__m256 load_lanes(const float* src, int64_t count) {
  if (count == 8) return _mm256_loadu_ps(src);
  return _mm256_maskload_ps(src, lane_mask(count));
}

void store_lanes(float* dst, __m256 v, int64_t count) {
  if (count == 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  _mm256_maskstore_ps(dst, lane_mask(count), v);
}

// What every block of a step reads and writes.
struct Step {
  const float* h;   // [K], the state before the step
  const float* c;   // [H]
  const float* gi;  // [4H]
  const float* b_hh;
  float* h_out;
  float* c_out;
};

// The cell on units [j, j + count) of a step, count <= 8, from the sums
// h W_hhᵀ of their four gates (acc[q]): the bias, then gi, are added as
// linear and lstm_cell_pointwise add them, and the cell is lstm_row_f32's
// (rnn.cpp) operation for operation.
[[gnu::always_inline]] inline void cell8(const Step& s, int64_t H, int64_t j, int64_t count,
                                         __m256 sum_i, __m256 sum_f, __m256 sum_g, __m256 sum_o) {
  const __m256 sums[4] = {sum_i, sum_f, sum_g, sum_o};
  __m256 pre[4];
  for (int q = 0; q < 4; ++q) {
    __m256 gh = sums[q];
    if (s.b_hh) gh = _mm256_add_ps(gh, load_lanes(s.b_hh + q * H + j, count));
    pre[q] = _mm256_add_ps(load_lanes(s.gi + q * H + j, count), gh);
  }
  const __m256 i = sigmoid_f32x8(pre[0]), f = sigmoid_f32x8(pre[1]);
  const __m256 g = tanh_f32x8(pre[2]), o = sigmoid_f32x8(pre[3]);
  const __m256 c_new = _mm256_fmadd_ps(f, load_lanes(s.c + j, count), _mm256_mul_ps(i, g));
  store_lanes(s.c_out + j, c_new, count);
  store_lanes(s.h_out + j, _mm256_mul_ps(o, tanh_f32x8(c_new)), count);
}

// Block b of a step: its 64 gate columns summed over k in 8 accumulators
// (one chain per 8 columns, in k order, as gemm_f32's micro-kernel sums a
// column), then the cell on its (up to) 16 units. Named accumulators passed
// by value: an array of them, handed to the cell, made GCC store all eight
// to the stack on every k.
[[gnu::always_inline]] inline void block_step(const LstmRecurrentWeights& w, const Step& s,
                                              int64_t b) {
  const float* row = w.block(b);
  const int64_t K = w.k(), H = w.hidden();
  __m256 i0 = _mm256_setzero_ps(), i1 = i0, f0 = i0, f1 = i0, g0 = i0, g1 = i0, o0 = i0, o1 = i0;
  for (int64_t k = 0; k < K; ++k, row += kRow) {
    const __m256 x = _mm256_broadcast_ss(s.h + k);
    i0 = _mm256_fmadd_ps(x, _mm256_load_ps(row), i0);
    i1 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 8), i1);
    f0 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 16), f0);
    f1 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 24), f1);
    g0 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 32), g0);
    g1 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 40), g1);
    o0 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 48), o0);
    o1 = _mm256_fmadd_ps(x, _mm256_load_ps(row + 56), o1);
  }
  const int64_t j = b * kUnits;
  cell8(s, H, j, std::min<int64_t>(8, H - j), i0, f0, g0, o0);
  if (j + 8 < H) cell8(s, H, j + 8, std::min<int64_t>(8, H - j - 8), i1, f1, g1, o1);
}

// Steps of blocks [first, last) of every step; `barrier` between steps when
// other threads run the other blocks. Every other step walks its blocks
// backwards, starting on those the step before read last (still in L2 when
// W_hh is larger than it).
void run_blocks(const LstmRecurrentWeights& w, const LstmScanArgs& a, float* const c_bufs[2],
                int64_t first, int64_t last, bool barrier) {
  for (int64_t s = 0; s < a.steps; ++s) {
    const int64_t t = a.reverse ? a.steps - 1 - s : s;
    const int64_t before = a.reverse ? t + 1 : t - 1;
    // The last step writes c_n: step s writes c_bufs[(steps - 1 - s) % 2].
    const Step step{s == 0 ? a.h0 : a.ys + before * a.ys_step,
                    s == 0 ? a.c0 : c_bufs[(a.steps - s) & 1],
                    a.gi + t * a.gi_step,
                    a.b_hh,
                    a.ys + t * a.ys_step,
                    c_bufs[(a.steps - 1 - s) & 1]};
    if (s & 1) {
      for (int64_t b = last - 1; b >= first; --b)
        block_step(w, step, b);
    } else {
      for (int64_t b = first; b < last; ++b)
        block_step(w, step, b);
    }
    if (barrier) {
#pragma omp barrier
    }
  }
}

}  // namespace

void LstmRecurrentWeights::Free::operator()(float* p) const {
  std::free(p);
}

void LstmRecurrentWeights::pack(const float* w_hh, int64_t row_stride, int64_t hidden, int64_t k) {
  hidden_ = hidden;
  k_ = k;
  const int64_t floats = blocks() * k * kRow;
  if (floats > capacity_) {
    // 64-byte aligned, a multiple of 64 bytes (aligned_alloc's rule).
    const size_t bytes = (size_t(floats) * sizeof(float) + 63) / 64 * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!data_) throw std::bad_alloc();
    capacity_ = floats;
  }
  // Written in order; each k reads one float of each of a block's 64
  // rows, which stay in L1 across the block's k (writing column by column
  // instead took 540 µs for W4's 1 MiB).
  float* dst = data_.get();
  for (int64_t b = 0; b < blocks(); ++b) {
    const float* rows[4][kUnits];
    for (int64_t q = 0; q < 4; ++q) {
      for (int64_t u = 0; u < kUnits; ++u) {
        const int64_t unit = b * kUnits + u;
        rows[q][u] = unit < hidden ? w_hh + (q * hidden + unit) * row_stride : nullptr;
      }
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t q = 0; q < 4; ++q) {
        for (int64_t u = 0; u < kUnits; ++u)
          *dst++ = rows[q][u] ? rows[q][u][kk] : 0.0f;
      }
    }
  }
}

void lstm_recurrent_scan_f32(const LstmRecurrentWeights& w, const LstmScanArgs& a) {
  const int64_t H = w.hidden();
  if (a.steps == 0) {
    std::memmove(a.h_n, a.h0, size_t(H) * sizeof(float));
    std::memmove(a.c_n, a.c0, size_t(H) * sizeof(float));
    return;
  }
  // The cell state alternates between c_n and a buffer of the calling
  // thread (grown once, then reused).
  thread_local std::vector<float> spare;
  if (spare.size() < size_t(H)) spare.resize(size_t(H));
  float* const c_bufs[2] = {a.c_n, spare.data()};
  const int64_t blocks = w.blocks();
  const int64_t threads =
      4 * H * w.k() < kSplitMinWeights || blocks < 2 ? 1 : std::min<int64_t>(max_threads(), blocks);
  if (threads == 1) {
    run_blocks(w, a, c_bufs, 0, blocks, false);
  } else {
    // One region for all the steps, a barrier between them: each thread
    // keeps the same blocks (in its own core's L2) on every step.
#pragma omp parallel num_threads(int(threads))
    {
      const int64_t n = omp_threads_in_region(), id = omp_thread_id_in_region();
      const int64_t per = (blocks + n - 1) / n;
      run_blocks(w, a, c_bufs, std::min(blocks, id * per), std::min(blocks, (id + 1) * per), n > 1);
    }
  }
  const int64_t last = a.reverse ? 0 : a.steps - 1;
  std::memcpy(a.h_n, a.ys + last * a.ys_step, size_t(H) * sizeof(float));
}

}  // namespace kiln::cpu
