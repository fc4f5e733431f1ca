// kiln/nn/activation.h from C++: the composed activations on a few points
// (PyTorch's values; tests/python/test_activations_containers.py compares
// the same functions with torch over a range, gradients included).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/functional.h"
#include "test_util.h"

namespace kiln::nn {
namespace {

namespace F = functional;

TEST(NnActivation, PiecewiseOnesAtTheirPieces) {
  Tensor x = tensor<double>({-4, -1.5, 0, 2, 5}, DType::Float64);
  EXPECT_EQ(F::relu6(mul(x, 2.0)).to_vector<double>(), (std::vector<double>{0, 0, 0, 4, 6}));
  EXPECT_EQ(F::hardtanh(x).to_vector<double>(), (std::vector<double>{-1, -1, 0, 1, 1}));
  EXPECT_EQ(F::hardsigmoid(x).to_vector<double>(),
            (std::vector<double>{0, 1.5 / 6, 0.5, 5.0 / 6, 1}));
  EXPECT_EQ(F::hardswish(x).to_vector<double>(),
            (std::vector<double>{-0.0, -1.5 * 1.5 / 6, 0, 2 * 5.0 / 6, 5}));
}

TEST(NnActivation, SmoothOnes) {
  Tensor x = tensor<double>({-2, 0, 3}, DType::Float64);
  std::vector<double> silu = F::silu(x).to_vector<double>(), mish = F::mish(x).to_vector<double>();
  for (size_t i = 0; i < 3; ++i) {
    double v = std::vector<double>{-2, 0, 3}[i];
    EXPECT_NEAR(silu[i], v / (1 + std::exp(-v)), 1e-15);
    EXPECT_NEAR(mish[i], v * std::tanh(std::log1p(std::exp(v))), 1e-15);
  }
}

TEST(NnActivation, HardtanhBoundsAreChecked) {
  EXPECT_THROW_WITH(F::hardtanh(ones({2}), 1.0, -1.0),
                    "hardtanh: min_val (1) cannot be greater than max_val (-1)");
}

}  // namespace
}  // namespace kiln::nn
