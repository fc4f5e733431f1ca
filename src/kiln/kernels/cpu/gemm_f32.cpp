#include "kiln/kernels/cpu/gemm_f32.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "kiln/kernels/cpu/gelu_f32.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/vec_math.h"

namespace kiln::cpu {

namespace {

constexpr int kNR = 16;  // output columns per panel: two ymm vectors
// Rows of the register tile: 6 x 2 = 12 accumulators cover the FMA latency
// (4 cycles on 2 pipes wants at least 8 independent chains) and leave two
// registers for b and one for the broadcast of a.
constexpr int kMR = 6;
// K block: a 16 x 256 panel slice (16 KiB) stays in L1 while the rows of a
// stream past it from L2 (128 .. 512 measured; 256 was best).
constexpr int64_t kKC = 256;
// M block: 96 rows x 256 of a (96 KiB) stay in L2, beside the 96 KiB of
// results they update, while every panel passes through L1. 48 to 1024
// measured at W1's batch 1024: 96 was best by 1-3% over 192.
constexpr int64_t kMC = 96;
// Up to this many rows, and a's rows over all of K in this many bytes, the
// rows stay in L2 while every panel passes (see gemm_reads_b_once). 1536 x
// 384 weights at 192 and 256 rows (1.2 and 1.5 MiB of a) ran 3% slower
// that way on this machine's 2 MiB L2, with b in cache.
constexpr int64_t kStreamMaxRows = 256;
constexpr int64_t kStreamMaxABytes = int64_t(1) << 20;
// Below this many multiply-adds a second thread costs more to wake than it saves.
constexpr int64_t kParallelMinWork = int64_t(1) << 18;
// The per-thread packing buffer of gemm_f32() is kept for the next call up
// to this size; larger b are packed into a buffer freed after the call.
constexpr size_t kScratchKeepBytes = size_t(32) << 20;

int64_t panels_of(int64_t n) {
  return (n + kNR - 1) / kNR;
}

// The K block length: at most kKC, balanced so no block is a short sliver.
int64_t k_block(int64_t k) {
  const int64_t blocks = std::max<int64_t>(1, (k + kKC - 1) / kKC);
  return (k + blocks - 1) / blocks;
}

// Rows [k0, k0 + kc) of panel p of b into dst[kc][16]:
// dst[kk][j] = b[k0 + kk][16p + j], zero past N.
void pack_panel(const GemmB& b, int64_t p, int64_t k0, int64_t kc, float* dst) {
  const int64_t j0 = p * kNR, cols = std::min<int64_t>(kNR, b.n - j0);
  const float* src = b.data + k0 * b.k_stride + j0 * b.n_stride;
  int64_t kk = 0;
  if (b.k_stride == 1 && cols == kNR) {
    // b is Wᵀ with W's rows contiguous (a linear layer's weight): 8 x 8
    // register transposes, two per 8 values of k.
    for (; kk + 8 <= kc; kk += 8) {
      for (int half = 0; half < 2; ++half) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i)
          r[i] = _mm256_loadu_ps(src + (half * 8 + i) * b.n_stride + kk);
        transpose8x8(r);
        for (int t = 0; t < 8; ++t)
          _mm256_store_ps(dst + (kk + t) * kNR + half * 8, r[t]);
      }
    }
  } else if (b.n_stride == 1) {
    for (; kk < kc; ++kk) {
      float* row = dst + kk * kNR;
      std::memcpy(row, src + kk * b.k_stride, sizeof(float) * size_t(cols));
      std::fill(row + cols, row + kNR, 0.0f);
    }
  }
  for (; kk < kc; ++kk) {
    for (int64_t j = 0; j < kNR; ++j)
      dst[kk * kNR + j] = j < cols ? src[kk * b.k_stride + j * b.n_stride] : 0.0f;
  }
}

// Loads the first `cols` floats of src into two registers (zero past them).
inline void load_partial(const float* src, int cols, __m256& lo, __m256& hi) {
  alignas(32) float tmp[kNR] = {};
  std::memcpy(tmp, src, sizeof(float) * size_t(cols));
  lo = _mm256_load_ps(tmp);
  hi = _mm256_load_ps(tmp + 8);
}

