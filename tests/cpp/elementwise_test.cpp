// The C++ API of elementwise math: operators, scalar promotion, in-place
// ops and their dtype rules, and the op table's flags. Values against
// PyTorch live in tests/oracle/cases_{unary,binary}.py.
#include <gtest/gtest.h>

#include <immintrin.h>

#include <bit>
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/vec_math.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln {
namespace {

// The transpose of a contiguous 2-D tensor, as a view over its storage.
Tensor transposed(const Tensor& t) {
  return make_view(t, {t.size(1), t.size(0)}, {t.stride(1), t.stride(0)}, t.offset());
}

TEST(ElementwiseApi, OperatorsMatchTheirFunctions) {
  Tensor a = tensor({1.f, 2.f, 3.f});
  Tensor b = tensor({4.f, 5.f, 6.f});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ((a - b).to_vector<float>(), (std::vector<float>{-3, -3, -3}));
  EXPECT_EQ((a * b).to_vector<float>(), (std::vector<float>{4, 10, 18}));
  EXPECT_EQ((b / a).to_vector<float>(), (std::vector<float>{4, 2.5, 2}));
  EXPECT_EQ((-a).to_vector<float>(), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ((a + 1).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ((10.0 - a).to_vector<float>(), (std::vector<float>{9, 8, 7}));
  EXPECT_EQ((2 * a).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ((6.0 / a).to_vector<float>(), (std::vector<float>{6, 3, 2}));
}

TEST(ElementwiseApi, ComparisonsGiveBool) {
  Tensor a = tensor({1, 2, 3});
  Tensor lt2 = a < 2;
  EXPECT_EQ(lt2.dtype(), DType::Bool);
  EXPECT_EQ(lt2.to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((a == tensor({1, 0, 3})).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a != 2).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a <= 2).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((a >= 3).to_vector<bool>(), (std::vector<bool>{false, false, true}));
}

TEST(ElementwiseApi, ScalarsPromoteLikePythonNumbers) {
  Tensor i32 = tensor({1, 2}, DType::Int32);
  EXPECT_EQ((i32 + 2).dtype(), DType::Int32);
  EXPECT_EQ((i32 + 2.5).dtype(), DType::Float32);
  EXPECT_EQ((i32 / 2).dtype(), DType::Float32);  // true division
  EXPECT_EQ((tensor({1.f}) * 2.0).dtype(), DType::Float32);
  EXPECT_EQ((tensor({true}) + 1).dtype(), DType::Int64);
  EXPECT_EQ(pow(i32, 2).to_vector<int>(), (std::vector<int>{1, 4}));
  EXPECT_EQ(pow(2, tensor({3, 4})).to_vector<int64_t>(), (std::vector<int64_t>{8, 16}));
}

TEST(ElementwiseApi, IntegerToNegativeScalarPowerIsAnError) {
  std::string msg = error_text([] { pow(tensor({2, 3}), -1); });
  EXPECT_NE(msg.find("pow: integers to negative integer powers are not allowed"), std::string::npos)
      << msg;
  EXPECT_EQ(pow(tensor({2.f, 4.f}), -1).to_vector<float>(), (std::vector<float>{0.5, 0.25}));
}

TEST(ElementwiseApi, ActivationDefaults) {
  Tensor x = tensor({-2.f, 0.5f});
  EXPECT_FLOAT_EQ(leaky_relu(x).to_vector<float>()[0], -0.02f);
  EXPECT_FLOAT_EQ(leaky_relu(x, 0.5).to_vector<float>()[0], -1.f);
  EXPECT_NEAR(gelu(x).to_vector<float>()[1], 0.345731, 1e-6);
  EXPECT_NEAR(gelu(x, "tanh").to_vector<float>()[1], 0.345714, 1e-6);
  EXPECT_NEAR(elu(x).to_vector<float>()[0], std::expm1(-2.0), 1e-6);
  EXPECT_NEAR(softplus(x).to_vector<float>()[1], std::log1p(std::exp(0.5)), 1e-6);
  EXPECT_EQ(logical_not(x).to_vector<bool>(), (std::vector<bool>{false, false}));
}

TEST(ElementwiseApi, ClampAndWhere) {
  Tensor x = tensor({-2.f, 0.5f, 3.f});
  EXPECT_EQ(clamp(x, -1.0, 1.0).to_vector<float>(), (std::vector<float>{-1, 0.5, 1}));
  EXPECT_EQ(clamp(x, std::nullopt, 0.0).to_vector<float>(), (std::vector<float>{-2, 0, 0}));
  std::string msg = error_text([&] { clamp(x, std::nullopt, std::nullopt); });
  EXPECT_NE(msg.find("at least one of 'min' or 'max'"), std::string::npos) << msg;
  Tensor cond = x > 0;
  EXPECT_EQ(where(cond, x, 0.0).to_vector<float>(), (std::vector<float>{0, 0.5, 3}));
  EXPECT_EQ(where(cond, 7, x).to_vector<float>(), (std::vector<float>{-2, 7, 7}));
  EXPECT_EQ(where(cond, x, 0.0).dtype(), DType::Float32);
}

// float32 where takes an 8-lane path over dense runs: every pairing of a
// dense or single-value side, lengths around the vector width, NaN bits kept.
TEST(ElementwiseApi, WhereOverDenseRunsMatchesElementByElement) {
  for (int64_t n : {1, 7, 8, 9, 37}) {
    Tensor x = randn({n}), y = randn({n}), cond = rand({n}) > 0.5;
    static_cast<float*>(x.data_ptr())[0] = std::nanf("");
    const std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
    const std::vector<bool> cs = cond.to_vector<bool>();
    auto check = [&](const Tensor& got, bool x_dense, bool y_dense) {
      std::vector<float> values = got.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        float want = cs[size_t(i)] ? xs[x_dense ? size_t(i) : 0] : ys[y_dense ? size_t(i) : 0];
        EXPECT_EQ(std::bit_cast<uint32_t>(values[size_t(i)]), std::bit_cast<uint32_t>(want))
            << "n " << n << " element " << i;
      }
    };
    check(where(cond, x, y), true, true);
    check(where(cond, reshape(slice(x, 0, 0, 1), IntList{}), y), false, true);
    check(where(cond, x, reshape(slice(y, 0, 0, 1), IntList{})), true, false);
  }
}

TEST(ElementwiseInPlace, WritesIntoTheTensorAndReturnsIt) {
  Tensor x = tensor({1.f, 2.f, 3.f});
  uint64_t version = x.version();
  const Tensor& r = add_(x, tensor({1.f, 1.f, 1.f}));
  EXPECT_TRUE(r.is_same(x));
  EXPECT_GT(x.version(), version);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  sub_(x, 1);
  mul_(x, 2.0);
  div_(x, tensor({2.f}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  mul_(x, x);  // other aliases out exactly
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 4, 9}));
  clamp_(x, 2.0, 5.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 4, 5}));
  Tensor y = tensor({-1.f, 2.f});
  EXPECT_TRUE(relu_(y).is_same(y));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 2}));
}

