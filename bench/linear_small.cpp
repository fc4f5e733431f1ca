// Batch-1 linear layers: kiln's dot-product kernel (cpu::matvec_f32) against
// oneDNN's matmul (cpu::matmul_onednn_f32, primitive cached), for the W1 MLP
// shapes at batch 1 and, for scale, oneDNN at batch 64.
//
// Build by hand against a Release build (not part of CMake):
//   g++ -O2 -std=c++20 -mavx2 -mfma -fopenmp -Isrc bench/linear_small.cpp \
//     -Lbuild/h -lkiln_ops -lkiln_kernels_cpu -lkiln_core -lkiln_util \
//     -Wl,-rpath,$PWD/build/h -o build/linear_small && ./build/linear_small
//
// Measured on the 2-core AVX2 build machine, shared with other builds (load
// ~2.7), median of 15 x 500 calls, microseconds per call:
//
//   OMP_NUM_THREADS=1             oneDNN   matvec
//   batch 1,  512 -> 256          11.50     8.91   (1.3x)
//   batch 1,  256 -> 128           4.73     2.34   (2.0x)
//   batch 1,  128 -> 2             2.92     0.43   (6.8x)
//   batch 1, 1024 -> 1024         64.37    62.95   (1.0x)
//   batch 1, 2048 -> 1024        149.24   146.53   (1.0x)
//   batch 64, 512 -> 256        193.96  (oneDNN only; 64 rows amortize its call cost)
//   batch 64, 256 -> 128         49.02
//   batch 64, 128 -> 2            5.67
//
//   2 threads (noisy: the other core was busy)
//   batch 1,  512 -> 256          41.45    20.48
//   batch 1,  256 -> 128          22.19     2.26
//   batch 1,  128 -> 2            20.11     0.46
//   batch 64, 512 -> 256         102.00
//
// So linear at batch 1 takes matvec up to 1M weights (where the two tie), and
// matvec stays on one thread below 256K weights: waking a second thread cost
// more than it saved for the W1 shapes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kiln/kernels/cpu/matmul.h"

namespace {

using kiln::cpu::StridedView;

StridedView view2(float* data, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  StridedView v;
  v.data = data;
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = cols;
  v.strides[0] = rs;
  v.strides[1] = cs;
  return v;
}

// Median microseconds per call over several timed batches.
template <typename F>
double time_us(F f) {
  for (int i = 0; i < 200; ++i)
    f();
  std::vector<double> samples;
  for (int rep = 0; rep < 15; ++rep) {
    const int iters = 500;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      f();
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void bench(int64_t batch, int64_t k, int64_t n) {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(batch * k)), w(size_t(n * k)), b(static_cast<size_t>(n)),
      y(size_t(batch * n));
  for (auto* v : {&x, &w, &b}) {
    for (float& e : *v)
      e = normal(rng);
  }
  // Wᵀ as a [K, N] view over W's [N, K] storage, as linear passes it.
  StridedView out = view2(y.data(), batch, n, n, 1);
  StridedView lhs = view2(x.data(), batch, k, k, 1);
  StridedView rhs = view2(w.data(), k, n, 1, k);
  StridedView bias;
  bias.data = b.data();
  bias.ndim = 1;
  bias.shape[0] = n;
  bias.strides[0] = 1;
  double onednn = time_us([&] { kiln::cpu::matmul_onednn_f32(out, lhs, rhs, bias, 1, 0); });
  if (batch != 1) {
    std::printf("batch %3lld  %4lld -> %4lld   onednn %7.2f us\n", (long long)batch, (long long)k,
                (long long)n, onednn);
    return;
  }
  double own =
      time_us([&] { kiln::cpu::matvec_f32(y.data(), x.data(), w.data(), k, b.data(), 1, n, k); });
  std::printf("batch %3lld  %4lld -> %4lld   onednn %7.2f us   matvec %7.2f us   (%.1fx)\n",
              (long long)batch, (long long)k, (long long)n, onednn, own, onednn / own);
}

}  // namespace

int main() {
  const int64_t shapes[][2] = {{512, 256}, {256, 128}, {128, 2}, {1024, 1024}, {2048, 1024}};
  for (const auto& s : shapes)
    bench(1, s[0], s[1]);
  for (const auto& s : shapes)
    bench(64, s[0], s[1]);
}