// What one pass of the micro-kernel does over its K block.
struct BlockPass {
  int64_t kc;
  int cols;           // of the panel that are real (16 but for the last panel)
  bool first, last;   // the first K block starts from 0; the last adds the bias
  const float* bias;  // at the panel's first column, or null
  bool relu;          // on the last K block, after the bias
  bool gelu;          // likewise (erf form)
  // The next K block's b, one 64-byte line per k, fetched while this one
  // is computed (or null): see gemm_tile.
  const float* prefetch = nullptr;
};

// Calls body(k0, kc) for each K block of k, in order; K = 0 still makes one
// (empty) block, whose pass writes the bias (or zeros). With block_pass,
// the one place that fixes the order of the sums, which the packed and the
// per-call paths share.
template <typename Body>
void for_each_k_block(int64_t k, const Body& body) {
  const int64_t kcb = k_block(k);
  int64_t k0 = 0;
  do {
    const int64_t kc = std::min(kcb, k - k0);
    body(k0, kc);
    k0 += kc;
  } while (k0 < k);
}

// The pass over K block [k0, k0 + kc) of panel p of a product with k x n b.
BlockPass block_pass(const GemmRows& rows, int64_t k, int64_t n, int64_t p, int64_t k0,
                     int64_t kc) {
  const int64_t j0 = p * kNR;
  return BlockPass{kc,           int(std::min<int64_t>(kNR, n - j0)),  k0 == 0,
                   k0 + kc >= k, rows.bias ? rows.bias + j0 : nullptr, rows.relu,
                   rows.gelu};
}

// c[MR][cols] (+)= a[MR][kc] · panel[kc][16]. Every loop over the
// accumulators needs the unroll pragma: without it GCC keeps acc on the
// stack and the kernel runs at a third of its speed.
template <int MR>
void micro_kernel(const BlockPass& pass, const float* a, int64_t lda, const float* b, float* c,
                  int64_t ldc) {
  __m256 acc[MR][2];
  if (pass.first) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
      acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  } else if (pass.cols == kNR) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm256_loadu_ps(c + i * ldc);
      acc[i][1] = _mm256_loadu_ps(c + i * ldc + 8);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
      load_partial(c + i * ldc, pass.cols, acc[i][0], acc[i][1]);
  }
  for (int64_t p = 0; p < pass.kc; ++p) {
    if (pass.prefetch)
      _mm_prefetch(reinterpret_cast<const char*>(pass.prefetch + p * kNR), _MM_HINT_T1);
    const __m256 b0 = _mm256_load_ps(b + p * kNR), b1 = _mm256_load_ps(b + p * kNR + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  if (pass.last && pass.bias) {
    __m256 bias0, bias1;
    load_partial(pass.bias, pass.cols, bias0, bias1);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm256_add_ps(acc[i][0], bias0);
      acc[i][1] = _mm256_add_ps(acc[i][1], bias1);
    }
  }
  if (pass.last && pass.relu) {
    // max(0, x) returns x when the comparison fails: NaN and -0 pass.
    const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm256_max_ps(zero, acc[i][0]);
      acc[i][1] = _mm256_max_ps(zero, acc[i][1]);
    }
  }
  if (pass.last && pass.gelu) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = gelu_erf_f32x8(acc[i][0]);
      acc[i][1] = gelu_erf_f32x8(acc[i][1]);
    }
  }
  if (pass.cols == kNR) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      _mm256_storeu_ps(c + i * ldc, acc[i][0]);
      _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
    return;
  }
  alignas(32) float tmp[kNR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(tmp, acc[i][0]);
    _mm256_store_ps(tmp + 8, acc[i][1]);
    std::memcpy(c + i * ldc, tmp, sizeof(float) * size_t(pass.cols));
  }
}