TEST(ElementwiseInPlace, BroadcastsOtherButNotSelf) {
  Tensor x = zeros({2, 3});
  add_(x, tensor({1.f, 2.f, 3.f}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  std::string msg = error_text([] { add_(zeros({3}), zeros({2, 3})); });
  EXPECT_NE(msg.find("add: output with shape [3] doesn't match the broadcast shape [2, 3]"),
            std::string::npos)
      << msg;
}

TEST(ElementwiseInPlace, ResultMustFitTheDtype) {
  Tensor ints = tensor({1, 2, 3});
  add_(ints, 2);  // int + int number stays int64
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 5}));
  Tensor floats = tensor({1.f, 2.f, 3.f});
  add_(floats, tensor({1, 1, 1}));  // an int operand into a float tensor is fine
  EXPECT_EQ(floats.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  for (auto bad : std::vector<std::function<void()>>{
           [&] { add_(ints, 0.5); },
           [&] {
             mul_(ints, tensor({1.5f, 1.f, 1.f}));
           },
           [&] { div_(ints, 2); },  // true division gives float
           [&] { clamp_(ints, 0.5, std::nullopt); },
       }) {
    std::string msg = error_text(bad);
    EXPECT_NE(msg.find("can't be cast to the desired output type int64"), std::string::npos) << msg;
  }
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 5}));  // untouched
}

