// Graphs built without example values (an ONNX import): an equality of sizes
// that shape inference needs and nothing decides is assumed as a guard
// (equal_or_assumed, ShapeEnv::set_assume_undecided, GraphAssumptions),
// which re-inference takes as a fact and every call checks; sizes provably
// different stay an error. And -1 of a reshape solved by polynomial division.
#include <gtest/gtest.h>

#include "kiln/core/dim.h"
#include "kiln/core/shape.h"
#include "kiln/jit/ir/graph.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

const Dim kH = Dim::symbol("h");
const Dim kBatch = Dim::symbol("batch");
const Dim kOther = Dim::symbol("other");
// After a stride-16 path and a stride-32 path resized twice: equal when h is
// a multiple of 32 (h = 64: 4 and 4), not for every h (h = 48: 3 and 4).
const Dim kBy16 = floordiv(kH - 1, 16) + 1;
const Dim kBy32Twice = 2 * floordiv(kH - 1, 32) + 2;

TensorMeta f32(DimList shape) {
  return TensorMeta{DType::Float32, std::move(shape)};
}

TEST(SymbolicGuard, AnUndecidedEqualityIsAssumedAsAGuard) {
  ShapeEnv env;
  env.set_assume_undecided(true);
  env.set_context("node 'add'");
  ShapeEnvScope scope(&env);
  DimList out = broadcast_shapes(DimList{2, kBy16}, DimList{2, kBy32Twice}, "add");
  EXPECT_TRUE(same_dims(out, {2, kBy16}));
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].to_string(), str(kBy16, " == ", kBy32Twice));
  EXPECT_EQ(env.guards()[0].reason, "node 'add'");
  EXPECT_TRUE(env.guards()[0].holds({{"h", 64}}));
  EXPECT_FALSE(env.guards()[0].holds({{"h", 48}}));
}

TEST(SymbolicGuard, ProvablyDifferentSizesStayAnError) {
  ShapeEnv env;
  env.set_assume_undecided(true);
  ShapeEnvScope scope(&env);
  EXPECT_THROW_WITH(broadcast_shapes(DimList{kH}, DimList{kH + 1}, "add"),
                    "cannot be broadcast: size h vs h + 1");
  EXPECT_THROW_WITH(broadcast_shapes(DimList{3}, DimList{4}, "add"), "size 3 vs 4");
  EXPECT_THROW(broadcast_shapes(DimList{2 * kH + 1}, DimList{2 * kH}, "add"), Error);
  EXPECT_TRUE(env.guards().empty());
}

TEST(SymbolicGuard, SizeOneAndPlainEqualitiesAssumeNothing) {
  ShapeEnv env;
  env.set_assume_undecided(true);
  ShapeEnvScope scope(&env);
  // A side that is 1 broadcasts with no assumption; `batch == 1` asked by
  // other code is false, as with no ShapeEnv, and records nothing.
  EXPECT_TRUE(same_dims(broadcast_shapes(DimList{kBatch, 3}, DimList{1, 3}, "add"), {kBatch, 3}));
  EXPECT_FALSE(kBatch == Dim(1));
  EXPECT_TRUE(env.guards().empty());
}

TEST(SymbolicGuard, WithoutAShapeEnvNothingIsAssumed) {
  EXPECT_THROW_WITH(broadcast_shapes(DimList{kBy16}, DimList{kBy32Twice}, "add"),
                    "cannot be broadcast");
  EXPECT_FALSE(equal_or_assumed(kBatch, kOther));
}

TEST(SymbolicGuard, ExampleValuesDecideWhatWouldBeAssumed) {
  ShapeEnv env;
  env.set_assume_undecided(true);
  env.set_hint("h", 48);
  ShapeEnvScope scope(&env);
  EXPECT_FALSE(equal_or_assumed(kBy16, kBy32Twice));  // 3 vs 4 at the example
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].relation, ShapeGuard::Relation::Ne);
}

TEST(SymbolicGuard, CatAndCellStatesAssumeTheirSizes) {
  ShapeEnv env;
  env.set_assume_undecided(true);
  ShapeEnvScope scope(&env);
  const OpDef& cat = op("cat");
  std::vector<TensorMeta> parts{f32({1, 8, kBy32Twice}), f32({1, 4, kBy16})};
  InferResult joined = infer_meta(cat, parts, normalize_attrs(cat, {{"dim", int64_t(1)}}));
  EXPECT_TRUE(same_dims(joined.outputs[0].shape, {1, 12, kBy32Twice}));
  // An LSTM cell whose gates come from x of batch `batch` and whose state
  // is of batch `other` (two symbols of one imported model's inputs).
  std::vector<TensorMeta> cell{f32({kBatch, 16}), f32({kBatch, 16}), f32({kOther, 4})};
  InferResult state = infer_meta(op("lstm_cell_pointwise"), cell, {});
  EXPECT_TRUE(same_dims(state.outputs[0].shape, {kOther, 4}));
  EXPECT_EQ(env.guards().size(), 2u);
}

