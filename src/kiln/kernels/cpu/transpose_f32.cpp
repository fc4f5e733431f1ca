// Copies between NCHW and NHWC float32 images (the reorders where a
// channels-last chain starts and ends, jit/passes/carry_conv_layout.cpp)
// as one 2-D transpose per image, 8x8 blocks through AVX2 registers. The
// element-by-element strided loop copy_convert otherwise takes read one
// float per cache line on one side: 16x112x112 took 255 us, this about a
// tenth (the plain copy of the same floats: 66 us on the same loaded
// machine).
#include <immintrin.h>

#include <algorithm>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 8;

// dst[r * cols + c] = src[c * rows + r] for an 8x8 block at (r0, c0).
void transpose_block(const float* src, float* dst, int64_t rows, int64_t cols, int64_t r0,
                     int64_t c0) {
  __m256 v[8];
  for (int i = 0; i < 8; ++i)
    v[i] = _mm256_loadu_ps(src + (c0 + i) * rows + r0);
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  const __m256 out[8] = {
      _mm256_permute2f128_ps(s0, s4, 0x20), _mm256_permute2f128_ps(s1, s5, 0x20),
      _mm256_permute2f128_ps(s2, s6, 0x20), _mm256_permute2f128_ps(s3, s7, 0x20),
      _mm256_permute2f128_ps(s0, s4, 0x31), _mm256_permute2f128_ps(s1, s5, 0x31),
      _mm256_permute2f128_ps(s2, s6, 0x31), _mm256_permute2f128_ps(s3, s7, 0x31)};
  for (int j = 0; j < 8; ++j)
    _mm256_storeu_ps(dst + (r0 + j) * cols + c0, out[j]);
}

// dst [rows, cols] = transpose of src [cols, rows], rows [r0, r1) of dst.
void transpose_rows(const float* src, float* dst, int64_t rows, int64_t cols, int64_t r0,
                    int64_t r1) {
  int64_t r = r0;
  for (; r + kBlock <= r1; r += kBlock) {
    int64_t c = 0;
    for (; c + kBlock <= cols; c += kBlock)
      transpose_block(src, dst, rows, cols, r, c);
    for (int64_t i = r; i < r + kBlock; ++i) {
      for (int64_t j = c; j < cols; ++j)
        dst[i * cols + j] = src[j * rows + i];
    }
  }
  for (; r < r1; ++r) {
    for (int64_t j = 0; j < cols; ++j)
      dst[r * cols + j] = src[j * rows + r];
  }
}

bool dense_batch(const StridedView& in, int64_t image_size) {
  return in.shape[0] == 1 || in.strides[0] == image_size;
}

}  // namespace

bool copy_image_transposed_f32(const StridedView& out, const StridedView& in) {
  if (out.dtype != DType::Float32 || in.dtype != DType::Float32 || in.ndim != 4 || out.ndim != 4 ||
      !out.is_contiguous() || out.data == in.data)
    return false;
  for (int d = 0; d < 4; ++d)
    if (out.shape[d] != in.shape[d]) return false;  // a broadcast
  const int64_t* s = in.shape;
  const int64_t* st = in.strides;
  const int64_t image = s[1] * s[2] * s[3];
  int64_t rows = 0, cols = 0;
  if (st[2] == 1 && st[1] == s[2] && st[3] == s[1] * s[2] && dense_batch(in, image)) {
    rows = s[1] * s[2], cols = s[3];  // NCHW memory seen as [N, H, W, C]
  } else if (st[1] == 1 && st[3] == s[1] && st[2] == s[1] * s[3] && dense_batch(in, image)) {
    rows = s[1], cols = s[2] * s[3];  // NHWC memory seen as [N, C, H, W]
  } else {
    return false;
  }
  const float* src = in.ptr<const float>();
  float* dst = out.ptr<float>();
  const int64_t row_blocks = (rows + kBlock - 1) / kBlock;
  const bool split = image * s[0] > (int64_t(1) << 16) && max_threads() > 1;
  parallel_for(s[0] * row_blocks, split, [&](int64_t index) {
    const int64_t n = index / row_blocks, r0 = index % row_blocks * kBlock;
    transpose_rows(src + n * image, dst + n * image, rows, cols, r0, std::min(rows, r0 + kBlock));
  });
  return true;
}

}  // namespace kiln::cpu
