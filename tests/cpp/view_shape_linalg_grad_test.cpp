// What the op-table gradient rows cannot show for the view, shape, linalg
// and conv/pool rules: pieces of split/chunk that get no gradient, inputs that
// need none, and double backward through rules written with kiln ops.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) {
  return to(t, DType::Float64).to_vector<double>();
}

Tensor arange_f64(int64_t n, const IntList& shape) {
  return reshape(to(arange(int64_t(0), n), DType::Float64), shape);
}

TEST(GradRules, ChunkPiecesWithoutAGradientGetZeros) {
  Tensor x = requires_grad_(arange_f64(6, {6}));
  std::vector<Tensor> pieces = chunk(x, 3);
  Tensor g = grad({pieces[1]}, {x}, {full({2}, 5.0, DType::Float64)})[0];
  EXPECT_EQ(values(g), (std::vector<double>{0, 0, 5, 5, 0, 0}));
}

TEST(GradRules, EmbeddingSumsRepeatedRowsAndSkipsPadding) {
  Tensor w = requires_grad_(zeros({3, 2}, DType::Float64));
  Tensor idx = tensor({2, 0, 2, 1});
  Tensor seed = ones({4, 2}, DType::Float64);
  EXPECT_EQ(values(grad({embedding(w, idx)}, {w}, {seed})[0]),
            (std::vector<double>{1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(values(grad({embedding(w, idx, 0)}, {w}, {seed})[0]),
            (std::vector<double>{0, 0, 1, 1, 2, 2}));
}

TEST(GradRules, OnlyTheInputsThatNeedAGradientGetOne) {
  Tensor x = randn({1, 2, 5, 5});
  Tensor w = requires_grad_(randn({3, 2, 3, 3}));
  Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  Tensor gw = grad({y}, {w}, {ones_like(y)})[0];
  EXPECT_EQ(gw.shape(), (IntList{3, 2, 3, 3}));
}

// <u, v bᵀ> = sum_ik u_ik (v bᵀ)_ik, so its gradient with respect to b is uᵀ v.
TEST(GradRules, DoubleBackwardThroughMatmul) {
  Tensor a = requires_grad_(arange_f64(6, {2, 3}));
  Tensor b = requires_grad_(arange_f64(12, {3, 4}) * 0.5);
  Tensor v = arange_f64(8, {2, 4}) - 3.0;
  Tensor u = arange_f64(6, {2, 3}) * 2.0;
  Tensor ga = grad({matmul(a, b)}, {a}, {v}, false, /*create_graph=*/true)[0];  // v bᵀ
  Tensor gb = grad({ga}, {b}, {u})[0];
  EXPECT_EQ(values(gb), values(matmul(t(u), v)));
}

// The gradient of slice is slice_scatter into zeros; differentiating that
// with respect to the upstream gradient gives back the slice of the seed.
TEST(GradRules, DoubleBackwardThroughSlice) {
  Tensor x = requires_grad_(arange_f64(10, {10}));
  Tensor v = requires_grad_(ones({3}, DType::Float64));
  Tensor gx = grad({slice(x, 0, 1, 8, 3)}, {x}, {v}, false, /*create_graph=*/true)[0];
  EXPECT_EQ(values(gx), (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 1, 0, 0}));
  Tensor gv = grad({gx}, {v}, {arange_f64(10, {10})})[0];
  EXPECT_EQ(values(gv), (std::vector<double>{1, 4, 7}));
}

}  // namespace
}  // namespace kiln
