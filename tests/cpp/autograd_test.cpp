// The autograd engine: recording, accumulation, retain_graph, grad mode,
// detach, the version-counter check and double backward. (Each op's rule is
// checked by op_grad_test.cpp over the op table.)
#include <gtest/gtest.h>

#include <thread>

#include "kiln/autograd/autograd.h"
#include "kiln/core/allocator.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<float> values(const Tensor& t) {
  return t.to_vector<float>();
}

TEST(Autograd, RecordsAndAccumulatesIntoLeaves) {
  Tensor a = requires_grad_(tensor({1.f, 2.f}));
  Tensor b = requires_grad_(tensor({3.f, 4.f}));
  Tensor y = a * b + a;  // dy/da = b + 1, dy/db = a
  EXPECT_EQ(grad_fn_name(y), "AddBackward0");
  EXPECT_TRUE(is_leaf(a));
  EXPECT_FALSE(is_leaf(y));
  backward(y, ones({2}));
  EXPECT_EQ(values(grad(a)), (std::vector<float>{4, 5}));
  EXPECT_EQ(values(grad(b)), (std::vector<float>{1, 2}));
  backward(a * b, ones({2}));  // a second graph accumulates
  EXPECT_EQ(values(grad(a)), (std::vector<float>{7, 9}));
}

// No static constructor installs autograd: without init_autograd() (or
// requires_grad_(), which calls it) an op on a tensor that requires grad is a
// clear error rather than a silently unrecorded op.
TEST(Autograd, OpsOnGradTensorsNeedAutogradInitialized) {
  struct Reinstall {  // whatever happens below, later tests get autograd back
    ~Reinstall() { init_autograd(); }
  } reinstall;
  TensorOptions requiring_grad;
  requiring_grad.requires_grad = true;
  Tensor x = ones({2}, requiring_grad);
  Tensor out = zeros({2});
  set_autograd_hook(nullptr);
  std::string message = error_of([&] { (void)(x * 2.0); }).what();
  // Refused before the kernel runs: an in-place op has not written yet.
  std::string in_place = error_of([&] { add_(out, x); }).what();
  EXPECT_TRUE(in_place.find("autograd is not initialized") != std::string::npos) << in_place;
  EXPECT_EQ(sum(out).item<double>(), 0.0);
  init_autograd();
  EXPECT_TRUE(message.find("mul: an input requires grad, but autograd is not initialized") !=
              std::string::npos)
      << message;
  Tensor y = x * 2.0;  // initialized again: recorded
  EXPECT_EQ(grad_fn_name(y), "MulBackward0");
  set_autograd_hook(nullptr);
  Tensor z = zeros({2});
  requires_grad_(z);  // installs the hooks itself
  EXPECT_EQ(grad_fn_name(z * 2.0), "MulBackward0");
}

TEST(Autograd, BroadcastGradientsAreSummedBack) {
  Tensor a = requires_grad_(ones({2, 3}));
  Tensor b = requires_grad_(tensor({1.f, 2.f, 3.f}));
  backward(a * b, ones({2, 3}));
  EXPECT_EQ(values(grad(b)), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(grad(a).shape(), (IntList{2, 3}));
}

TEST(Autograd, NonScalarRootNeedsAGradient) {
  Tensor a = requires_grad_(ones({2}));
  EXPECT_TRUE(mentions(error_of([&] { backward(a * a); }), "only for scalar outputs"));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor a = requires_grad_(tensor({2.f}));
  Tensor y = a * a;
  backward(y, {}, /*retain_graph=*/true);
  backward(y);
  EXPECT_EQ(values(grad(a)), (std::vector<float>{8}));
  EXPECT_TRUE(mentions(error_of([&] { backward(y); }), "backward through the graph a second time"));
}

TEST(Autograd, NoGradAndDetachRecordNothing) {
  Tensor a = requires_grad_(ones({2}));
  {
    NoGradGuard guard;
    Tensor y = a * a;
    EXPECT_FALSE(y.requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE((a * a).requires_grad());
    }
  }
  Tensor d = detach(a);
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_alias_of(a));
  EXPECT_FALSE((d * d).requires_grad());
}

