// The door every op goes through: attribute checking, input counts, casts,
// writing into existing tensors, and the observer hook tracing will use.
#include <gtest/gtest.h>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(Dispatch, ChecksAttributes) {
  const OpDef& cast = op("cast");
  EXPECT_EQ(error_text([&] { dispatch(cast, {zeros({2})}); }),
            "cast: missing required attribute 'dtype'");
  EXPECT_EQ(error_text([&] {
              dispatch(cast, {zeros({2})}, {{"dtype", int64_t(3)}});
            }),
            "cast: attribute 'dtype' expects dtype, got 3");
  EXPECT_EQ(error_text([&] {
              dispatch(cast, {zeros({2})}, {{"dtype", DType::Int32}, {"axis", int64_t(0)}});
            }),
            "cast: unexpected attribute 'axis'");
}

TEST(Dispatch, ChecksInputCount) {
  EXPECT_EQ(error_text([&] {
              dispatch(op("clone"), {zeros({1}), zeros({1})});
            }),
            "clone: expected 1 inputs, got 2");
}

TEST(Dispatch, UnknownOpIsAnError) {
  EXPECT_EQ(error_text([] { op("no_such_op"); }), "unknown op 'no_such_op'");
}

TEST(Dispatch, FillsDefaultsInDeclarationOrder) {
  Attrs attrs = normalize_attrs(op("fill"), {{"int_value", int64_t(3)}});
  ASSERT_EQ(attrs.items().size(), 2u);
  EXPECT_EQ(attrs.items()[0].first, "value");
  EXPECT_EQ(attrs.get_int("int_value"), 3);
}

TEST(Dispatch, ErrorsKeepTheirKind) {
  try {
    zeros({2}).size(5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
  }
}

TEST(Dispatch, WrappedScalarsHaveTheirOwnDtype) {
  EXPECT_EQ(wrap_scalar(2.5).dtype(), DType::Float64);
  EXPECT_EQ(wrap_scalar(int64_t(2)).dtype(), DType::Int64);
  EXPECT_TRUE(wrap_scalar(true).impl()->wrapped_number);
}

struct RecordingObserver : DispatchObserver {
  std::vector<std::string> ops;
  void on_op(const OpDef& op, std::span<const Tensor>, const Attrs&,
             std::span<const Tensor>) override {
    ops.push_back(op.name);
  }
};

TEST(Dispatch, ObserverSeesEveryOpOnItsThread) {
  RecordingObserver observer;
  set_dispatch_observer(&observer);
  Tensor x = zeros({2});
  Tensor y = clone(to(x, DType::Int32));
  set_dispatch_observer(nullptr);
  clone(y);  // not recorded
  EXPECT_EQ(observer.ops, (std::vector<std::string>{"cast", "clone"}));
}

TEST(Dispatch, CopyIntoBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3}, DType::Int32);
  copy_(dst, tensor({1.9f, 2.1f, -3.7f}));
  EXPECT_EQ(dst.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, -3, 1, 2, -3}));
  EXPECT_NE(error_text([&] { copy_(dst, zeros({4})); }).find("[4]"), std::string::npos);
}

}  // namespace
}  // namespace kiln
