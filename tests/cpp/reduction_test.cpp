// Reductions and softmax through the C++ API: results the oracle table does
// not reach (large inputs that take the parallel and column paths, odd
// layouts checked against a naive loop, numerically hard inputs, outputs
// written into views) and the error messages users see.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

// A permuted view (no copy) of a contiguous tensor: view dim d is base dim perm[d].
Tensor permuted(const Tensor& base, const IntList& perm) {
  IntList shape, strides;
  for (int64_t p : perm) {
    shape.push_back(base.shape()[size_t(p)]);
    strides.push_back(base.strides()[size_t(p)]);
  }
  return make_view(base, shape, strides, 0);
}

// Sum of x over dim `dim` in double, row-major over the kept dims: the
// reference the fast paths are held to.
std::vector<double> naive_sum(const Tensor& x, int64_t dim) {
  const IntList& shape = x.shape();
  std::vector<double> values = x.to_vector<double>();
  int64_t inner = 1, outer = 1;
  for (int64_t d = dim + 1; d < x.dim(); ++d)
    inner *= shape[size_t(d)];
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[size_t(d)];
  const int64_t len = shape[size_t(dim)];
  std::vector<double> out(size_t(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < len; ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        out[size_t(o * inner + i)] += values[size_t((o * len + k) * inner + i)];
      }
    }
  }
  return out;
}