TEST(Autograd, InPlaceChangeOfASavedTensorIsReported) {
  Tensor a = requires_grad_(ones({2}));
  Tensor b = a * 2;  // non-leaf
  Tensor y = b * b;  // saves b
  add_(b, 1);
  Error e = error_of([&] { backward(y, ones({2})); });
  EXPECT_TRUE(mentions(e, "modified by an inplace operation")) << e.what();
}

TEST(Autograd, InPlaceOnALeafThatRequiresGradIsAnError) {
  Tensor a = requires_grad_(ones({2}));
  EXPECT_TRUE(mentions(error_of([&] { add_(a, 1); }), "leaf tensor that requires grad"));
  NoGradGuard guard;  // allowed without recording, as optimizers do
  add_(a, 1);
  EXPECT_EQ(values(a), (std::vector<float>{2, 2}));
}

TEST(Autograd, InPlaceOnANonLeafContinuesTheHistory) {
  Tensor a = requires_grad_(tensor({1.f, 2.f}));
  Tensor b = a * 3;
  add_(b, a);  // b = 3a + a
  backward(b, ones({2}));
  EXPECT_EQ(values(grad(a)), (std::vector<float>{4, 4}));
}

TEST(Autograd, GradReturnsWithoutTouchingDotGrad) {
  Tensor a = requires_grad_(tensor({3.f}));
  Tensor y = a * a * a;
  std::vector<Tensor> g = grad({y}, {a});
  EXPECT_EQ(values(g[0]), (std::vector<float>{27}));
  EXPECT_FALSE(grad(a).defined());
  Tensor unused = requires_grad_(tensor({1.f}));
  EXPECT_TRUE(mentions(error_of([&] { grad({a * a}, {unused}); }), "allow_unused"));
}

TEST(Autograd, DoubleBackwardThroughElementwiseOps) {
  Tensor x = requires_grad_(tensor({2.f}));
  Tensor y = x * x * x;                                             // y = x^3
  Tensor dy = grad({y}, {x}, {}, false, /*create_graph=*/true)[0];  // 3x^2 = 12
  EXPECT_EQ(values(dy), (std::vector<float>{12}));
  EXPECT_TRUE(dy.requires_grad());
  Tensor d2y = grad({dy}, {x})[0];  // 6x = 12
  EXPECT_EQ(values(d2y), (std::vector<float>{12}));
}

TEST(Autograd, IntegerOutputsCarryNoGradient) {
  Tensor a = requires_grad_(tensor({1.f, 2.f}));
  EXPECT_FALSE(to(a * a, DType::Int64).requires_grad());
  EXPECT_TRUE(mentions(error_of([&] { requires_grad_(tensor({1, 2})); }), "floating point"));
}

TEST(Autograd, GraphIsFreedWithItsTensors) {
  int64_t before = allocator_stats().live_bytes;
  {
    Tensor a = requires_grad_(randn({100}));
    Tensor y = a * a * a;
    backward(y, ones({100}));
  }
  EXPECT_EQ(allocator_stats().live_bytes, before);
}

// Regression: forward passes on many threads that share a fresh leaf (a
// parameter) raced to make its accumulator, and crashed now and then.
TEST(Autograd, ThreadsSharingAFreshLeafRecordSafely) {
  for (int round = 0; round < 20; ++round) {
    Tensor w = requires_grad_(randn({4, 4}));
    std::vector<std::thread> threads;
    std::vector<Tensor> losses(8);
    for (size_t i = 0; i < losses.size(); ++i) {
      threads.emplace_back([&, i] { losses[i] = sum(w * w); });
    }
    for (std::thread& t : threads)
      t.join();
    for (const Tensor& loss : losses)
      backward(loss);
    std::vector<float> g = values(grad(w)), v = values(w);
    for (size_t k = 0; k < v.size(); ++k)
      EXPECT_FLOAT_EQ(g[k], 16 * v[k]);
  }
}

}  // namespace
}  // namespace kiln
