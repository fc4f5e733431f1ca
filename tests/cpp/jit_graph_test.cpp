// The graph IR's building blocks: values, nodes, uses, rewrites.
#include "kiln/jit/ir/graph.h"

#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

TEST(JitGraph, AppendInfersTypesAndRecordsUses) {
  Graph g;
  Value* x = g.add_input(f32({2, 3}), "x");
  Value* w = g.add_param("fc.weight", f32({4, 3}));
  Value* b = g.add_param("fc.bias", f32({4}));
  Node* lin = g.append(op("linear"), {x, w, b});
  Node* act = g.append(op("relu"), {lin->output()});
  g.set_outputs({act->output()});

  EXPECT_EQ(to_static(lin->output()->shape()), (IntList{2, 4}));
  EXPECT_EQ(lin->output()->producer(), lin);
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].user, lin);
  EXPECT_EQ(g.find_param("fc.bias"), b);
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{lin, act}));
  EXPECT_EQ(lin->attrs().items().size(), op("linear").attrs.size());
}

TEST(JitGraph, AbsentOptionalInputIsNull) {
  Graph g;
  Value* x = g.add_input(f32({2, 3}));
  Value* w = g.add_param("w", f32({4, 3}));
  Node* lin = g.append(op("linear"), {x, w, nullptr});
  EXPECT_EQ(lin->input(2), nullptr);
  EXPECT_EQ(to_static(lin->output()->shape()), (IntList{2, 4}));
  EXPECT_TRUE(mentions(error_of([&] { g.append(op("relu"), {nullptr}); }), "relu"));
}

TEST(JitGraph, ShapeErrorsNameTheOpAndShapes) {
  Graph g;
  Value* a = g.add_input(f32({2, 3}));
  Value* b = g.add_input(f32({4, 5}));
  Error e = error_of([&] { g.append(op("matmul"), {a, b}); });
  EXPECT_TRUE(mentions(e, "matmul")) << e.what();
  EXPECT_TRUE(mentions(e, "[2, 3]")) << e.what();
}

TEST(JitGraph, MixedDtypesNeedAnExplicitCast) {
  Graph g;
  Value* a = g.add_input(f32({3}));
  Value* i = g.add_input(TensorMeta{DType::Int64, {3}});
  EXPECT_TRUE(mentions(error_of([&] { g.append(op("add"), {a, i}); }), "cast"));
  Node* cast = g.append(op("cast"), {i}, {{"dtype", DType::Float32}});
  EXPECT_EQ(g.append(op("add"), {a, cast->output()})->output()->dtype(), DType::Float32);
}

TEST(JitGraph, ReplaceAllUsesAndErase) {
  Graph g;
  Value* x = g.add_input(f32({3}));
  Node* n1 = g.append(op("neg"), {x});
  Node* n2 = g.append(op("neg"), {n1->output()});
  Node* n3 = g.append(op("relu"), {n2->output()});
  g.set_outputs({n3->output(), n2->output()});
  // neg(neg(x)) == x: route the uses to x, then drop the dead nodes.
  n2->output()->replace_all_uses_with(x);
  EXPECT_EQ(n3->input(0), x);
  EXPECT_EQ(g.outputs()[1], x);
  EXPECT_TRUE(mentions(error_of([&] { g.erase(n1); }), "still has uses"));
  g.erase(n2);
  g.erase(n1);
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{n3}));
  EXPECT_EQ(x->uses().size(), 1u);
}

TEST(JitGraph, InsertBeforeKeepsTopologicalOrder) {
  Graph g;
  Value* x = g.add_input(f32({3}));
  Node* relu = g.append(op("relu"), {x});
  Node* neg = g.insert_before(relu, op("neg"), {x});
  relu->set_input(0, neg->output());
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{neg, relu}));
}

TEST(JitGraph, ParamsAndConstantsHoldTensors) {
  Graph g;
  Tensor w = zeros({2, 2});
  Value* p = g.add_param("w", f32({2, 2}), w);
  EXPECT_TRUE(p->data().is_same(w));
  EXPECT_TRUE(mentions(error_of([&] { g.add_param("w", f32({2, 2})); }), "already exists"));
  EXPECT_TRUE(mentions(error_of([&] { p->set_data(zeros({3})); }), "[3]"));
  Value* c = g.add_constant(full({}, 2.5, DType::Float64), /*wrapped_number=*/true);
  EXPECT_TRUE(c->type().wrapped_number);
  g.remove_unused(c);
  EXPECT_TRUE(g.constants().empty());
}

TEST(JitGraph, CloneIsDeepAndIndependent) {
  Graph g;
  Value* x = g.add_input(f32({3}), "x");
  Node* n = g.append(op("relu"), {x});
  g.set_outputs({n->output()});
  std::unique_ptr<Graph> copy = g.clone();
  ASSERT_EQ(copy->num_nodes(), 1u);
  Node* c = copy->nodes()[0];
  EXPECT_NE(c, n);
  EXPECT_EQ(c->input(0), copy->inputs()[0]);
  EXPECT_EQ(copy->inputs()[0]->name(), "x");
  EXPECT_EQ(copy->outputs()[0], c->output());
}

// Regressions: a value or node of another graph used to be accepted (and
// left dangling pointers when that graph died, or undefined behaviour in
// remove_unused); erase of a foreign node dropped use records before failing;
// replacing an input that was only a graph output left the output alone.
TEST(JitGraph, ValuesOfAnotherGraphAreRefused) {
  Graph g, other;
  Value* x = g.add_input(f32({3}), "x");
  Value* foreign = other.add_input(f32({3}), "y");
  EXPECT_TRUE(mentions(error_of([&] { g.append(op("add"), {x, foreign}); }), "another graph"));
  EXPECT_TRUE(x->uses().empty());
  Node* n = g.append(op("relu"), {x});
  EXPECT_TRUE(mentions(error_of([&] { n->set_input(0, foreign); }), "another graph"));
  EXPECT_TRUE(mentions(error_of([&] { g.set_outputs({foreign}); }), "another graph"));
  EXPECT_TRUE(mentions(error_of([&] { g.remove_unused(foreign); }), "not in this graph"));
  EXPECT_TRUE(mentions(error_of([&] { x->replace_all_uses_with(foreign); }), "another graph"));
  EXPECT_EQ(other.inputs().size(), 1u);
  EXPECT_EQ(n->input(0), x);
}

TEST(JitGraph, ErasingANodeOfAnotherGraphChangesNothing) {
  Graph g, other;
  Value* y = other.add_input(f32({3}), "y");
  Node* theirs = other.append(op("relu"), {y});
  EXPECT_TRUE(mentions(error_of([&] { g.erase(theirs); }), "not in this graph"));
  ASSERT_EQ(y->uses().size(), 1u);
  EXPECT_EQ(y->uses()[0].user, theirs);
}

TEST(JitGraph, ReplacingAnInputThatIsOnlyAnOutput) {
  Graph g;
  Value* x = g.add_input(f32({3}), "x");
  Value* y = g.add_input(f32({3}), "y");
  g.set_outputs({x});
  x->replace_all_uses_with(y);
  EXPECT_EQ(g.outputs(), (std::vector<Value*>{y}));
}

}  // namespace
}  // namespace kiln::jit
