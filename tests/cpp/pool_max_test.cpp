// max_pool2d's float32 fast path (kernels/cpu/pool_max_f32.cpp) against the
// general loop, bit for bit: rows long enough for its eight-wide blocks,
// strides 1 to 3, dilation, padding, ceil_mode's partial windows, NaNs and
// signed zeros (the first of equal values stays, a window with a NaN gives
// NaN), strided inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

class MaxPoolFastPath : public testing::Test {
 protected:
  std::mt19937_64 rng{20261128};
  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  // Values with repeats, signed zeros and (when asked) a few NaNs.
  Tensor input(const IntList& shape, bool with_nan) {
    Tensor x = empty(shape, DType::Float32);
    float* data = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t kind = pick(0, 19);
      data[i] = kind == 0 ? 0.0f : kind == 1 ? -0.0f : float(pick(-6, 6)) / 2.0f;
      if (with_nan && kind == 2 && pick(0, 3) == 0)
        data[i] = std::numeric_limits<float>::quiet_NaN();
    }
    return x;
  }
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside
  return out;
}

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel());
  const float *g = got.data<float>(), *w = want.data<float>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(w[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i;
      continue;
    }
    ASSERT_EQ(std::memcmp(&g[i], &w[i], sizeof(float)), 0)
        << what << " at " << i << ": " << g[i] << " vs " << w[i];
  }
}

TEST_F(MaxPoolFastPath, MatchesTheGeneralLoopBitForBit) {
  for (int trial = 0; trial < 300; ++trial) {
    cpu::Pool2dParams p;
    p.kernel[0] = pick(1, 4), p.kernel[1] = pick(1, 5);
    p.stride[0] = pick(1, 3), p.stride[1] = pick(1, 3);
    p.dilation[0] = pick(1, 2), p.dilation[1] = pick(1, 2);
    p.padding[0] = pick(0, p.kernel[0] / 2), p.padding[1] = pick(0, p.kernel[1] / 2);
    const bool ceil_mode = pick(0, 1) == 1;
    const int64_t H = pick(p.dilation[0] * (p.kernel[0] - 1) + 1, 20);
    const int64_t W = pick(p.dilation[1] * (p.kernel[1] - 1) + 1, 70);
    const bool transposed = pick(0, 4) == 0;  // a plane stride other than H*W
    Tensor x = input({pick(1, 2), pick(1, 3), H, W}, pick(0, 2) == 0);
    if (transposed) x = transpose(contiguous(transpose(x, 0, 1)), 0, 1);
    const IntList out_shape{
        x.size(0), x.size(1),
        out_size(H, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], ceil_mode),
        out_size(W, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], ceil_mode)};
    Tensor want = empty(out_shape, DType::Float32), got = empty(out_shape, DType::Float32);
    cpu::max_pool2d_reference(view_of(want), view_of(x), p);
    ASSERT_TRUE(cpu::max_pool2d_f32_applies(view_of(got), view_of(x), p));
    cpu::max_pool2d_f32(view_of(got), view_of(x), p);
    expect_same_bits(got, want,
                     "x " + to_string(x.shape()) + " k " + std::to_string(p.kernel[0]) + "x" +
                         std::to_string(p.kernel[1]) + " s " + std::to_string(p.stride[1]) + " d " +
                         std::to_string(p.dilation[1]) + " p " + std::to_string(p.padding[1]) +
                         " ceil " + std::to_string(ceil_mode));
  }
}

// The stride-2 blocks load 16 floats: at the end of the last row of the
// last plane they must stop inside the tensor. Every width around the
// block sizes, one plane, so the last row ends the allocation (`make
// sanitize` would report a read past it).
TEST_F(MaxPoolFastPath, LastRowOfTheTensorIsNotOverread) {
  cpu::Pool2dParams p;
  p.kernel[0] = p.kernel[1] = 3;
  p.stride[0] = p.stride[1] = 2;
  p.padding[0] = p.padding[1] = 1;
  for (int64_t W = 15; W <= 40; ++W) {
    Tensor x = input({1, 1, 5, W}, false);
    const IntList out_shape{1, 1, out_size(5, 3, 2, 1, 1, false), out_size(W, 3, 2, 1, 1, false)};
    Tensor want = empty(out_shape, DType::Float32), got = empty(out_shape, DType::Float32);
    cpu::max_pool2d_reference(view_of(want), view_of(x), p);
    cpu::max_pool2d_f32(view_of(got), view_of(x), p);
    expect_same_bits(got, want, "W " + std::to_string(W));
  }
}

}  // namespace
}  // namespace kiln
