// Cross-checks of the float32 paths (oneDNN's matmul and conv, kiln's GEMM,
// linear's matvec, the direct conv kernel, pooling) against the float64 reference loops on random
// shapes and layouts, plus the primitive cache under threads. The op table (cases_linalg.py,
// cases_conv_pool.py) checks both against PyTorch on fixed shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/conv.h"
#include "kiln/kernels/cpu/matmul.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

#include "test_util.h"

namespace kiln {
namespace {

Tensor f64(const Tensor& t) {
  return t.defined() ? to(t, DType::Float64) : t;
}

// The same values with every dim's stride reversed (a column-major copy).
Tensor reversed_layout(const Tensor& t) {
  IntList reversed(t.shape().rbegin(), t.shape().rend());
  IntList strides = contiguous_strides(reversed);
  std::reverse(strides.begin(), strides.end());
  Tensor view = make_view(empty(reversed, t.dtype()), t.shape(), strides, 0);
  copy_(view, t);
  return view;
}

class LinalgCrossCheck : public testing::Test {
 protected:
  void SetUp() override { manual_seed(1234); }
  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool coin() { return pick(0, 1) == 1; }
  Tensor random(const IntList& shape) {
    Tensor t = randn(shape);
    return coin() && t.dim() >= 2 ? reversed_layout(t) : t;
  }
  std::mt19937 rng_{42};
};

// float32 sums of K terms of N(0,1) products: error grows like sqrt(K) ulps.
double f32_tolerance(int64_t k) {
  return 2e-6 * std::sqrt(double(std::max<int64_t>(k, 1))) + 1e-6;
}

TEST_F(LinalgCrossCheck, MatmulOneDnnMatchesReference) {
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t M = pick(1, 40), K = pick(1, 70), N = pick(1, 40);
    IntList a_shape{M, K}, b_shape{K, N};
    if (coin()) a_shape.insert(a_shape.begin(), pick(1, 3));
    if (coin()) b_shape.insert(b_shape.begin(), a_shape.size() == 3 && coin() ? a_shape[0] : 1);
    Tensor a = random(a_shape), b = random(b_shape);
    Tensor got = matmul(a, b);
    EXPECT_LT(max_rel_error(got, matmul(f64(a), f64(b))), f32_tolerance(K))
        << "a " << to_string(a_shape) << " b " << to_string(b_shape);
  }
}

TEST_F(LinalgCrossCheck, LinearMatvecMatchesReference) {
  for (int64_t k : {1, 7, 16, 17, 64, 129, 512, 700}) {
    for (int64_t n : {1, 2, 3, 4, 5, 128, 257}) {
      Tensor x = randn({1, k}), w = randn({n, k}), b = randn({n});
      EXPECT_LT(max_rel_error(linear(x, w, b), linear(f64(x), f64(w), f64(b))), f32_tolerance(k))
          << "k " << k << " n " << n;
      Tensor x1 = randn({k});  // 1-D input, no bias: the same kernel
      EXPECT_LT(max_rel_error(linear(x1, w), linear(f64(x1), f64(w))), f32_tolerance(k));
    }
  }
}

// A compiled batch-1 linear walks its weight rows the other way on every
// other call (MatvecOptions::bottom_up) and may apply relu as it stores: the
// bits must not depend on the way, for every remainder of rows (n % 4) and
// of k (k % 16) and a strided bias, and relu must equal x < 0 ? 0 : x
// afterwards (NaN passing, as the relu kernel passes it).
TEST_F(LinalgCrossCheck, MatvecWalksEitherWayToTheSameBits) {
  for (int64_t k : {1, 15, 16, 17, 512, 700}) {
    for (int64_t n : {1, 3, 4, 5, 7, 128, 257}) {
      for (int64_t bias_stride : {-1, 0, 1, 3}) {  // -1: no bias; 0: one broadcast
        std::vector<float> x = randn({k}).to_vector<float>();
        std::vector<float> w = randn({n, k + 2}).to_vector<float>();  // rows padded by 2
        std::vector<float> bias = randn({n * 3}).to_vector<float>();
        w[size_t((n - 1) * (k + 2))] = std::nanf("");  // the last row sums to NaN
        const float* b = bias_stride >= 0 ? bias.data() : nullptr;
        auto run = [&](cpu::MatvecOptions options) {
          std::vector<float> y(size_t(n), -1.0f);
          cpu::matvec_f32(y.data(), x.data(), w.data(), k + 2, b, bias_stride, n, k, options);
          return y;
        };
        const std::vector<float> down = run({}), up = run({.bottom_up = true});
        std::vector<float> relu_after = down;
        for (float& v : relu_after)
          v = v < 0 ? 0.0f : v;
        const std::string where = "k " + std::to_string(k) + " n " + std::to_string(n) +
                                  " bias stride " + std::to_string(bias_stride);
        EXPECT_EQ(std::memcmp(down.data(), up.data(), down.size() * sizeof(float)), 0) << where;
        for (bool bottom_up : {false, true}) {
          const std::vector<float> relu = run({.bottom_up = bottom_up, .relu = true});
          EXPECT_EQ(std::memcmp(relu.data(), relu_after.data(), relu.size() * sizeof(float)), 0)
              << where << " relu, bottom_up " << bottom_up;
        }
        EXPECT_TRUE(std::isnan(down.back())) << where;
        // And the sum itself, against float64.
        for (int64_t j = 0; j + 1 < n; ++j) {
          double want = b ? b[j * bias_stride] : 0;
          for (int64_t i = 0; i < k; ++i)
            want += double(x[size_t(i)]) * w[size_t(j * (k + 2) + i)];
          EXPECT_NEAR(down[size_t(j)], want, f32_tolerance(k) * (1 + std::fabs(want)))
              << "row " << j << " " << where;
        }
      }
    }
  }
}

// A few columns over many rows (a classifier's head): four rows of x at a
// time, the last block repeating its last row. Every row against float64,
// rows padded, a strided bias, relu in the store, a NaN row passing.
TEST_F(LinalgCrossCheck, MatvecRowsMatchReference) {
  for (int64_t rows : {2, 3, 4, 5, 9, 64}) {
    for (int64_t n : {1, 2, 4}) {
      for (int64_t k : {1, 15, 16, 17, 128}) {
        const int64_t x_stride = k + 3, y_stride = n + 1, bias_stride = 2;
        std::vector<float> x = randn({rows, x_stride}).to_vector<float>();
        std::vector<float> w = randn({n, k}).to_vector<float>();
        std::vector<float> bias = randn({n * bias_stride}).to_vector<float>();
        x[size_t((rows - 1) * x_stride)] = std::nanf("");  // the last row sums to NaN
        for (bool relu : {false, true}) {
          std::vector<float> y(size_t(rows * y_stride), 7.0f);
          cpu::matvec_rows_f32({y.data(), y_stride, x.data(), x_stride, rows}, w.data(), k,
                               bias.data(), bias_stride, n, k, relu);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < n; ++j) {
              double want = bias[size_t(j * bias_stride)];
              for (int64_t i = 0; i < k; ++i)
                want += double(x[size_t(r * x_stride + i)]) * w[size_t(j * k + i)];
              if (relu && want < 0) want = 0;
              const float got = y[size_t(r * y_stride + j)];
              if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got)) << "row " << r << " relu " << relu;
                continue;
              }
              EXPECT_NEAR(got, want, f32_tolerance(k) * (1 + std::fabs(want)))
                  << "rows " << rows << " n " << n << " k " << k << " row " << r;
            }
            EXPECT_EQ(y[size_t(r * y_stride + n)], 7.0f) << "the padding is not written";
            std::vector<float> alone(static_cast<size_t>(n));  // the row at batch 1: the same bits
            cpu::matvec_f32(alone.data(), x.data() + r * x_stride, w.data(), k, bias.data(),
                            bias_stride, n, k, {.relu = relu});
            EXPECT_EQ(std::memcmp(alone.data(), y.data() + r * y_stride, alone.size() * 4), 0)
                << "rows " << rows << " n " << n << " k " << k << " row " << r;
          }
        }
      }
    }
  }
  // Through linear: 3 columns over 50 rows (a column-major input goes to
  // oneDNN, a contiguous one to the rows kernel).
  Tensor x = reversed_layout(randn({50, 33})), w = randn({3, 33}), b = randn({3});
  EXPECT_LT(max_rel_error(linear(x, w, b), linear(f64(x), f64(w), f64(b))), f32_tolerance(33));
  Tensor xc = randn({50, 33});
  EXPECT_LT(max_rel_error(linear(xc, w, b), linear(f64(xc), f64(w), f64(b))), f32_tolerance(33));
}