// Rows [i0, i1) of one panel's columns for one K block.
void panel_rows(const GemmRows& rows, const BlockPass& pass, int64_t i0, int64_t i1, int64_t k0,
                int64_t j0, const float* panel) {
  const int64_t lda = rows.a_row_stride, ldc = rows.out_row_stride;
  using Tile = void (*)(const BlockPass&, const float*, int64_t, const float*, float*, int64_t);
  static constexpr Tile kTile[kMR + 1] = {nullptr,         micro_kernel<1>, micro_kernel<2>,
                                          micro_kernel<3>, micro_kernel<4>, micro_kernel<5>,
                                          micro_kernel<6>};
  BlockPass later = pass;  // the first tile prefetches, the others read what is in L1
  later.prefetch = nullptr;
  bool first = true;
  auto tile = [&](int64_t i, int64_t height) {
    kTile[height](first ? pass : later, rows.a + i * lda + k0, lda, panel, rows.out + i * ldc + j0,
                  ldc);
    first = false;
  };
  const int64_t m = i1 - i0, rest = m % kMR;
  // A last tile of 1 to 3 rows has too few accumulators to hide the FMA
  // latency (2 rows ran at about 40% of a 6-row tile's rate per row): it
  // and the full tile before it run as two tiles of 3 to 5 rows (32 rows,
  // an LSTM step at batch 32: 6+6+6+6+4+4 instead of 6+6+6+6+6+2). Each
  // output's sum is the same whatever tile computes it.
  const int64_t full = rest != 0 && rest < 4 && m > kMR ? m / kMR - 1 : m / kMR;
  int64_t i = i0;
  for (int64_t t = 0; t < full; ++t, i += kMR)
    tile(i, kMR);
  const int64_t left = i1 - i;
  if (left == 0) return;
  if (left <= kMR) {
    tile(i, left);
    return;
  }
  tile(i, (left + 1) / 2);
  tile(i + (left + 1) / 2, left / 2);
}

// Rows [r0, r1) x panels [p0, p1) of the product: M blocks, then K blocks,
// then panels, then 6-row tiles.
void gemm_tile(const GemmRows& rows, const PackedB& b, int64_t r0, int64_t r1, int64_t p0,
               int64_t p1) {
  // Few rows (a linear layer at a small batch, a sequence of 128 tokens):
  // panel by panel, each panel's K blocks in turn, so the output tile stays
  // in L1 across them and b streams through once in its packed order, the
  // block four ahead prefetched into L2 while this one is computed (a 32 x
  // 1024 by 1024 x 8210 product, b 34 MB from memory: 8.8 ms to 6.0, one
  // thread; ONNX Runtime 6.6). One block ahead gained half as much.
  if (gemm_reads_b_once(r1 - r0, b.k())) {
    for (int64_t p = p0; p < p1; ++p) {
      for_each_k_block(b.k(), [&](int64_t k0, int64_t kc) {
        BlockPass pass = block_pass(rows, b.k(), b.n(), p, k0, kc);
        const float* slice = b.panel(p) + k0 * kNR;
        const float* ahead = slice + 4 * kc * kNR;  // panels follow each other in memory
        if (ahead + kc * kNR <= b.panel(p1)) pass.prefetch = ahead;
        panel_rows(rows, pass, r0, r1, k0, p * kNR, slice);
      });
    }
    return;
  }
  for (int64_t i0 = r0; i0 < r1; i0 += kMC) {
    const int64_t i1 = std::min(r1, i0 + kMC);
    for_each_k_block(b.k(), [&](int64_t k0, int64_t kc) {
      for (int64_t p = p0; p < p1; ++p) {
        panel_rows(rows, block_pass(rows, b.k(), b.n(), p, k0, kc), i0, i1, k0, p * kNR,
                   b.panel(p) + k0 * kNR);
      }
    });
  }
}

// Panels [p0, p1) of the product for all rows (at most kMC of them), each
// panel's K block packed right before its use into a buffer that stays in
// L1: b is read once and its packed copy never goes out to L2 or L3, which
// packing all of b first costs (2-4% at W1's shapes). The sums are those of
// gemm_tile: same blocks, same order.
void gemm_streaming(const GemmRows& rows, const GemmB& b, int64_t p0, int64_t p1) {
  alignas(64) thread_local float panel[kKC * kNR];
  for_each_k_block(b.k, [&](int64_t k0, int64_t kc) {
    for (int64_t p = p0; p < p1; ++p) {
      pack_panel(b, p, k0, kc, panel);
      panel_rows(rows, block_pass(rows, b.k, b.n, p, k0, kc), 0, rows.m, k0, p * kNR, panel);
    }
  });
}

}  // namespace