TEST(ElementwiseInPlace, WritesThroughStridedViews) {
  Tensor base = tensor({{1.f, -2.f, 3.f}, {-4.f, 5.f, -6.f}});
  Tensor view = transposed(base);  // shape [3, 2], strides [1, 3]
  relu_(view);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{1, 0, 3, 0, 5, 0}));
  add_(view, tensor({10.f, 20.f}));  // adds 10 to base's row 0, 20 to row 1
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{11, 10, 13, 20, 25, 20}));
}

TEST(ElementwiseKernels, LargeTensorsTakeTheParallelPathAndAgree) {
  const int64_t n = 100003;  // past the parallel grain, and not a multiple of the SIMD width
  Tensor x = arange(Scalar(int64_t(0)), Scalar(n), Scalar(int64_t(1)), DType::Float32);
  Tensor y = x * 2.0 + 1;
  std::vector<float> got = y.to_vector<float>();
  for (int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(got[size_t(i)], float(2 * i + 1)) << i;
  Tensor s = sigmoid(x / float(n) - 0.5);
  std::vector<float> sig = s.to_vector<float>();
  for (int64_t i = 0; i < n; i += 997) {
    double v = double(float(float(i) / float(n)) - 0.5f);
    ASSERT_NEAR(sig[size_t(i)], 1.0 / (1.0 + std::exp(-v)), 1e-6) << i;
  }
}

// Distance from `got` to the exact value `want`, in units of the float
// spacing at `want`.
double ulps(float got, double want) {
  float rounded = float(want);
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded ? 0.0 : 1e9;
  double spacing = double(std::nextafter(std::fabs(rounded), INFINITY)) - std::fabs(rounded);
  return std::fabs(double(got) - want) / spacing;
}

// The vectorized float32 exp/sigmoid/tanh against double-precision libm over
// their whole useful range (1 / 1.3 / 1.46 ulp measured exhaustively).
TEST(ElementwiseKernels, VectorizedTranscendentalsMatchTheScalarReference) {
  constexpr double kMinNormal = 1.17549435e-38;  // below, only absolute error is meaningful
  double worst_exp = 0, worst_sigmoid = 0, worst_tanh = 0;
  const int steps = 1 << 21;
  for (int i = 0; i <= steps; ++i) {
    float x = float(-110.0 + 200.0 * i / steps);
    double e = std::exp(double(x)), s = 1.0 / (1.0 + std::exp(-double(x)));
    if (e >= kMinNormal) worst_exp = std::max(worst_exp, ulps(cpu::exp_f32(x), e));
    if (e < kMinNormal) {
      ASSERT_LE(std::fabs(cpu::exp_f32(x) - e), 1.5e-45) << x;
    }
    if (s >= kMinNormal) worst_sigmoid = std::max(worst_sigmoid, ulps(cpu::sigmoid_f32(x), s));
    float t = x / 8;  // tanh saturates by 9; concentrate on where it does not
    worst_tanh = std::max(worst_tanh, ulps(cpu::tanh_f32(t), std::tanh(double(t))));
  }
  EXPECT_LE(worst_exp, 1.5);
  EXPECT_LE(worst_sigmoid, 3.0);
  EXPECT_LE(worst_tanh, 2.0);
  for (float tiny : {1e-30f, -1e-20f, 1e-6f})
    EXPECT_LE(ulps(cpu::tanh_f32(tiny), std::tanh(double(tiny))), 1.0);

  EXPECT_EQ(cpu::exp_f32(89.0f), INFINITY);
  EXPECT_EQ(cpu::exp_f32(INFINITY), INFINITY);
  EXPECT_EQ(cpu::exp_f32(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::exp_f32(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::exp_f32(NAN)));
  EXPECT_EQ(cpu::sigmoid_f32(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::sigmoid_f32(INFINITY), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::sigmoid_f32(NAN)));
  // Below -87.3 the result is subnormal, not flushed to 0.
  EXPECT_GT(cpu::sigmoid_f32(-95.0f), 0.0f);
  EXPECT_LE(ulps(cpu::sigmoid_f32(-95.0f), std::exp(-95.0)), 1.0);
  EXPECT_EQ(cpu::tanh_f32(-INFINITY), -1.0f);
  EXPECT_TRUE(std::signbit(cpu::tanh_f32(-0.0f)));
  EXPECT_TRUE(std::isnan(cpu::tanh_f32(NAN)));
}

// The 8-lane sigmoid kernels keep in registers (the direct conv's fused
// activation) gives sigmoid_f32's bits, lane by lane.
TEST(ElementwiseKernels, SigmoidOnEightLanesIsTheScalarSigmoid) {
  std::vector<float> xs = {0.0f,    -0.0f, INFINITY, -INFINITY, NAN,     1e-40f,
                           -1e-40f, 88.0f, -88.0f,   -104.0f,   -150.0f, 20.0f};
  for (int i = 0; i < 40000; ++i)
    xs.push_back(float(-120.0 + 240.0 * i / 40000));
  while (xs.size() % 8 != 0)
    xs.push_back(0.5f);
  for (size_t i = 0; i < xs.size(); i += 8) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, cpu::sigmoid_f32x8(_mm256_loadu_ps(&xs[i])));
    for (size_t k = 0; k < 8; ++k) {
      const float want = cpu::sigmoid_f32(xs[i + k]);
      EXPECT_EQ(std::bit_cast<uint32_t>(lanes[k]), std::bit_cast<uint32_t>(want)) << xs[i + k];
    }
  }
}