// Batched linear and matmul shapes that kiln's GEMM takes (batch dims folded
// into rows) and views it must leave to oneDNN (rows of x not evenly spaced:
// a slice of the token dim), against float64.
TEST_F(LinalgCrossCheck, BatchedProductsMatchReference) {
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t B = pick(1, 3), T = pick(2, 9), K = pick(1, 300), N = pick(5, 40);
    Tensor x = randn({B, T, K});                                       // folds into B * T rows
    if (trial % 3 == 1) x = slice(randn({B, T + 2, K}), 1, 1, T + 1);  // gaps between batches
    if (trial % 3 == 2) x = slice(randn({B, T, K + 3}), 2, 0, K);      // padded rows: folds too
    Tensor w = randn({N, K}), b = randn({N});
    EXPECT_LT(max_rel_error(linear(x, w, b), linear(f64(x), f64(w), f64(b))), f32_tolerance(K))
        << "x " << to_string(x.shape()) << " strides " << to_string(x.strides()) << " N " << N;
    Tensor rhs = coin() ? randn({K, N}) : t(randn({N, K}));
    EXPECT_LT(max_rel_error(matmul(x, rhs), matmul(f64(x), f64(rhs))), f32_tolerance(K))
        << "x " << to_string(x.shape()) << " rhs strides " << to_string(rhs.strides());
  }
}