bool gemm_reads_b_once(int64_t rows, int64_t k) {
  if (rows <= kMC) return true;
  return rows <= kStreamMaxRows && rows * k * int64_t(sizeof(float)) <= kStreamMaxABytes;
}

PackedB::~PackedB() {
  std::free(data_);
}

size_t PackedB::bytes_for(const GemmB& b) {
  // Rounded up to the alignment, as aligned_alloc wants; never zero bytes.
  return (size_t(std::max<int64_t>(1, panels_of(b.n) * b.k * kNR)) * sizeof(float) + 63) / 64 * 64;
}

void PackedB::pack(const GemmB& b) {
  const int64_t panels = panels_of(b.n);
  const size_t bytes = bytes_for(b);
  if (bytes > bytes_) {
    std::free(data_);
    bytes_ = 0;  // a failed allocation leaves an empty buffer, never a freed one
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!data_) throw std::bad_alloc();
    bytes_ = bytes;
  }
  k_ = b.k;
  n_ = b.n;
  parallel_for(panels, panels * b.k * kNR >= kParallelMinWork && max_threads() > 1,
               [&](int64_t p) { pack_panel(b, p, 0, b.k, data_ + p * b.k * kNR); });
}

void gemm_f32_packed(const GemmRows& rows, const PackedB& b) {
  const int64_t panels = panels_of(b.n());
  if (rows.m == 0 || panels == 0) return;
  const int64_t threads = max_threads();
  if (threads == 1 || rows.m * b.n() * b.k() < kParallelMinWork) {
    gemm_tile(rows, b, 0, rows.m, 0, panels);
    return;
  }
  // A grid of row chunks (whole 6-row tiles) by panel groups, rows first:
  // each task then reads all of b once, and a only for its rows. Up to kMC
  // rows (a recurrent step, a small batch) panels only, as gemm_f32 splits
  // them: each thread reads its share of b, which then stays in its core's
  // L2 from call to call (an LSTM's 1 MiB W_hh, 64 steps in a row).
  const int64_t tiles = (rows.m + kMR - 1) / kMR;
  const int64_t row_tasks = rows.m <= kMC ? 1 : std::min(threads, tiles);
  const int64_t panel_tasks = std::max<int64_t>(1, std::min(panels, threads / row_tasks));
  const int64_t rows_per_task = (tiles + row_tasks - 1) / row_tasks * kMR;
  const int64_t panels_per_task = (panels + panel_tasks - 1) / panel_tasks;
  parallel_for(row_tasks * panel_tasks, true, [&](int64_t task) {
    const int64_t r0 = task / panel_tasks * rows_per_task,
                  p0 = task % panel_tasks * panels_per_task;
    gemm_tile(rows, b, r0, std::min(rows.m, r0 + rows_per_task), p0,
              std::min(panels, p0 + panels_per_task));
  });
}

void gemm_f32(const GemmRows& rows, const GemmB& b) {
  const int64_t panels = panels_of(b.n);
  if (rows.m == 0 || panels == 0) return;
  if (rows.m <= kMC) {
    const int64_t threads = std::min<int64_t>(max_threads(), panels);
    if (threads == 1 || rows.m * b.n * b.k < kParallelMinWork) {
      gemm_streaming(rows, b, 0, panels);
      return;
    }
    const int64_t per_task = (panels + threads - 1) / threads;
    parallel_for(threads, true, [&](int64_t task) {
      gemm_streaming(rows, b, task * per_task, std::min(panels, (task + 1) * per_task));
    });
    return;
  }
  const size_t bytes = size_t(panels_of(b.n) * b.k * kNR) * sizeof(float);
  if (bytes > kScratchKeepBytes) {
    PackedB packed;
    packed.pack(b);
    gemm_f32_packed(rows, packed);
    return;
  }
  thread_local PackedB scratch;
  scratch.pack(b);
  gemm_f32_packed(rows, scratch);
}

}  // namespace kiln::cpu