// tanh_f32x8 (the LSTM cell's) gives tanh_f32's bits, lane by lane: the
// small-|x| polynomial, the exp branch past 0.625 and the switch between them.
TEST(ElementwiseKernels, TanhOnEightLanesIsTheScalarTanh) {
  std::vector<float> xs = {0.0f,    -0.0f,  INFINITY, -INFINITY,   NAN,  -NAN,  1e-40f,
                           -1e-40f, 0.625f, -0.625f,  0.62499994f, 9.0f, -9.1f, 60.0f};
  for (int i = 0; i < 40000; ++i)
    xs.push_back(float(-12.0 + 24.0 * i / 40000));
  while (xs.size() % 8 != 0)
    xs.push_back(0.5f);
  for (size_t i = 0; i < xs.size(); i += 8) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, cpu::tanh_f32x8(_mm256_loadu_ps(&xs[i])));
    for (size_t k = 0; k < 8; ++k) {
      const float want = cpu::tanh_f32(xs[i + k]);
      EXPECT_EQ(std::bit_cast<uint32_t>(lanes[k]), std::bit_cast<uint32_t>(want)) << xs[i + k];
    }
  }
}

TEST(ElementwiseOps, TableFlags) {
  for (const char* name :
       {"neg",   "abs",     "exp",  "log",        "sqrt", "rsqrt", "sin",      "cos",
        "tanh",  "sigmoid", "relu", "leaky_relu", "gelu", "elu",   "softplus", "logical_not",
        "clamp", "add",     "sub",  "mul",        "div",  "pow",   "maximum",  "minimum",
        "eq",    "ne",      "lt",   "le",         "gt",   "ge",    "where"}) {
    const OpDef& def = op(name);
    EXPECT_EQ(def.kind, OpKind::Elementwise) << name;
  }
  EXPECT_TRUE(op("relu").may_run_inplace);
  EXPECT_TRUE(op("add").may_run_inplace);
  EXPECT_FALSE(op("lt").may_run_inplace);
  EXPECT_FALSE(op("logical_not").may_run_inplace);
  EXPECT_EQ(op("maximum").onnx.op_type, "Max");
  EXPECT_EQ(op("clamp").onnx.op_type, "Clip");
  EXPECT_EQ(op("where").onnx.op_type, "Where");
}

}  // namespace
}  // namespace kiln