TEST_F(LinalgCrossCheck, AddmmScalesMatchReference) {
  Tensor input = randn({5, 6}), m1 = reversed_layout(randn({5, 9})), m2 = randn({9, 6});
  for (auto [beta, alpha] : {std::pair{1.0, 1.0}, {0.5, 2.0}, {0.0, -1.5}, {3.0, 0.0}}) {
    Tensor got = addmm(input, m1, m2, beta, alpha);
    EXPECT_LT(max_rel_error(got, addmm(f64(input), f64(m1), f64(m2), beta, alpha)),
              f32_tolerance(9))
        << "beta " << beta << " alpha " << alpha;
  }
}

TEST_F(LinalgCrossCheck, Conv2dOneDnnMatchesReference) {
  for (int trial = 0; trial < 25; ++trial) {
    const int64_t groups = pick(1, 3), icg = pick(1, 3), ocg = pick(1, 3);
    const int64_t kh = pick(1, 4), kw = pick(1, 4);
    const IntList stride{pick(1, 3), pick(1, 3)}, dilation{pick(1, 2), pick(1, 2)};
    const IntList padding{pick(0, 2), pick(0, 2)};
    const int64_t h = pick(dilation[0] * (kh - 1) + 1, 12),
                  w = pick(dilation[1] * (kw - 1) + 1, 12);
    Tensor x = random({pick(1, 2), groups * icg, h, w});
    Tensor weight = random({groups * ocg, icg, kh, kw});
    Tensor bias = coin() ? randn({groups * ocg}) : Tensor();
    Tensor got = conv2d(x, weight, bias, stride, padding, dilation, groups);
    Tensor want = conv2d(f64(x), f64(weight), f64(bias), stride, padding, dilation, groups);
    EXPECT_LT(max_rel_error(got, want), f32_tolerance(icg * kh * kw))
        << "x " << to_string(x.shape()) << " w " << to_string(weight.shape()) << " groups "
        << groups;
  }
}

// Small float32 convolutions take kiln's direct kernel (groups 1, no
// dilation, <= 16 output channels): every block size and tail it has.
TEST_F(LinalgCrossCheck, Conv2dDirectKernelMatchesReference) {
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t oc = pick(1, 16), ic = pick(1, 6), kh = pick(1, 5), kw = pick(1, 5);
    const IntList stride{pick(1, 3), pick(1, 3)}, padding{pick(0, 2), pick(0, 2)};
    // Up to 30 wide: rows of 8 or more take the row blocking.
    const int64_t h = pick(std::max<int64_t>(kh - 2 * padding[0], 1), 13);
    const int64_t w = pick(std::max<int64_t>(kw - 2 * padding[1], 1), 30);
    Tensor x = random({pick(1, 3), ic, h, w});
    Tensor weight = random({oc, ic, kh, kw});
    Tensor bias = coin() ? randn({oc}) : Tensor();
    Tensor got = conv2d(x, weight, bias, stride, padding, {1, 1}, 1);
    Tensor want = conv2d(f64(x), f64(weight), f64(bias), stride, padding, {1, 1}, 1);
    EXPECT_LT(max_rel_error(got, want), f32_tolerance(ic * kh * kw))
        << "x " << to_string(x.shape()) << " w " << to_string(weight.shape()) << " stride "
        << to_string(stride) << " padding " << to_string(padding);
  }
}