void expect_all_near(const Tensor& got, const std::vector<double>& want, double tol) {
  std::vector<double> values = got.to_vector<double>();
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(values[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
  }
}

TEST(Reduction, SumShapesAndDtypes) {
  Tensor x = tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  EXPECT_EQ(sum(x).item<double>(), 21.0);
  EXPECT_EQ(sum(x, {1}).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(sum(x, {0}, true).shape(), (IntList{1, 3}));
  EXPECT_EQ(sum(x, {}, true).shape(), (IntList{1, 1}));
  EXPECT_EQ(sum(x, {0}, false, DType::Float64).dtype(), DType::Float64);

  Tensor flags = tensor({true, true, false});
  Tensor count = sum(flags);
  EXPECT_EQ(count.dtype(), DType::Int64);
  EXPECT_EQ(count.item<int64_t>(), 2);
  EXPECT_EQ(prod(tensor({2, 3, 4}, DType::Int32)).dtype(), DType::Int64);
}

TEST(Reduction, EmptyReductionsGiveTheIdentity) {
  Tensor x = zeros({0, 3});
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(prod(x, {0}).to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_TRUE(std::isnan(mean(x).item<double>()));
  EXPECT_EQ(sum(x, {1}).shape(), (IntList{0}));
}

TEST(Reduction, ColumnSumOfALargeMatrixMatchesNaive) {
  manual_seed(1);
  Tensor x = randn({700, 300});  // big enough to split the column path across threads
  expect_all_near(sum(x, {0}), naive_sum(x, 0), 1e-5);
  std::vector<float> values = x.to_vector<float>();
  std::vector<double> column_max(300, -INFINITY);
  for (size_t i = 0; i < values.size(); ++i) {
    column_max[i % 300] = std::max(column_max[i % 300], double(values[i]));
  }
  expect_all_near(amax(x, {0}), column_max, 0.0);
}

TEST(Reduction, FullSumOfManyFloatsIsAccurate) {
  // 2^22 copies of 0.1f: a float accumulator would drift by percents.
  const int64_t n = int64_t(1) << 22;
  Tensor x = full({n}, 0.1f);
  double want = double(n) * double(0.1f);
  EXPECT_NEAR(sum(x).item<double>(), want, want * 1e-6);
  EXPECT_NEAR(mean(x).item<double>(), double(0.1f), 1e-7);
}

TEST(Reduction, PermutedInputsMatchNaive) {
  manual_seed(2);
  Tensor base = randn({6, 7, 8});
  Tensor x = permuted(base, {2, 0, 1});  // shape [8, 6, 7], no dim contiguous in order
  Tensor dense = clone(x);
  for (int64_t dim = 0; dim < 3; ++dim) {
    expect_all_near(sum(x, {dim}), naive_sum(dense, dim), 1e-5);
    EXPECT_EQ(amax(x, {dim}).to_vector<float>(), amax(dense, {dim}).to_vector<float>());
    EXPECT_EQ(argmin(x, dim).to_vector<int64_t>(), argmin(dense, dim).to_vector<int64_t>());
  }
  EXPECT_EQ(argmax(x).item<int64_t>(), argmax(dense).item<int64_t>());
  expect_all_near(var(x, {0, 2}), var(dense, {0, 2}).to_vector<double>(), 1e-5);
}

TEST(Reduction, MaxReturnsValuesAndFirstIndices) {
  Tensor x = tensor({{1.f, 3.f, 3.f}, {7.f, 7.f, 2.f}});
  auto [values, indices] = max(x, 1);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{3, 7}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(indices.dtype(), DType::Int64);
  auto [low, where] = min(x, 0, true);
  EXPECT_EQ(low.shape(), (IntList{1, 3}));
  EXPECT_EQ(where.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(max(x).item<double>(), 7.0);
  EXPECT_EQ(min(x).item<double>(), 1.0);
  EXPECT_EQ(argmax(x).item<int64_t>(), 3);
}

TEST(Reduction, NanPropagatesThroughMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor({1.f, nan, 5.f, nan});
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_TRUE(std::isnan(min(x).item<double>()));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(std::get<1>(min(x, 0)).item<int64_t>(), 1);
}

TEST(Reduction, VarianceOfLargeOffsetIsExact) {
  // 1e8 + {0, 1, 2, 3}: a one-pass sum of squares loses every digit in double.
  Tensor x = tensor({1e8, 1e8 + 1, 1e8 + 2, 1e8 + 3}, DType::Float64);
  EXPECT_NEAR(var(x).item<double>(), 5.0 / 3.0, 1e-12);
  EXPECT_NEAR(var(x, {}, 0).item<double>(), 1.25, 1e-12);
  EXPECT_NEAR(kiln::std(x).item<double>(), std::sqrt(5.0 / 3.0), 1e-12);
}

TEST(Reduction, WritesIntoANonContiguousOutput) {
  manual_seed(3);
  Tensor x = randn({3, 4, 5});
  Tensor storage = zeros({4, 3});
  Tensor out = permuted(storage, {1, 0});  // [3, 4], transposed in memory
  dispatch_into(op("sum"), {x}, {{"dims", IntList{2}}}, out);
  expect_all_near(out, naive_sum(x, 2), 1e-5);
}

TEST(Softmax, RowsSumToOneAndLargeValuesStayFinite) {
  Tensor x = tensor({{1000.f, -1000.f, 999.f}, {-1000.f, -1001.f, -999.f}});
  Tensor y = softmax(x, 1);
  std::vector<float> v = y.to_vector<float>();
  for (float e : v)
    EXPECT_TRUE(std::isfinite(e));
  EXPECT_NEAR(v[0] + v[1] + v[2], 1.0, 1e-6);
  EXPECT_NEAR(v[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  Tensor logs = log_softmax(x, -1);
  std::vector<float> l = logs.to_vector<float>();
  EXPECT_NEAR(l[3], -1.0 - std::log(1.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-5);
  EXPECT_NEAR(l[1], -2000.0 - std::log(1.0 + std::exp(-1.0)), 1e-3);
}

TEST(Softmax, NonInnermostDimOfAPermutedInput) {
  manual_seed(4);
  Tensor x = permuted(randn({5, 4, 3}), {1, 2, 0});  // [4, 3, 5]
  Tensor dense = clone(x);
  for (int64_t dim = 0; dim < 3; ++dim) {
    expect_all_near(softmax(x, dim), softmax(dense, dim).to_vector<double>(), 1e-6);
    expect_all_near(sum(softmax(x, dim), {dim}), std::vector<double>(size_t(60 / x.size(dim)), 1.0),
                    1e-6);
  }
}

// YOLOv8's box head: a softmax along dim 1 of a permuted view whose last
// dim is contiguous and long (the column kernel, eight rows per vector,
// with 3 columns past the last whole vector), into a permuted output too;
// against float64 and against the same softmax of a dense copy.
TEST(Softmax, DownColumnsOfAPermutedView) {
  manual_seed(5);
  Tensor x = permuted(randn({2, 4, 16, 19}), {0, 2, 1, 3});  // [2, 16, 4, 19]
  Tensor want = softmax(to(x, DType::Float64), 1);
  expect_all_near(softmax(x, 1), want.to_vector<double>(), 1e-6);
  expect_all_near(softmax(clone(x), 1), want.to_vector<double>(), 1e-6);
  Tensor out = permuted(zeros({2, 4, 16, 19}), {0, 2, 1, 3});
  dispatch_into(op("softmax"), {x}, {{"dim", int64_t(1)}}, out);
  expect_all_near(out, want.to_vector<double>(), 1e-6);
}

// BERT exported from TensorFlow: a softmax along the last dim of a view
// whose rows are not contiguous but whose dim 2 is (19 long: two vectors
// of eight and 3 columns past them). Into a dense result (through a buffer
// in the input's layout) and into a view of the input's layout (straight);
// a NaN makes its own row NaN and no other.
TEST(Softmax, LastDimOfATransposedView) {
  manual_seed(6);
  Tensor base = randn({2, 3, 16, 19});
  base.data<float>()[5 * 19 + 7] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = permuted(base, {0, 1, 3, 2});  // [2, 3, 19, 16], rows 19 floats apart
  Tensor want = softmax(to(x, DType::Float64), 3);
  const std::vector<double> expected = want.to_vector<double>();
  auto check = [&](const Tensor& got) {
    const std::vector<double> values = to(got, DType::Float64).to_vector<double>();
    ASSERT_EQ(values.size(), expected.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(expected[i])) {
        EXPECT_TRUE(std::isnan(values[i])) << i;
      } else {
        EXPECT_NEAR(values[i], expected[i], 1e-6) << i;
      }
    }
  };
  check(softmax(x, 3));
  check(softmax(x, -1));
  Tensor dense = zeros({2, 3, 19, 16});
  dispatch_into(op("softmax"), {x}, {{"dim", int64_t(3)}}, dense);
  check(dense);
  Tensor out = permuted(zeros({2, 3, 16, 19}), {0, 1, 3, 2});
  dispatch_into(op("softmax"), {x}, {{"dim", int64_t(3)}}, out);
  check(out);
  // Only row 7 of slab [0, 0] holds the NaN: 16 NaNs in all.
  const std::vector<double> values = softmax(x, 3).to_vector<double>();
  EXPECT_EQ(std::count_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }),
            16);
}

TEST(Reduction, ErrorsNameTheOpShapeAndDim) {
  Tensor x = zeros({2, 3});
  EXPECT_EQ(error_text([&] { sum(x, {3}); }),
            "sum: dim 3 is out of range for a tensor of 2 dims (shape [2, 3]); expected a dim "
            "in [-2, 1]");
  EXPECT_EQ(error_text([&] {
              mean(x, {0, -2});
            }),
            "mean: dim 0 appears multiple times in the list of dims (shape [2, 3])");
  EXPECT_NE(
      error_text([&] { mean(zeros({2}, DType::Int64)); }).find("could not infer output dtype"),
      std::string::npos);
  EXPECT_EQ(error_text([&] {
              amax(zeros({2, 0}), {1});
            }),
            "amax: expected reduction dim 1 to have non-zero size (shape [2, 0])");
  EXPECT_NE(error_text([&] { softmax(zeros({3}, DType::Int32), 0); }).find("floating"),
            std::string::npos);
  try {
    max(x, 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
  }
}

}  // namespace
}  // namespace kiln
