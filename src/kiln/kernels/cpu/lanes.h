// Lane shuffles the AVX2 kernels share.
#pragma once

#include <immintrin.h>

namespace kiln::cpu {

// The even elements of the 16 floats from p: [p0 p2 ... p14], in order. A
// stride-2 read of 8 floats (pooling and depthwise convolution windows):
// shuffle within each 128-bit lane, then put the 64-bit pieces back in order.
inline __m256 even_of_16_f32(const float* p) {
  const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
  const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
}

}  // namespace kiln::cpu
