// The depthwise float32 kernel (conv_depthwise.cpp) against the float64
// reference loop: odd channel counts, 1x1 images, strides larger than the
// kernel, padding wider than the kernel, strided inputs, batches, with and
// without bias; through conv2d() (eager) and Conv2dPlan (compiled plans).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/conv.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

#include "test_util.h"

namespace kiln {
namespace {

Tensor f64(const Tensor& t) {
  return t.defined() ? to(t, DType::Float64) : t;
}

cpu::StridedView view_or_none(const Tensor& t) {
  return t.defined() ? view_of(t) : cpu::StridedView{};
}

class DepthwiseConv : public testing::Test {
 protected:
  void SetUp() override { manual_seed(77); }
  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  std::mt19937 rng_{7};
};

struct Case {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
};

// One case through conv2d() and through a Conv2dPlan of its geometry.
void check(const Case& k, bool bias_present, bool strided_input) {
  Tensor x = randn({k.n, k.c, k.h, k.w});
  if (strided_input) x = transpose(randn({k.n, k.c, k.w, k.h}), 2, 3);  // W-stride != 1
  Tensor weight = randn({k.c, 1, k.kh, k.kw});
  Tensor bias = bias_present ? randn({k.c}) : Tensor();
  const IntList stride{k.sh, k.sw}, padding{k.ph, k.pw};
  Tensor want = conv2d(f64(x), f64(weight), f64(bias), stride, padding, {1, 1}, k.c);
  Tensor got = conv2d(x, weight, bias, stride, padding, {1, 1}, k.c);
  const std::string what = "x " + to_string(x.shape()) + " w " + to_string(weight.shape()) +
                           " stride " + to_string(stride) + " padding " + to_string(padding);
  EXPECT_LT(max_rel_error(got, want), 2e-6 * std::sqrt(double(k.kh * k.kw)) + 1e-6) << what;

  cpu::Conv2dParams p;
  p.groups = k.c;
  p.stride[0] = k.sh, p.stride[1] = k.sw, p.padding[0] = k.ph, p.padding[1] = k.pw;
  Tensor planned = empty(want.shape());
  ASSERT_TRUE(cpu::conv2d_depthwise_f32_applies(view_of(planned), view_of(x), view_of(weight), p))
      << what;
  cpu::Conv2dPlan plan(view_of(planned), view_of(x), view_of(weight), view_or_none(bias), p);
  plan.run(view_of(planned), view_of(x), view_of(weight), view_or_none(bias));
  EXPECT_EQ(max_rel_error(planned, got), 0.0) << what;
}

TEST_F(DepthwiseConv, MobileNetShapes) {
  // MobileNetV3-Small's layers, shrunk in channels.
  for (Case k : {Case{1, 16, 112, 112, 3, 3, 2, 2, 1, 1}, Case{1, 9, 28, 28, 3, 3, 1, 1, 1, 1},
                 Case{1, 7, 28, 28, 5, 5, 2, 2, 2, 2}, Case{1, 13, 14, 14, 5, 5, 1, 1, 2, 2},
                 Case{2, 5, 7, 7, 5, 5, 1, 1, 2, 2}}) {
    check(k, true, false);
  }
}

TEST_F(DepthwiseConv, OddShapes) {
  // 1x1 images, a stride larger than the kernel, padding wider than the
  // kernel, rectangular kernels and strides, rows that are not whole vectors.
  for (Case k : {Case{1, 3, 1, 1, 1, 1, 1, 1, 0, 0}, Case{1, 5, 1, 1, 3, 3, 1, 1, 1, 1},
                 Case{3, 3, 9, 11, 1, 1, 3, 4, 0, 0}, Case{1, 11, 10, 33, 2, 3, 3, 2, 0, 1},
                 Case{1, 2, 5, 6, 3, 5, 2, 1, 3, 4}, Case{2, 17, 40, 41, 7, 7, 1, 1, 3, 3}}) {
    check(k, false, false);
    check(k, true, true);
  }
}

TEST_F(DepthwiseConv, RandomShapes) {
  for (int trial = 0; trial < 60; ++trial) {
    Case k{};
    k.n = pick(1, 2), k.c = pick(2, 19), k.kh = pick(1, 5), k.kw = pick(1, 5);
    k.sh = pick(1, 3), k.sw = pick(1, 3), k.ph = pick(0, 3), k.pw = pick(0, 3);
    k.h = pick(std::max<int64_t>(k.kh - 2 * k.ph, 1), 20);
    k.w = pick(std::max<int64_t>(k.kw - 2 * k.pw, 1), 45);
    check(k, pick(0, 1) == 1, pick(0, 1) == 1);
  }
}

// relu applied as the kernel stores gives the bits of relu over its output:
// NaN passes, -0 stays -0 (a plan whose conv2d_act asked it to, take_relu).
TEST_F(DepthwiseConv, ReluAsItStoresEqualsReluAfterwards) {
  Tensor x = randn({1, 6, 9, 10}), weight = randn({6, 1, 3, 3}), bias = randn({6});
  float* data = static_cast<float*>(x.data_ptr());
  data[0] = NAN;
  cpu::Conv2dParams p;
  p.groups = 6, p.padding[0] = p.padding[1] = 1;
  Tensor plain = empty({1, 6, 9, 10}), fused = empty({1, 6, 9, 10});
  cpu::conv2d_depthwise_f32(view_of(plain), view_of(x), view_of(weight), view_of(bias), p);
  Tensor after = relu(plain);
  cpu::conv2d_depthwise_f32(view_of(fused), view_of(x), view_of(weight), view_of(bias), p, true);
  EXPECT_EQ(std::memcmp(fused.data_ptr(), after.data_ptr(), size_t(after.numel()) * 4), 0);
  cpu::Conv2dPlan plan(view_of(fused), view_of(x), view_of(weight), view_of(bias), p);
  ASSERT_TRUE(plan.take_relu());
  plan.run(view_of(fused), view_of(x), view_of(weight), view_of(bias));
  EXPECT_EQ(std::memcmp(fused.data_ptr(), after.data_ptr(), size_t(after.numel()) * 4), 0);
}

// Channel multipliers, dilation and float64 are not depthwise's: they keep
// oneDNN or the loop, and the kernel says it does not apply.
TEST_F(DepthwiseConv, OtherGroupedConvolutionsDoNotApply) {
  cpu::Conv2dParams p;
  p.groups = 4;
  Tensor x = randn({1, 4, 8, 8}), multiplier = randn({8, 1, 3, 3}), out = empty({1, 8, 6, 6});
  EXPECT_FALSE(cpu::conv2d_depthwise_f32_applies(view_of(out), view_of(x), view_of(multiplier), p));
  p.dilation[0] = 2;
  Tensor w = randn({4, 1, 3, 3}), dilated_out = empty({1, 4, 4, 6});
  EXPECT_FALSE(cpu::conv2d_depthwise_f32_applies(view_of(dilated_out), view_of(x), view_of(w), p));
  Tensor got = conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {2, 1}, 4);
  Tensor want = conv2d(f64(x), f64(w), Tensor(), {1, 1}, {0, 0}, {2, 1}, 4);
  EXPECT_LT(max_rel_error(got, want), 1e-5);
}

}  // namespace
}  // namespace kiln
