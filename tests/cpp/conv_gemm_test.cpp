// The GEMM convolutions (conv_gemm.cpp) against the float64 loop. Frames (a
// 1-D convolution of one input channel with a long kernel, read in place):
// hops shorter and longer than the kernel, one frame, filters that are not
// whole panels, batches, rows and columns. Patches (few output pixels):
// padding wider than the image, strides, dilation, strided inputs. With and
// without bias and an epilogue; eager conv2d(), a plan's run() and its
// run_packed() (the filters packed once per version) give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * sizeof(float)) == 0;
}

Tensor f64(const Tensor& t) {
  return t.defined() ? to(t, DType::Float64) : t;
}

cpu::StridedView view_or_none(const Tensor& t) {
  return t.defined() ? view_of(t) : cpu::StridedView{};
}

struct Case {
  int64_t n, samples, filters, taps, hop;
};

class GemmConv : public testing::Test {
 protected:
  void SetUp() override { manual_seed(5); }
};

// One case as a row ([N, 1, 1, samples]) through conv2d, a plan's run and
// run_packed, and the same as a column.
void check(const Case& k, bool bias_present) {
  Tensor x = randn({k.n, 1, 1, k.samples});
  Tensor weight = randn({k.filters, 1, 1, k.taps});
  Tensor bias = bias_present ? randn({k.filters}) : Tensor();
  const IntList stride{1, k.hop};
  const std::string what = "x " + to_string(x.shape()) + " w " + to_string(weight.shape()) +
                           " hop " + std::to_string(k.hop);
  Tensor want = conv2d(f64(x), f64(weight), f64(bias), stride, {0, 0}, {1, 1}, 1);
  Tensor got = conv2d(x, weight, bias, stride, {0, 0}, {1, 1}, 1);
  EXPECT_LT(max_rel_error(got, want), 2e-6 * std::sqrt(double(k.taps))) << what;

  cpu::Conv2dParams p;
  p.stride[1] = k.hop;
  Tensor planned = empty(want.shape()), packed = empty(want.shape());
  ASSERT_TRUE(cpu::conv2d_gemm_f32_applies(view_of(planned), view_of(x), view_of(weight), p))
      << what;
  cpu::Conv2dPlan plan(view_of(planned), view_of(x), view_of(weight), view_or_none(bias), p);
  ASSERT_TRUE(plan.packs_weights()) << what;
  plan.run(view_of(planned), view_of(x), view_of(weight), view_or_none(bias));
  EXPECT_TRUE(same_bits(planned, got)) << what;
  plan.run_packed(view_of(packed), view_of(x), view_of(weight), view_or_none(bias), 1);
  EXPECT_TRUE(same_bits(packed, got)) << what;

  // The column form: the same memory, the same bits.
  Tensor column =
      conv2d(reshape(x, {k.n, 1, k.samples, 1}), reshape(weight, {k.filters, 1, k.taps, 1}), bias,
             {k.hop, 1}, {0, 0}, {1, 1}, 1);
  EXPECT_TRUE(same_bits(column, got)) << what;
}

TEST_F(GemmConv, StftShapes) {
  // openwakeword's melspectrogram and silero VAD's STFT, then longer audio.
  for (Case k :
       {Case{1, 1760, 257, 512, 160}, Case{1, 704, 258, 128, 64}, Case{2, 16000, 65, 128, 32}}) {
    check(k, false);
    check(k, true);
  }
}

TEST_F(GemmConv, OddShapes) {
  // One frame, a hop longer than the kernel (gaps between frames), a hop
  // of 1, filters one past a panel or fewer than one, the smallest kernel
  // it takes, a trailing part of the signal no frame reaches.
  for (Case k : {Case{1, 64, 8, 64, 5}, Case{3, 500, 17, 40, 97}, Case{1, 90, 9, 32, 1},
                 Case{2, 333, 33, 100, 7}, Case{1, 129, 16, 128, 128}}) {
    check(k, true);
    check(k, false);
  }
}

struct PatchCase {
  int64_t n, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw;
};

