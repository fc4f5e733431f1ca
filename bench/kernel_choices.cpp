// Where kiln uses a kernel of its own instead of oneDNN, this benchmark is
// the reason: both run side by side in one process and the ratio is printed.
//
//   make bench            (or: build/release/bench/kiln_bench_kernels)
//
// 1. Batch-1 linear (the W1 MLP shapes): cpu::matvec_f32, an AVX2 dot-product
//    kernel, against oneDNN's matmul. oneDNN's fixed per-call cost dominates
//    small shapes; the two tie at about 1M weights, so linear takes matvec at
//    batch 1 up to that size. Measured once (1 thread, µs/call): 512->256
//    11.5 vs 8.9, 256->128 4.7 vs 2.3, 128->2 2.9 vs 0.43.
// 2. Max/avg pooling on NCHW (LeNet's 2x2 pools): our loops against oneDNN's
//    pooling, whose fast paths want blocked layouts. Measured once (1 thread,
//    batch 64, 6x28x28 avg pool): oneDNN 1625 µs vs loops 475 µs. Max pooling
//    (on inputs whose maxima move, so branches mispredict as on real data)
//    also shows the general loop its float32 path replaced: on ResNet's 3x3
//    stride-2 pool over 64x112x112, general loop 4658 µs, float32 path 473,
//    oneDNN 346. oneDNN stays out all the same: it drops NaNs (a window
//    holding NaN and 5 gives 5; PyTorch and kiln give NaN).
// 3. Small float32 convolutions (LeNet's two layers; the stems of
//    MobileNetV3 and of PP-OCR's classifier, 3 -> 16 and 3 -> 8 at stride
//    2): cpu::conv2d_direct_f32, vectorized over output channels, against
//    oneDNN's convolution, which reorders the weights into its blocked
//    layout on every call.
// 4. Float32 GEMM with rows of a contiguous (linear layers at batch > 1, most
//    matmuls): cpu::gemm_f32 (packs b per call, as eager does) and
//    cpu::gemm_f32_packed (b packed once, as compiled plans keep weights)
//    against oneDNN's matmul, with bias; GFLOP/s beside the times.
// 5. A float32 LSTM layer at batch 1 (W4's layers: 64 steps, H = 256, and
//    smaller): what a scan's step plan runs per step, cpu::matvec_f32 for
//    h W_hhᵀ + b_hh (walking the other way on every other call, as the
//    prepared product does) and then lstm_cell_pointwise, against
//    cpu::lstm_recurrent_scan_f32, one fused kernel per step over W_hh
//    packed once. µs per step; ratio > 1 means the fused kernel is faster.
// 6. Depthwise float32 convolutions on NCHW at batch 1 (MobileNetV3-Small's
//    3x3 and 5x5 layers, stride 1 and 2): cpu::conv2d_depthwise_f32 against
//    oneDNN's convolution, which takes im2col + GEMM per channel on NCHW.
//
// `kiln_bench_kernels depthwise` (or matvec, pool, conv, gemm, lstm) runs one
// section only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/gemm_f32.h"
#include "kiln/kernels/cpu/matmul.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/kernels/cpu/rnn.h"

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
    const int iters = 100;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      f();
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// A linear layer's operands, y[m, n] = x[m, k] · Wᵀ + b with W [n, k], random
// normal values, and the views oneDNN's matmul takes (Wᵀ as a [K, N] view
// over W's storage, as linear passes it).
struct LinearProblem {
  int64_t m, k, n;
  std::vector<float> x, w, b, y;
  StridedView out, lhs, rhs, bias;

  LinearProblem(int64_t m_, int64_t k_, int64_t n_)
      : m(m_), k(k_), n(n_), x(size_t(m * k)), w(size_t(n * k)), b(size_t(n)), y(size_t(m * n)) {
    std::mt19937 rng(0);
    std::normal_distribution<float> normal;
    for (auto* v : {&x, &w, &b}) {
      for (float& e : *v)
        e = normal(rng);
    }
    out = view2(y.data(), m, n, n, 1);
    lhs = view2(x.data(), m, k, k, 1);
    rhs = view2(w.data(), k, n, 1, k);
    bias.data = b.data();
    bias.ndim = 1;
    bias.shape[0] = n;
    bias.strides[0] = 1;
  }
  void onednn() { kiln::cpu::matmul_onednn_f32(out, lhs, rhs, bias, 1, 0); }
};