// x [batch] + y [other]: the graph assumes batch == other, as ONNX Runtime
// needs them (or one of them 1) when it runs.
std::shared_ptr<Graph> assumed_add() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({kBatch}), "x");
  Value* y = g->add_input(f32({kOther}), "y");
  GraphAssumptions assumptions(*g, "node 'sum' (Add)");
  Value* sum = g->append(op("add"), {x, y}, {})->output();
  assumptions.commit();
  g->set_outputs({sum});
  return g;
}

TEST(SymbolicGuard, AGraphKeepsItsAssumptionsAndReinfersUnderThem) {
  std::shared_ptr<Graph> g = assumed_add();
  ASSERT_EQ(g->guards().size(), 1u);
  EXPECT_EQ(g->guards()[0].reason, "node 'sum' (Add)");
  EXPECT_NO_THROW(verify(*g));  // the guard decides the broadcast again
  EXPECT_NO_THROW(bind_symbols(*g, std::vector<IntList>{{4}, {4}}));
  EXPECT_THROW_WITH(bind_symbols(*g, std::vector<IntList>{{3}, {4}}),
                    "guard batch == other (node 'sum' (Add)), which these sizes break: with "
                    "batch = 3, other = 4: batch = 3, other = 4");
}

TEST(SymbolicGuard, ACallThatBreaksAnAssumptionNamesSizesValuesAndNode) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({kH}), "x");
  Value* y = g->add_input(f32({kBy16}), "y");
  Value* z = g->add_input(f32({kBy32Twice}), "z");
  {
    GraphAssumptions assumptions(*g, "onnx import: node 'p2o.Add.248' (Add)");
    g->append(op("add"), {y, z}, {});
    assumptions.commit();
  }
  g->set_outputs({x});
  EXPECT_NO_THROW(bind_symbols(*g, std::vector<IntList>{{64}, {4}, {4}}));
  EXPECT_THROW_WITH(bind_symbols(*g, std::vector<IntList>{{48}, {3}, {4}}),
                    str("the graph was built under the guard ", kBy16, " == ", kBy32Twice,
                        " (onnx import: node 'p2o.Add.248' (Add)), which these sizes break: "
                        "with h = 48: ",
                        kBy16, " = 3, ", kBy32Twice, " = 4"));
}

TEST(SymbolicGuard, ANestedGraphShapeScopeHandsItsAssumptionsOn) {
  Graph g;
  Value* a = g.add_input(f32({kBatch}), "a");
  Value* b = g.add_input(f32({kOther}), "b");
  GraphAssumptions assumptions(g, "outer");
  {
    GraphShapeScope facts(g);  // as a translation that needs the graph's guards does
    g.append(op("mul"), {a, b}, {});
  }
  assumptions.commit();
  ASSERT_EQ(g.guards().size(), 1u);
  EXPECT_EQ(g.guards()[0].reason, "outer");
}

TEST(SymbolicGuard, AFailedNodeLeavesNoAssumption) {
  Graph g;
  Value* a = g.add_input(f32({kBatch}), "a");
  Value* b = g.add_input(f32({kOther}), "b");
  Value* c = g.add_input(f32({kBatch + 1}), "c");
  {
    GraphAssumptions assumptions(g, "node");
    g.append(op("mul"), {a, b}, {});
    EXPECT_THROW(g.append(op("mul"), {a, c}, {}), Error);  // batch vs batch + 1
  }                                                        // not committed
  EXPECT_TRUE(g.guards().empty());
}

TEST(SymbolicReshape, MinusOneIsSolvedByPolynomialDivision) {
  // ddddocr: [T, 1, 2, 512] to [T, 1, -1] with T = (w - 1) // 8 + 1.
  const Dim t = floordiv(Dim::symbol("w") - 1, 8) + 1;
  DimList shape = infer_reshape(DimList{t, 1, -1}, numel_of(DimList{t, 1, 2, 512}), "reshape",
                                DimList{t, 1, 2, 512});
  EXPECT_TRUE(same_dims(shape, {t, 1, 1024}));
  const Dim x = Dim::symbol("x"), y = Dim::symbol("y");
  std::optional<Dim> q = exact_divide((x + 1) * (y + 2) * 3, x + 1);
  ASSERT_TRUE(q.has_value());
  EXPECT_TRUE(q->same_as(3 * y + 6));
  EXPECT_FALSE(exact_divide(x + 2, x + 1).has_value());
  EXPECT_FALSE(exact_divide(x * y + 1, x).has_value());
  EXPECT_THROW(infer_reshape(DimList{x + 1, -1}, numel_of(DimList{x, 6}), "reshape", {}), Error);
}

}  // namespace
}  // namespace kiln::jit
