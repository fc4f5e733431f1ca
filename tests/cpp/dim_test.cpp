// Dim, ShapeEnv and guards (core/dim.h), and shape inference over symbolic
// dims through the op table: the same infer function serves eager calls and
// symbolic graphs.
#include "kiln/core/dim.h"

#include <gtest/gtest.h>

#include "kiln/core/shape.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln {
namespace {

const Dim batch = Dim::symbol("batch");
const Dim seq = Dim::symbol("seq");

DimList infer_one(const std::string& name, std::vector<TensorMeta> inputs, const Attrs& attrs) {
  const OpDef& def = op(name);
  return infer_meta(def, inputs, normalize_attrs(def, attrs)).outputs.at(0).shape;
}

TensorMeta f32(DimList shape) {
  return TensorMeta{DType::Float32, std::move(shape)};
}

TEST(Dim, StaticArithmeticStaysStatic) {
  Dim a = Dim(6) * 4 + 2;
  ASSERT_TRUE(a.is_static());
  EXPECT_EQ(a.static_value(), 26);
  EXPECT_EQ(floordiv(Dim(-7), 2).static_value(), -4);  // Python's floor
  EXPECT_EQ(mod(Dim(-7), 2).static_value(), 1);
}

TEST(Dim, SymbolicArithmeticIsCanonical) {
  Dim n = batch * seq * 8;
  EXPECT_TRUE(n.is_symbolic());
  EXPECT_TRUE(n.same_as(seq * 8 * batch));
  EXPECT_EQ(n.to_string(), "8*batch*seq");
  EXPECT_TRUE((batch - batch).is_static());  // x - x = 0
  EXPECT_TRUE(exact_divide(n, seq)->same_as(8 * batch));
  EXPECT_FALSE(exact_divide(n, Dim(3)).has_value());
  EXPECT_FALSE(exact_divide(batch + 1, batch).has_value());
}

TEST(Dim, EqualityWithoutEnvIsStructural) {
  EXPECT_TRUE(batch * 2 == batch + batch);
  EXPECT_FALSE(batch == seq);  // unlike forms: taken as different
  EXPECT_FALSE(batch == 1);
  EXPECT_TRUE(batch + 1 != batch);
}

TEST(Dim, OrderWithoutEnvIsAnErrorUnlessProvable) {
  EXPECT_TRUE(batch < batch + 1);
  EXPECT_FALSE(batch + 3 < batch);
  EXPECT_THROW((void)(batch < seq), Error);
  EXPECT_TRUE(definitely_less(batch, batch + 1));
  EXPECT_FALSE(definitely_less(batch, seq));
}

TEST(ShapeEnv, DecidesFromHintsAndRecordsGuards) {
  ShapeEnv env;
  env.set_hint("batch", 4);
  env.set_hint("seq", 128);
  ShapeEnvScope scope(&env);
  EXPECT_FALSE(batch == seq);
  EXPECT_TRUE(seq > 64);
  EXPECT_FALSE(seq < 100);
  ASSERT_EQ(env.guards().size(), 3u);
  EXPECT_EQ(env.guards()[0].to_string(), "batch != seq");
  EXPECT_EQ(env.guards()[1].to_string(), "64 < seq");
  EXPECT_EQ(env.guards()[2].to_string(), "100 <= seq");
  // The guards check other values.
  EXPECT_TRUE(env.guards()[1].holds({{"seq", 65}}));
  EXPECT_FALSE(env.guards()[1].holds({{"seq", 64}}));
  // A repeated decision adds no guard.
  EXPECT_TRUE(seq > 64);
  EXPECT_EQ(env.guards().size(), 3u);
}

TEST(ShapeEnv, WithoutHintsTheGuardsAreTheFacts) {
  ShapeEnv traced;
  traced.set_hint("seq", 200);
  {
    ShapeEnvScope scope(&traced);
    EXPECT_TRUE(seq > 128);
  }
  ShapeEnv replay;
  for (const ShapeGuard& g : traced.guards())
    replay.add_guard(g);
  ShapeEnvScope scope(&replay);
  EXPECT_TRUE(seq > 128);
  EXPECT_FALSE(seq <= 128);
  EXPECT_THROW((void)(seq > 7), Error);  // nothing says
}

TEST(ShapeEnv, AGuardAnswersWhatItImpliesWithNoSecondGuard) {
  ShapeEnv env;
  env.set_hint("seq", 300);
  ShapeEnvScope scope(&env);
  EXPECT_TRUE(seq > 128);
  EXPECT_TRUE(seq >= 128);   // implied by 128 < seq
  EXPECT_FALSE(seq <= 128);  // its negation
  EXPECT_TRUE(seq != 128);
  EXPECT_FALSE(seq == 128);
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].to_string(), "128 < seq");
  EXPECT_TRUE(seq > 200);  // not implied: a guard of its own
  EXPECT_EQ(env.guards().size(), 2u);
}

TEST(ShapeEnv, AnIntReadFixesTheSymbolForLaterDecisions) {
  ShapeEnv env;
  env.set_hint("batch", 4);
  ShapeEnvScope scope(&env);
  env.add_guard(ShapeGuard{batch.expr(), SizeExpr(4), ShapeGuard::Relation::Eq, "int()"});
  EXPECT_TRUE(batch * 6 == Dim(24));
  EXPECT_TRUE(batch > 1);
  EXPECT_EQ(env.guards().size(), 1u);
}

TEST(ShapeEnv, ScopesNest) {
  ShapeEnv outer, inner;
  {
    ShapeEnvScope a(&outer);
    {
      ShapeEnvScope b(&inner);
      EXPECT_EQ(current_shape_env(), &inner);
    }
    EXPECT_EQ(current_shape_env(), &outer);
  }
  EXPECT_EQ(current_shape_env(), nullptr);
}

