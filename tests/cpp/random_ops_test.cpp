// The random ops (uniform, normal, randint, uniform_like, normal_like) and the
// factories that dispatch them. The op table rows can only compare fixed
// draws with PyTorch; here: the statistics of real draws, the same numbers
// as the generator's fill helpers from one seed, and traced, compiled and
// hybridized code drawing new numbers per call (the numbers eager code
// draws from the same seed), at any size a dynamic trace admits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/random.h"
#include "kiln/core/sym_shape.h"
#include "kiln/jit/compile/hybridize.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace {

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v)
    sum += x;
  return sum / double(v.size());
}

double std_of(const std::vector<double>& v) {
  double m = mean_of(v), sq = 0;
  for (double x : v)
    sq += (x - m) * (x - m);
  return std::sqrt(sq / double(v.size()));
}

std::vector<double> values_of(const Tensor& t) {
  return to(t, DType::Float64).to_vector<double>();
}

TEST(RandomOps, UniformStaysInItsRangeWithTheRightMoments) {
  manual_seed(1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor t =
        dispatch1(op("uniform"), {},
                  {{"shape", IntList{200, 500}}, {"low", -2.0}, {"high", 3.0}, {"dtype", dtype}});
    ASSERT_EQ(t.shape(), (IntList{200, 500}));
    ASSERT_EQ(t.dtype(), dtype);
    std::vector<double> v = values_of(t);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0);
    EXPECT_NEAR(mean_of(v), 0.5, 0.02);
    EXPECT_NEAR(std_of(v), 5.0 / std::sqrt(12.0), 0.02);
  }
}

TEST(RandomOps, NormalHasTheRightMoments) {
  manual_seed(2);
  Tensor t = dispatch1(op("normal"), {}, {{"shape", IntList{100000}}, {"mean", 1.5}, {"std", 2.0}});
  std::vector<double> v = values_of(t);
  EXPECT_NEAR(mean_of(v), 1.5, 0.03);
  EXPECT_NEAR(std_of(v), 2.0, 0.03);
  Tensor like = dispatch1(op("normal_like"), {zeros({3, 4}, DType::Float64)}, {{"std", 0.5}});
  EXPECT_EQ(like.dtype(), DType::Float64);
  EXPECT_EQ(like.shape(), (IntList{3, 4}));
}

TEST(RandomOps, RandintCoversItsRangeOnly) {
  manual_seed(3);
  Tensor t = randint(-3, 4, {10000});
  std::vector<int64_t> v = t.to_vector<int64_t>();
  std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  Tensor f = randint(0, 5, {6}, DType::Float32);
  EXPECT_EQ(f.dtype(), DType::Float32);
}

// The factories dispatch the ops, which draw exactly as the fill helpers of
// core/random.h did before them: a seed gives the numbers it always gave.
TEST(RandomOps, FactoriesDrawWhatTheFillHelpersDraw) {
  Generator gen(5);
  std::vector<float> uniform(7), normal(9);
  std::vector<double> normal64(4);
  std::vector<int64_t> ints(5);
  fill_uniform(gen, uniform.data(), 7, 0.0, 1.0);
  fill_normal(gen, normal.data(), 9, 0.0, 1.0);
  fill_normal(gen, normal64.data(), 4, 0.0, 1.0);
  fill_randint(gen, ints.data(), 5, 0, 100);
  std::vector<float> uniform_like(6);
  fill_uniform(gen, uniform_like.data(), 6, 0.0, 1.0);

  manual_seed(5);
  EXPECT_EQ(rand({7}).to_vector<float>(), uniform);
  EXPECT_EQ(randn({3, 3}).to_vector<float>(), normal);
  EXPECT_EQ(randn_like(zeros({4}, DType::Float64)).to_vector<double>(), normal64);
  EXPECT_EQ(randint(0, 100, {5}).to_vector<int64_t>(), ints);
  EXPECT_EQ(rand_like(zeros({2, 3})).to_vector<float>(), uniform_like);
}

