// kiln's own float32 GEMM, out[M, N] = a[M, K] · b[K, N] (+ bias[N]), for
// products whose rows of `a` are contiguous in K: every linear layer and most
// matmuls. b is packed into panels of 16 columns, [ceil(N/16)][K][16], and a
// 6x16 register tile runs over them (12 accumulators, two aligned loads of b
// and six broadcasts of a per k) — the GotoBLAS shape for 16 ymm registers.
//
// Why kiln owns it: oneDNN 2.6's AVX2 matmul packs b again on every call,
// and with weights packed once this kernel runs W1 (MLP 512-256-128-2) at
// batch 64 at 88-90% of one core's FP32 peak against oneDNN's 77-83%
// (bench/gemm_f32.cpp). Compiled graphs keep a packed copy of each weight
// (PackedB) across calls, and so do eager calls of a weight they see again
// (ops/packed_weights.h); others pack per call with gemm_f32(), which gives
// exactly the same bits: the sums run in the same order either way.
//
// The order of the sums: each output sums k = 0 .. K-1 in one chain per K
// block of at most 256 (balanced: K = 512 is two blocks of 256), the blocks
// added in order, and the bias added last, as `matmul(a, b) + bias` would.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

// Whether a product of `rows` rows over `k` reads b once, panel by panel
// (its rows of a stay in L2 while each panel passes), rather than sweeping
// all of b once per block of 96 rows. Up to 96 rows always; up to 256 while
// those rows of a fit in 1 MiB. A b that comes from memory (a model whose
// weights exceed the caches) then streams through once, its next block
// prefetched: W5 compiled at batch 1 (128 rows) 21.9 ms to 19.4. Only then
// does a packed copy kept across calls pay (ops/packed_weights.h): swept
// several times from memory, kept copies ran up to 7% slower than packing
// per call into a buffer reused from call to call.
bool gemm_reads_b_once(int64_t rows, int64_t k);

// b[k][n] at data + k * k_stride + n * n_stride, K x N.
struct GemmB {
  const float* data = nullptr;
  int64_t k = 0, n = 0, k_stride = 0, n_stride = 0;
};

// The a side and the result: a[m][k] at a + m * a_row_stride + k, out[m][n]
// at out + m * out_row_stride + n; bias is null or N contiguous floats.
// relu: out = relu(sum + bias) as it is stored (x < 0 ? 0 : x, so NaN and
// -0 pass as the relu kernel passes them), saving a pass over out. gelu:
// out = gelu(sum + bias) (the erf form) as it is stored, through
// gelu_f32.h's x8 form, whose bits the gelu op gives.

struct GemmRows {
  float* out = nullptr;
  int64_t out_row_stride = 0;
  const float* a = nullptr;
  int64_t a_row_stride = 0;
  const float* bias = nullptr;
  int64_t m = 0;
  bool relu = false;
  bool gelu = false;
};

// b packed once, kept across calls. pack() reuses the buffer when the shape
// is unchanged.
class PackedB {
 public:
  PackedB() = default;
  ~PackedB();
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;

  void pack(const GemmB& b);
  // The bytes pack(b) takes.
  static size_t bytes_for(const GemmB& b);
  size_t bytes() const { return bytes_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const float* panel(int64_t p) const { return data_ + p * k_ * 16; }

 private:
  float* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t k_ = 0, n_ = 0;
};

// The product with b packed beforehand. Splits across OpenMP threads when
// the product is large enough; the result does not depend on the split.
void gemm_f32_packed(const GemmRows& rows, const PackedB& b);

// The same product with b packed on the way: panel by panel into a buffer
// that stays in L1 for up to 96 rows, else all of b into a per-thread
// scratch buffer first. Same bits as pack() + gemm_f32_packed().
void gemm_f32(const GemmRows& rows, const GemmB& b);

}  // namespace kiln::cpu