void bench(int64_t k, int64_t n) {  // batch 1
  LinearProblem p(1, k, n);
  double onednn = time_us([&] { p.onednn(); });
  double own = time_us(
      [&] { kiln::cpu::matvec_f32(p.y.data(), p.x.data(), p.w.data(), k, p.b.data(), 1, n, k); });
  std::printf("linear batch 1  %4lld -> %4lld   onednn %8.2f us   matvec %8.2f us   %5.1fx\n",
              (long long)k, (long long)n, onednn, own, onednn / own);
}

StridedView view4(float* data, const int64_t (&shape)[4]) {
  StridedView v;
  v.data = data;
  v.ndim = 4;
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

void bench_pool(int64_t batch, int64_t channels, int64_t size, bool average, int64_t kernel = 2,
                int64_t stride = 2, int64_t padding = 0) {
  const int64_t out_size = (size + 2 * padding - kernel) / stride + 1;
  const int64_t in_shape[4] = {batch, channels, size, size};
  const int64_t out_shape[4] = {batch, channels, out_size, out_size};
  std::vector<float> x(size_t(batch * channels * size * size));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float((i * 7919) % 1000) / 1000.0f;  // windows whose max moves
  std::vector<float> y(size_t(batch * channels * out_size * out_size));
  StridedView in = view4(x.data(), in_shape), out = view4(y.data(), out_shape);
  kiln::cpu::Pool2dParams p;
  p.kernel[0] = p.kernel[1] = kernel;
  p.stride[0] = p.stride[1] = stride;
  p.padding[0] = p.padding[1] = padding;
  double onednn = time_us([&] {
    average ? kiln::cpu::avg_pool2d_onednn(out, in, p) : kiln::cpu::max_pool2d_onednn(out, in, p);
  });
  double own = time_us(
      [&] { average ? kiln::cpu::avg_pool2d(out, in, p) : kiln::cpu::max_pool2d(out, in, p); });
  std::printf(
      "%s_pool2d %3lldx%2lldx%3lldx%3lld k%lld s%lld p%lld   onednn %8.2f us   loops  %8.2f us"
      "   %5.1fx",
      average ? "avg" : "max", (long long)batch, (long long)channels, (long long)size,
      (long long)size, (long long)kernel, (long long)stride, (long long)padding, onednn, own,
      onednn / own);
  if (!average) {  // the general loop the float32 path replaced
    double reference = time_us([&] { kiln::cpu::max_pool2d_reference(out, in, p); });
    std::printf("   general loop %8.2f us", reference);
  }
  std::printf("\n");
}

// A convolution's buffers, x, w and the bias normal draws (seed 0), and
// their views: x [n, c, h, w], w [oc, c/groups, kh, kw], y, bias [oc].
struct ConvProblem {
  std::vector<float> x, w, b, y;
  StridedView xv, wv, yv, bv;

  ConvProblem(const int64_t (&x_shape)[4], const int64_t (&w_shape)[4], const int64_t (&y_shape)[4])
      : x(size_t(x_shape[0] * x_shape[1] * x_shape[2] * x_shape[3])),
        w(size_t(w_shape[0] * w_shape[1] * w_shape[2] * w_shape[3])),
        b(size_t(w_shape[0])),
        y(size_t(y_shape[0] * y_shape[1] * y_shape[2] * y_shape[3])) {
    std::mt19937 rng(0);
    std::normal_distribution<float> normal;
    for (std::vector<float>* v : {&x, &w, &b}) {
      for (float& e : *v)
        e = normal(rng);
    }
    xv = view4(x.data(), x_shape);
    wv = view4(w.data(), w_shape);
    yv = view4(y.data(), y_shape);
    bv.data = b.data();
    bv.ndim = 1;
    bv.shape[0] = w_shape[0];
    bv.strides[0] = 1;
  }
};

// LeNet's convolutions: x [batch, c, size, size], w [oc, c, 5, 5], padding p.
void bench_conv(int64_t batch, int64_t c, int64_t size, int64_t oc, int64_t padding) {
  const int64_t out_size = size + 2 * padding - 4;
  const int64_t x_shape[4] = {batch, c, size, size}, w_shape[4] = {oc, c, 5, 5};
  const int64_t y_shape[4] = {batch, oc, out_size, out_size};
  ConvProblem q(x_shape, w_shape, y_shape);
  kiln::cpu::Conv2dParams p;
  p.padding[0] = p.padding[1] = padding;
  double onednn = time_us([&] { kiln::cpu::conv2d_onednn_f32(q.yv, q.xv, q.wv, q.bv, p); });
  double own = time_us([&] { kiln::cpu::conv2d_direct_f32(q.yv, q.xv, q.wv, q.bv, p); });
  std::printf(
      "conv2d %3lldx%2lldx%2lldx%2lld -> %2lld   onednn %8.2f us   direct %8.2f us   %5.1fx\n",
      (long long)batch, (long long)c, (long long)size, (long long)size, (long long)oc, onednn, own,
      onednn / own);
}

// A network's first layer (MobileNetV3's and PP-LCNet's stem): x [1, 3,
// size, size], w [oc, 3, 3, 3], stride 2, padding 1.
void bench_stem(int64_t oc, int64_t size) {
  const int64_t out_size = (size - 1) / 2 + 1;
  const int64_t x_shape[4] = {1, 3, size, size}, w_shape[4] = {oc, 3, 3, 3};
  const int64_t y_shape[4] = {1, oc, out_size, out_size};
  ConvProblem q(x_shape, w_shape, y_shape);
  kiln::cpu::Conv2dParams p;
  p.padding[0] = p.padding[1] = 1;
  p.stride[0] = p.stride[1] = 2;
  double onednn = time_us([&] { kiln::cpu::conv2d_onednn_f32(q.yv, q.xv, q.wv, q.bv, p); });
  double own = time_us([&] { kiln::cpu::conv2d_direct_f32(q.yv, q.xv, q.wv, q.bv, p); });
  std::printf("stem 3x%3lldx%3lld -> %2lld s2   onednn %8.2f us   direct %8.2f us   %5.1fx\n",
              (long long)size, (long long)size, (long long)oc, onednn, own, onednn / own);
}

// A depthwise convolution: x [1, c, size, size], w [c, 1, k, k], padding k / 2.
void bench_depthwise(int64_t c, int64_t size, int64_t k, int64_t stride) {
  const int64_t out_size = (size + 2 * (k / 2) - k) / stride + 1;
  const int64_t x_shape[4] = {1, c, size, size}, w_shape[4] = {c, 1, k, k};
  const int64_t y_shape[4] = {1, c, out_size, out_size};
  ConvProblem q(x_shape, w_shape, y_shape);
  kiln::cpu::Conv2dParams p;
  p.groups = c;
  p.padding[0] = p.padding[1] = k / 2;
  p.stride[0] = p.stride[1] = stride;
  double onednn = time_us([&] { kiln::cpu::conv2d_onednn_f32(q.yv, q.xv, q.wv, q.bv, p); });
  double own = time_us([&] { kiln::cpu::conv2d_depthwise_f32(q.yv, q.xv, q.wv, q.bv, p); });
  std::printf(
      "depthwise %3lldx%3lldx%3lld k%lld s%lld   onednn %8.2f us   ours %8.2f us   %5.1fx\n",
      (long long)c, (long long)size, (long long)size, (long long)k, (long long)stride, onednn, own,
      onednn / own);
}

// kiln's GEMM against oneDNN on a linear layer at batch m.
void bench_gemm(int64_t m, int64_t k, int64_t n) {
  LinearProblem p(m, k, n);
  const kiln::cpu::GemmRows rows{p.y.data(), n, p.x.data(), k, p.b.data(), m};
  const kiln::cpu::GemmB wt{p.w.data(), k, n, 1, k};
  kiln::cpu::PackedB packed;
  packed.pack(wt);
  const double onednn = time_us([&] { p.onednn(); });
  const double per_call = time_us([&] { kiln::cpu::gemm_f32(rows, wt); });
  const double prepacked = time_us([&] { kiln::cpu::gemm_f32_packed(rows, packed); });
  const double gflop = 2e-3 * double(m) * double(n) * double(k);
  std::printf(
      "gemm %4lld x %4lld -> %4lld   onednn %8.1f us (%5.1f GF/s)   packed per call %8.1f us "
      "(%5.1f)   prepacked %8.1f us (%5.1f)   %4.2fx / %4.2fx\n",
      (long long)m, (long long)k, (long long)n, onednn, gflop / onednn, per_call, gflop / per_call,
      prepacked, gflop / prepacked, onednn / per_call, onednn / prepacked);
}

// One LSTM layer of `steps` steps at batch 1, both ways (see 5. above).
void bench_lstm(int64_t hidden, int64_t steps) {
  const int64_t G = 4 * hidden;
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  auto floats = [](int64_t n) { return std::vector<float>(size_t(n)); };
  std::vector<float> w = floats(G * hidden), b = floats(G), gi = floats(steps * G);
  for (auto* v : {&w, &b, &gi}) {
    for (float& e : *v)
      e = uniform(rng);
  }
  std::vector<float> ys = floats(steps * hidden), h = floats(hidden), c = floats(hidden);
  std::vector<float> gh = floats(G), c_next = floats(hidden), h_n = floats(hidden);
  const double plan = time_us([&] {
    std::fill(h.begin(), h.end(), 0.0f);
    std::fill(c.begin(), c.end(), 0.0f);
    for (int64_t t = 0; t < steps; ++t) {
      kiln::cpu::matvec_f32(gh.data(), t ? ys.data() + (t - 1) * hidden : h.data(), w.data(),
                            hidden, b.data(), 1, G, hidden, {.bottom_up = bool(t & 1)});
      kiln::cpu::lstm_cell_pointwise(gi.data() + t * G, gh.data(), c.data(), ys.data() + t * hidden,
                                     c_next.data(), 1, hidden);
      std::swap(c, c_next);
    }
  });
  kiln::cpu::LstmRecurrentWeights packed;
  packed.pack(w.data(), hidden, hidden, hidden);
  const kiln::cpu::LstmScanArgs args{.gi = gi.data(),
                                     .gi_step = G,
                                     .ys = ys.data(),
                                     .ys_step = hidden,
                                     .h0 = h.data(),
                                     .c0 = c.data(),
                                     .b_hh = b.data(),
                                     .h_n = h_n.data(),
                                     .c_n = c_next.data(),
                                     .steps = steps};
  std::fill(h.begin(), h.end(), 0.0f);
  std::fill(c.begin(), c.end(), 0.0f);
  const double fused = time_us([&] { kiln::cpu::lstm_recurrent_scan_f32(packed, args); });
  const double pack = time_us([&] { packed.pack(w.data(), hidden, hidden, hidden); });
  std::printf(
      "lstm batch 1  H %4lld, %3lld steps   matvec + cell %7.2f us/step   fused %7.2f "
      "us/step   %4.2fx   (packing W_hh: %.1f us)\n",
      (long long)hidden, (long long)steps, plan / double(steps), fused / double(steps),
      plan / fused, pack);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  auto wanted = [&](const char* section) { return only.empty() || only == section; };
  std::printf("oneDNN vs kiln's own kernels; ratio > 1 means ours is faster\n");
  const int64_t shapes[][2] = {{512, 256}, {256, 128}, {128, 2}, {1024, 1024}};
  for (const auto& s : shapes) {
    if (wanted("matvec")) bench(s[0], s[1]);
  }
  for (bool average : {true, false}) {
    if (!wanted("pool")) break;
    bench_pool(1, 6, 28, average);
    bench_pool(64, 6, 28, average);
    bench_pool(64, 16, 10, average);
  }
  if (wanted("pool")) {  // ResNet's stem pool, and a stride-1 3x3
    bench_pool(1, 64, 112, false, 3, 2, 1);
    bench_pool(1, 64, 56, false, 3, 1, 1);
  }
  for (int64_t batch : {1, 8, 64}) {
    if (!wanted("conv")) break;
    bench_conv(batch, 1, 28, 6, 2);
    bench_conv(batch, 6, 14, 16, 0);
  }
  if (wanted("conv")) {
    bench_stem(16, 224);
    bench_stem(8, 48);
  }
  if (wanted("gemm")) {
    for (int64_t m : {64, 1024}) {
      bench_gemm(m, 512, 256);
      bench_gemm(m, 256, 128);
    }
    bench_gemm(1024, 1024, 1024);
  }
  for (int64_t hidden : {256, 128, 100, 512}) {
    if (wanted("lstm")) bench_lstm(hidden, 64);
  }
  // MobileNetV3-Small's depthwise layers (channels, size, kernel, stride).
  const int64_t depthwise[][4] = {{16, 112, 3, 2}, {72, 56, 3, 2},  {88, 28, 3, 1},
                                  {96, 28, 5, 2},  {240, 14, 5, 1}, {576, 7, 5, 1}};
  for (const auto& d : depthwise) {
    if (wanted("depthwise")) bench_depthwise(d[0], d[1], d[2], d[3]);
  }
}