TEST(SymbolicInfer, BroadcastKeepsSymbolsAndSizeOneIsGeneral) {
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{batch, 4}, DimList{1, 4}, "add"), {batch, 4}));
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{batch, 4}, DimList{4}, "add"), {batch, 4}));
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{batch, 4}, DimList{batch, 4}, "add"), {batch, 4}));
  // Example size 1 makes no special case: equal symbols need no guard.
  ShapeEnv env;
  env.set_hint("batch", 1);
  ShapeEnvScope scope(&env);
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{batch, 4}, DimList{batch, 1}, "add"), {batch, 4}));
  EXPECT_TRUE(env.guards().empty());
}

TEST(SymbolicInfer, BroadcastOfUnlikeSymbolsGuards) {
  ShapeEnv env;
  env.set_hint("batch", 3);
  env.set_hint("seq", 3);
  ShapeEnvScope scope(&env);
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{batch}, DimList{seq}, "add"), {batch}));
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].to_string(), "batch == seq");
}

TEST(SymbolicInfer, BroadcastMismatchWithoutEnvNamesBothShapes) {
  try {
    broadcast_shapes(DimList{batch}, DimList{seq}, "add");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[batch] and [seq]"), std::string::npos) << e.what();
  }
}

TEST(SymbolicInfer, ReshapeInfersMinusOneByExactDivision) {
  DimList shape = infer_reshape(DimList{batch, -1}, numel_of(DimList{batch, 8, 64}), "view",
                                DimList{batch, 8, 64});
  EXPECT_TRUE(same_dims(shape, {batch, 512}));
  shape = infer_reshape(DimList{-1, 64}, batch * seq * 512, "view", {});
  EXPECT_TRUE(same_dims(shape, {8 * batch * seq, 64}));
  EXPECT_THROW(infer_reshape(DimList{-1, seq}, batch * 512, "view", {}), Error);
}

TEST(SymbolicInfer, OpTableRowsCarrySymbols) {
  EXPECT_TRUE(
      same_dims(infer_one("linear", {f32({batch, seq, 16}), f32({32, 16})}, {}), {batch, seq, 32}));
  EXPECT_TRUE(same_dims(infer_one("matmul", {f32({batch, seq, 16}), f32({batch, 16, seq})}, {}),
                        {batch, seq, seq}));
  EXPECT_TRUE(
      same_dims(infer_one("sum", {f32({batch, seq, 16})}, {{"dims", IntList{1}}}), {batch, 16}));
  EXPECT_TRUE(same_dims(infer_one("cat", {f32({batch, 3}), f32({seq, 3})}, {{"dim", int64_t(0)}}),
                        {batch + seq, 3}));
  EXPECT_TRUE(same_dims(infer_one("conv2d", {f32({batch, 3, seq, seq}), f32({8, 3, 3, 3})},
                                  {{"stride", IntList{2, 2}}}),
                        {batch, 8, floordiv(seq - 3, 2) + 1, floordiv(seq - 3, 2) + 1}));
  EXPECT_TRUE(same_dims(
      infer_one("transpose", {f32({batch, seq, 4})}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}}),
      {seq, batch, 4}));
  EXPECT_TRUE(
      same_dims(infer_one("view", {f32({batch, seq, 64})}, {{"shape", DimList{batch, seq, 8, 8}}}),
                {batch, seq, 8, 8}));
}

TEST(SymbolicInfer, SliceWithSymbolicEndGuardsItsClamping) {
  ShapeEnv env;
  env.set_hint("seq", 10);
  ShapeEnvScope scope(&env);
  DimList out = infer_one("slice", {f32({2, seq})},
                          {{"dim", int64_t(1)}, {"end", floordiv(seq, 2)}, {"step", int64_t(1)}});
  EXPECT_TRUE(same_dims(out, {2, floordiv(seq, 2)}));
}

TEST(SymbolicInfer, AConcreteSizeWhereASymbolIsNamesTheOp) {
  // 4*batch splits into rows of 3 only for some batches, and no trace is
  // here to decide which.
  try {
    infer_one("reshape", {f32({batch, 4})}, {{"shape", IntList{3, -1}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch"), std::string::npos) << msg;
  }
}

TEST(SymbolicInfer, WeightSizesMayBeSymbols) {
  // The number of rows of an embedding table and of filters of a conv reach
  // the output as they are; their range checks wait for the call's sizes.
  EXPECT_TRUE(same_dims(infer_one("embedding", {f32({batch, 4}), TensorMeta{DType::Int64, {3}}},
                                  {{"padding_idx", int64_t(2)}}),
                        {3, 4}));
  EXPECT_TRUE(same_dims(
      infer_one("conv2d", {f32({2, 3, 8, 8}), f32({batch, 3, 3, 3})}, {{"stride", IntList{1, 1}}}),
      {2, batch, 6, 6}));
}

TEST(SymbolicInfer, StaticAttrsStayIntegers) {
  Attrs a;
  a.set("shape", DimList{2, 3});
  EXPECT_TRUE(std::holds_alternative<IntList>(a.get("shape")));
  a.set("shape", DimList{batch, 3});
  EXPECT_TRUE(std::holds_alternative<DimList>(a.get("shape")));
  EXPECT_THROW(a.get_ints("shape"), Error);
  EXPECT_EQ(a.evaluated({{"batch", 5}}).get_ints("shape"), (IntList{5, 3}));
}

}  // namespace
}  // namespace kiln