// The direct kernel's fused activations store what applying relu or sigmoid
// to its output afterwards gives, to the bit, in both register blockings.
TEST_F(LinalgCrossCheck, Conv2dDirectKernelFusedActivations) {
  for (int trial = 0; trial < 30; ++trial) {
    cpu::Conv2dParams p;
    p.stride[0] = pick(1, 2), p.stride[1] = pick(1, 2);
    p.padding[0] = pick(0, 2), p.padding[1] = pick(0, 2);
    const int64_t oc = pick(1, 16), ic = pick(1, 4), k = pick(1, 5);
    Tensor x = random({1, ic, pick(k, 14), pick(k, 30)});
    Tensor weight = random({oc, ic, k, k}), bias = randn({oc});
    const int64_t oh = (x.size(2) + 2 * p.padding[0] - k) / p.stride[0] + 1;
    const int64_t ow = (x.size(3) + 2 * p.padding[1] - k) / p.stride[1] + 1;
    Tensor plain = empty({1, oc, oh, ow});
    ASSERT_TRUE(cpu::conv2d_direct_f32_applies(view_of(plain), view_of(x), view_of(weight), p));
    cpu::conv2d_direct_f32(view_of(plain), view_of(x), view_of(weight), view_of(bias), p);
    for (auto [activation, after] : {std::pair{cpu::ConvActivation::Relu, relu(plain)},
                                     std::pair{cpu::ConvActivation::Sigmoid, sigmoid(plain)}}) {
      Tensor fused = empty_like(plain);
      cpu::conv2d_direct_f32(view_of(fused), view_of(x), view_of(weight), view_of(bias), p,
                             activation);
      EXPECT_EQ(std::memcmp(fused.data_ptr(), after.data_ptr(), size_t(after.numel()) * 4), 0)
          << "x " << to_string(x.shape()) << " w " << to_string(weight.shape());
    }
  }
}

// The 2x2 / stride-2 float32 average runs eight outputs at a time; each must
// be ((((0 + a) + b) + c) + d) / 4, the general loop's order, to the bit
// (signed zeros, infinities and NaN included).
TEST(AvgPool, TwoByTwoVectorPathKeepsTheLoopOrder) {
  const float specials[] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 3.5f};
  Tensor x = randn({2, 3, 6, 38});  // 19 outputs a row: two blocks of 8 and a tail
  float* data = static_cast<float*>(x.data_ptr());
  for (int64_t i = 0; i < x.numel(); i += 3)
    data[i] = specials[(i / 3) % 8];
  for (int64_t i = 0; i < x.numel(); i += 7)
    data[i] = -0.0f;
  Tensor y = avg_pool2d(x, {2, 2}, {2, 2});
  ASSERT_EQ(y.shape(), (IntList{2, 3, 3, 19}));
  const float* out = static_cast<const float*>(y.data_ptr());
  for (int64_t plane = 0; plane < 6; ++plane) {
    for (int64_t oh = 0; oh < 3; ++oh) {
      for (int64_t ow = 0; ow < 19; ++ow) {
        const float* r0 = data + plane * 6 * 38 + (2 * oh) * 38 + 2 * ow;
        const float* r1 = r0 + 38;
        float sum = 0.0f + r0[0];
        sum = ((sum + r0[1]) + r1[0]) + r1[1];
        const float want = sum / 4.0f, got = out[(plane * 3 + oh) * 19 + ow];
        EXPECT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
            << "plane " << plane << " oh " << oh << " ow " << ow << ": " << got << " vs " << want;
      }
    }
  }
}

TEST_F(LinalgCrossCheck, PoolingFloat32MatchesFloat64) {
  for (int trial = 0; trial < 30; ++trial) {
    const IntList kernel{pick(1, 4), pick(1, 4)}, stride{pick(1, 3), pick(1, 3)};
    const IntList padding{pick(0, kernel[0] / 2), pick(0, kernel[1] / 2)};
    const bool ceil_mode = coin(), include_pad = coin();
    Tensor x = random({pick(1, 2), pick(1, 3), pick(kernel[0], 11), pick(kernel[1], 11)});
    EXPECT_LT(max_rel_error(max_pool2d(x, kernel, stride, padding, {1, 1}, ceil_mode),
                            max_pool2d(f64(x), kernel, stride, padding, {1, 1}, ceil_mode)),
              1e-7);
    EXPECT_LT(max_rel_error(avg_pool2d(x, kernel, stride, padding, ceil_mode, include_pad),
                            avg_pool2d(f64(x), kernel, stride, padding, ceil_mode, include_pad)),
              1e-6)
        << "x " << to_string(x.shape()) << " k " << to_string(kernel) << " s " << to_string(stride)
        << " p " << to_string(padding) << " ceil " << ceil_mode;
    const IntList out{pick(1, x.size(2)), pick(1, x.size(3))};
    EXPECT_LT(max_rel_error(adaptive_avg_pool2d(x, out), adaptive_avg_pool2d(f64(x), out)), 1e-6);
  }
}

