// Global average pooling's float32 path (kernels/cpu/pool_global_f32.cpp)
// against float64, on planes around its 8- and 32-lane blocks, large planes
// whose sums round, and inputs whose planes are not stored whole (which
// must take the general path and give the same values).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/pool.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const Tensor a64 = to(a, DType::Float64), b64 = to(contiguous(b), DType::Float64);
  double worst = 0.0;
  const double *pa = a64.data<double>(), *pb = b64.data<double>();
  for (int64_t i = 0; i < a64.numel(); ++i)
    worst = std::max(worst, std::abs(pa[i] - pb[i]));
  return worst;
}

TEST(GlobalAvgPool, Float32MatchesFloat64) {
  manual_seed(11);
  const int64_t sizes[][2] = {{1, 1}, {1, 7}, {2, 4}, {3, 11}, {7, 7}, {19, 23}, {120, 160}};
  for (const auto& hw : sizes) {
    Tensor x = add(randn({2, 3, hw[0], hw[1]}), Scalar(0.5));
    Tensor got = adaptive_avg_pool2d(x, {1, 1});
    ASSERT_TRUE(cpu::global_avg_pool2d_f32_applies(view_of(got), view_of(x)));
    Tensor want = adaptive_avg_pool2d(to(x, DType::Float64), {1, 1});
    EXPECT_LT(max_abs_difference(got, want), 1e-6) << hw[0] << "x" << hw[1];
  }
}

TEST(GlobalAvgPool, PlanesNotStoredWholeTakeTheGeneralPath) {
  manual_seed(12);
  Tensor x = transpose(randn({2, 3, 9, 13}), 2, 3);  // [2, 3, 13, 9], rows strided
  Tensor got = adaptive_avg_pool2d(x, {1, 1});
  EXPECT_FALSE(cpu::global_avg_pool2d_f32_applies(view_of(got), view_of(x)));
  Tensor want = adaptive_avg_pool2d(to(x, DType::Float64), {1, 1});
  EXPECT_LT(max_abs_difference(got, want), 1e-6);
}

}  // namespace
}  // namespace kiln