void check_patches(const PatchCase& k, bool bias_present, bool strided_input) {
  Tensor x = randn({k.n, k.c, k.h, k.w});
  if (strided_input) x = transpose(randn({k.n, k.c, k.w, k.h}), 2, 3);
  Tensor weight = randn({k.oc, k.c, k.kh, k.kw});
  Tensor bias = bias_present ? randn({k.oc}) : Tensor();
  const IntList stride{k.sh, k.sw}, padding{k.ph, k.pw}, dilation{k.dh, k.dw};
  const std::string what = "x " + to_string(x.shape()) + " w " + to_string(weight.shape()) +
                           " stride " + to_string(stride) + " padding " + to_string(padding) +
                           " dilation " + to_string(dilation);
  Tensor want = conv2d(f64(x), f64(weight), f64(bias), stride, padding, dilation, 1);
  Tensor got = conv2d(x, weight, bias, stride, padding, dilation, 1);
  EXPECT_LT(max_rel_error(got, want), 2e-6 * std::sqrt(double(k.c * k.kh * k.kw))) << what;

  cpu::Conv2dParams p;
  p.stride[0] = k.sh, p.stride[1] = k.sw, p.padding[0] = k.ph, p.padding[1] = k.pw;
  p.dilation[0] = k.dh, p.dilation[1] = k.dw;
  Tensor planned = empty(want.shape()), packed = empty(want.shape());
  ASSERT_TRUE(cpu::conv2d_gemm_f32_applies(view_of(planned), view_of(x), view_of(weight), p))
      << what;
  cpu::Conv2dPlan plan(view_of(planned), view_of(x), view_of(weight), view_or_none(bias), p);
  plan.run(view_of(planned), view_of(x), view_of(weight), view_or_none(bias));
  EXPECT_TRUE(same_bits(planned, got)) << what;
  plan.run_packed(view_of(packed), view_of(x), view_of(weight), view_or_none(bias), 1);
  EXPECT_TRUE(same_bits(packed, got)) << what;
}

TEST_F(GemmConv, FewPixelShapes) {
  // silero VAD's encoder (1-D, 3 taps, 4 to 1 pixels), then 2-D kernels: a
  // 4x4 image, padding wider than a 1x1 image, strides and dilation, a batch.
  for (PatchCase k : {PatchCase{1, 129, 1, 4, 128, 1, 3, 1, 1, 0, 1, 1, 1},
                      PatchCase{1, 128, 1, 4, 64, 1, 3, 1, 2, 0, 1, 1, 1},
                      PatchCase{1, 64, 1, 1, 128, 1, 3, 1, 1, 0, 1, 1, 1},
                      PatchCase{2, 5, 4, 4, 20, 3, 3, 1, 1, 1, 1, 1, 1},
                      PatchCase{1, 3, 1, 1, 17, 3, 3, 1, 1, 2, 2, 1, 1},
                      PatchCase{3, 7, 9, 8, 33, 3, 2, 3, 4, 1, 0, 2, 1},
                      PatchCase{1, 16, 5, 5, 40, 5, 5, 2, 2, 0, 0, 1, 1}}) {
    check_patches(k, true, false);
    check_patches(k, false, true);
  }
}

// Many pixels, few filters, 1x1 kernels, and weights whose (c, kh, kw) one
// stride does not walk keep the other kernels.
TEST_F(GemmConv, OtherSmallConvolutionsDoNotApply) {
  cpu::Conv2dParams p;
  p.padding[0] = p.padding[1] = 1;
  auto applies = [&](const Tensor& out, const Tensor& x, const Tensor& w) {
    return cpu::conv2d_gemm_f32_applies(view_of(out), view_of(x), view_of(w), p);
  };
  Tensor x = randn({1, 8, 4, 4}), w = randn({32, 8, 3, 3});
  EXPECT_TRUE(applies(empty({1, 32, 4, 4}), x, w));
  EXPECT_FALSE(applies(empty({1, 32, 4, 5}), randn({1, 8, 4, 5}), w));  // 20 pixels
  EXPECT_FALSE(applies(empty({1, 16, 4, 4}), x, randn({16, 8, 3, 3})));
  Tensor permuted = permute(randn({8, 32, 3, 3}), {1, 0, 2, 3});
  EXPECT_FALSE(applies(empty({1, 32, 4, 4}), x, permuted));
  Tensor got = conv2d(x, permuted, Tensor(), {1, 1}, {1, 1}, {1, 1}, 1);
  Tensor want = conv2d(f64(x), f64(permuted), Tensor(), {1, 1}, {1, 1}, {1, 1}, 1);
  EXPECT_LT(max_rel_error(got, want), 2e-5);
  p.padding[0] = p.padding[1] = 0;
  EXPECT_FALSE(applies(empty({1, 32, 1, 1}), randn({1, 64, 1, 1}), randn({32, 64, 1, 1})));
}

// A plan made for contiguous weights and run with weights of the same shape
// in another layout (whose (c, kh, kw) no one stride walks) copies them first.
TEST_F(GemmConv, PlanTakesWeightsOfOtherStrides) {
  Tensor x = randn({1, 6, 1, 4}), dense = randn({24, 6, 1, 3});
  Tensor permuted_w = permute(randn({6, 24, 1, 3}), {1, 0, 2, 3});
  cpu::Conv2dParams p;
  p.padding[1] = 1;
  Tensor out = empty({1, 24, 1, 4}), packed = empty({1, 24, 1, 4});
  cpu::Conv2dPlan plan(view_of(out), view_of(x), view_of(dense), cpu::StridedView{}, p);
  plan.run(view_of(out), view_of(x), view_of(permuted_w), cpu::StridedView{});
  plan.run_packed(view_of(packed), view_of(x), view_of(permuted_w), cpu::StridedView{}, 1);
  Tensor want = conv2d(f64(x), f64(permuted_w), Tensor(), {1, 1}, {0, 1}, {1, 1}, 1);
  EXPECT_LT(max_rel_error(out, want), 1e-5);
  EXPECT_LT(max_rel_error(packed, want), 1e-5);
}