TEST(LinalgCache, ConcurrentCallsShareCachedPrimitives) {
  manual_seed(7);
  Tensor a = randn({4, 33, 17}), b = randn({17, 9});
  Tensor x = randn({2, 3, 10, 10}), w = randn({5, 3, 3, 3});
  const std::vector<double> mm = matmul(a, b).to_vector<double>();
  const std::vector<double> cv = conv2d(x, w).to_vector<double>();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      bool same = true;
      for (int i = 0; i < 20; ++i) {
        same = same && matmul(a, b).to_vector<double>() == mm;
        same = same && conv2d(x, w).to_vector<double>() == cv;
      }
      ok[size_t(t)] = same;
    });
  }
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_TRUE(ok[size_t(t)]) << "thread " << t;
}

TEST(LinalgApi, ResultsAndShapes) {
  Tensor a = tensor({{1.f, 2.f}, {3.f, 4.f}});
  EXPECT_EQ(matmul(a, a).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(matmul(tensor({1.f, 2.f}), tensor({3.f, 4.f})).item<double>(), 11.0);
  EXPECT_EQ(linear(randn({2, 3, 4}), randn({5, 4}), randn({5})).shape(), (IntList{2, 3, 5}));
  EXPECT_EQ(conv2d(randn({6, 9, 9}), randn({2, 6, 3, 3})).shape(), (IntList{2, 7, 7}));
  EXPECT_EQ(max_pool2d(randn({1, 1, 5, 5}), {2}, {}, {0}, {1}, true).shape(),
            (IntList{1, 1, 3, 3}));
}

TEST(LinalgApi, BadInputThrowsKilnError) {
  EXPECT_THROW(matmul(randn({2, 3}), randn({4, 5})), Error);
  EXPECT_THROW(conv2d(randn({1, 2, 5, 5}), randn({3, 2, 3})), Error);
  EXPECT_THROW(conv2d(randn({1, 2, 5, 5}), randn({3, 2, 3, 3}), {}, {0, 1}), Error);
  EXPECT_THROW(max_pool2d(randn({1, 1, 4, 4}), {2, 2, 2}), Error);
  EXPECT_THROW(avg_pool2d(randn({1, 1, 4, 4}), {0, 2}), Error);
  EXPECT_THROW(adaptive_avg_pool2d(randn({1, 1, 4, 4}), {-1, 2}), Error);
}

// max/avg pooling run our loops (faster on NCHW); oneDNN's pooling is kept
// for the benchmark, so it must still agree with them.
TEST_F(LinalgCrossCheck, PoolingOneDnnPathAgreesWithTheLoops) {
  for (int trial = 0; trial < 30; ++trial) {
    cpu::Pool2dParams p;
    p.kernel[0] = pick(1, 4), p.kernel[1] = pick(1, 4);
    p.stride[0] = pick(1, 3), p.stride[1] = pick(1, 3);
    p.padding[0] = pick(0, p.kernel[0] / 2), p.padding[1] = pick(0, p.kernel[1] / 2);
    p.count_include_pad = coin();
    Tensor x = random({pick(1, 2), pick(1, 3), pick(p.kernel[0], 11), pick(p.kernel[1], 11)});
    IntList kernel{p.kernel[0], p.kernel[1]}, stride{p.stride[0], p.stride[1]};
    IntList padding{p.padding[0], p.padding[1]};
    Tensor want_max = max_pool2d(x, kernel, stride, padding);
    Tensor got_max = empty_like(want_max);
    cpu::max_pool2d_onednn(view_of(got_max), view_of(x), p);
    EXPECT_EQ(got_max.to_vector<float>(), want_max.to_vector<float>());
    Tensor want_avg = avg_pool2d(x, kernel, stride, padding, false, p.count_include_pad);
    Tensor got_avg = empty_like(want_avg);
    ASSERT_TRUE(cpu::avg_pool2d_onednn_matches(view_of(got_avg), view_of(x), p));
    cpu::avg_pool2d_onednn(view_of(got_avg), view_of(x), p);
    EXPECT_LT(max_rel_error(got_avg, want_avg), 1e-6);
  }
}

}  // namespace
}  // namespace kiln