TEST(RandomOps, OutputsRequireGradOnlyWhenAskedFor) {
  Tensor x = requires_grad_(randn({3}));
  EXPECT_FALSE(randn_like(x).requires_grad());
  EXPECT_FALSE(rand_like(x).requires_grad());
  TensorOptions options;
  options.requires_grad = true;
  EXPECT_TRUE(randn({2}, options).requires_grad());
  EXPECT_TRUE(randn_like(x, options).requires_grad());
  // No gradient flows through the draw, and x's own use still gets one.
  Tensor y = sum(x * 2.0 + randn_like(x));
  backward(y);
  EXPECT_EQ(grad(x).to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(RandomOps, ShapeAttributeErrorsNameTheOp) {
  EXPECT_THROW_WITH(rand({2, -1}), "uniform: negative size in shape [2, -1]");
  EXPECT_THROW_WITH(randn({2}, DType::Int64), "normal: expected a floating dtype, got int64");
  EXPECT_THROW_WITH(randint(3, 3, {2}), "randint: expected low < high, got low=3 high=3");
}

}  // namespace
}  // namespace kiln

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

Tensors noisy(const Tensors& in) {
  DimList s = sym_shape(in[0]);
  return {in[0] + randn_like(in[0]) * 0.5, rand(DimList{s[0], 2})};
}

TEST(RandomOpsTraced, ACompiledCallDrawsAnewAsEagerDoes) {
  Tensor x = randn({3, 4});
  CapturedWarnings captured;
  CompiledFunction f = trace(noisy, {x});
  EXPECT_EQ(captured.count(WarningKind::RandomFactory), 0u) << captured.all();
  std::string text = to_text(f.graph());
  EXPECT_NE(text.find("normal_like("), std::string::npos) << text;
  EXPECT_NE(text.find("uniform()"), std::string::npos) << text;

  manual_seed(9);
  Tensors eager = noisy({x});
  manual_seed(9);
  Tensors first = f({x});
  Tensors second = f({x});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(bitwise_equal(first[i], eager[i])) << "output " << i;
    EXPECT_FALSE(bitwise_equal(second[i], first[i])) << "output " << i;
  }
}

TEST(RandomOpsTraced, ASymbolicShapeStaysSymbolic) {
  RecordOptions options;
  options.dynamic_dims = {{0, 0, "batch"}};
  CompiledFunction f = trace(noisy, {randn({3, 4})}, options);
  EXPECT_EQ(to_string(f.graph().outputs()[0]->shape()), "[batch, 4]");
  EXPECT_EQ(to_string(f.graph().outputs()[1]->shape()), "[batch, 2]");
  for (int64_t batch : {1, 6}) {
    Tensor x = randn({batch, 4});
    manual_seed(uint64_t(batch));
    Tensors eager = noisy({x});
    manual_seed(uint64_t(batch));
    Tensors got = f({x});
    EXPECT_TRUE(bitwise_equal(got[0], eager[0])) << batch;
    EXPECT_TRUE(bitwise_equal(got[1], eager[1])) << batch;
  }
}

TEST(RandomOpsTraced, AHybridizedFunctionDrawsPerCallAtEveryBatchSize) {
  HybridCache cache("test", noisy);
  NoGradGuard no_grad;
  for (int64_t batch : {2, 5, 5, 3}) {
    Tensor x = randn({batch, 4});
    manual_seed(uint64_t(10 + batch));
    Tensors eager = noisy({x});
    manual_seed(uint64_t(10 + batch));
    Tensors got = cache(Tensors{x}, false);
    EXPECT_TRUE(bitwise_equal(got[0], eager[0])) << batch;
    EXPECT_FALSE(bitwise_equal(cache(Tensors{x}, false)[0], got[0])) << batch;
  }
  CacheInfo info = cache.info();
  EXPECT_EQ(info.entries.size(), 1u) << info.to_string();  // batch became symbolic
}

// A graph whose input requires grad differentiates through the ops around
// the draw, as eager autograd does.
TEST(RandomOpsTraced, ACompiledGraphWithADrawIsDifferentiable) {
  auto fn = [](const Tensors& in) { return Tensors{sum(in[0] * 3.0 + randn_like(in[0]))}; };
  Tensor x = requires_grad_(randn({4}));
  CompiledFunction f = trace(fn, {x});
  backward(f({x})[0]);
  EXPECT_EQ(grad(x).to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

}  // namespace
}  // namespace kiln::jit