// A new version of the weights is packed again; the same version is not.
TEST_F(GemmConv, RunPackedFollowsTheWeightsVersion) {
  Tensor x = randn({1, 1, 1, 400}), weight = randn({20, 1, 1, 64});
  cpu::Conv2dParams p;
  p.stride[1] = 16;
  Tensor out = empty({1, 20, 1, 22});
  cpu::Conv2dPlan plan(view_of(out), view_of(x), view_of(weight), cpu::StridedView{}, p);
  plan.run_packed(view_of(out), view_of(x), view_of(weight), cpu::StridedView{}, 1);
  Tensor first = clone(out);
  Tensor doubled = mul(weight, 2.0);  // the weights after an update
  plan.run_packed(view_of(out), view_of(x), view_of(doubled), cpu::StridedView{}, 1);
  EXPECT_TRUE(same_bits(out, first));  // version 1 is still the old weights
  plan.run_packed(view_of(out), view_of(x), view_of(doubled), cpu::StridedView{}, 2);
  EXPECT_TRUE(same_bits(out, conv2d(x, doubled, Tensor(), {1, 16}, {0, 0}, {1, 1}, 1)));
}

// A fused epilogue (residual, then relu) over the frames' output: the bits
// of the ops one after the other, eager and planned.
TEST_F(GemmConv, EpilogueMatchesTheOpsAfterwards) {
  Tensor x = randn({2, 1, 1, 700}), weight = randn({24, 1, 1, 96}), bias = randn({24});
  Tensor residual = randn({2, 24, 1, 19});
  cpu::Conv2dParams p;
  p.stride[1] = 32;
  cpu::ConvEpilogue epilogue;
  epilogue.activation = cpu::EpilogueActivation::Relu;
  epilogue.residual = true;
  Tensor want = relu(add(conv2d(x, weight, bias, {1, 32}, {0, 0}, {1, 1}, 1), residual));
  Tensor eager = empty({2, 24, 1, 19}), planned = empty({2, 24, 1, 19});
  cpu::conv2d_fused(view_of(eager), view_of(x), view_of(weight), view_of(bias), view_of(residual),
                    p, epilogue);
  EXPECT_TRUE(same_bits(eager, want));
  cpu::Conv2dPlan plan(view_of(planned), view_of(x), view_of(weight), view_of(bias), p, epilogue);
  plan.run_packed(view_of(planned), view_of(x), view_of(weight), view_of(bias), 3,
                  view_of(residual));
  EXPECT_TRUE(same_bits(planned, want));
}

// What it does not take keeps the other kernels: several input channels,
// padding, dilation, short kernels, few filters, a row that is not
// contiguous, float64.
TEST_F(GemmConv, OtherConvolutionsDoNotApply) {
  cpu::Conv2dParams p;
  p.stride[1] = 16;
  auto applies = [&](const Tensor& out, const Tensor& x, const Tensor& w) {
    return cpu::conv2d_gemm_f32_applies(view_of(out), view_of(x), view_of(w), p);
  };
  Tensor x = randn({1, 1, 1, 256}), w = randn({16, 1, 1, 64}), out = empty({1, 16, 1, 13});
  EXPECT_TRUE(applies(out, x, w));
  EXPECT_FALSE(applies(out, randn({1, 2, 1, 256}), randn({16, 2, 1, 64})));
  EXPECT_FALSE(applies(out, x, randn({16, 1, 1, 31})));
  EXPECT_FALSE(applies(empty({1, 7, 1, 13}), x, randn({7, 1, 1, 64})));
  Tensor strided = slice(randn({1, 1, 1, 512}), 3, 0, 512, 2);
  EXPECT_FALSE(applies(out, strided, w));
  Tensor got = conv2d(strided, w, Tensor(), {1, 16}, {0, 0}, {1, 1}, 1);
  Tensor want = conv2d(f64(strided), f64(w), Tensor(), {1, 16}, {0, 0}, {1, 1}, 1);
  EXPECT_LT(max_rel_error(got, want), 2e-5);
  p.padding[1] = 1;
  EXPECT_FALSE(applies(empty({1, 16, 1, 13}), x, w));
  p.padding[1] = 0, p.dilation[1] = 2;
  EXPECT_FALSE(applies(empty({1, 16, 1, 9}), x, w));
  p.dilation[1] = 1;
  EXPECT_FALSE(applies(to(out, DType::Float64), f64(x), f64(w)));
}

}  // namespace
}  // namespace kiln
