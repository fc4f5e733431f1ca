// Sizes a node binds when it runs (Note [Data-dependent output shapes] in
// ops/data_dependent.h): graphs name a fresh symbol per such node, print and
// parse it, and every runner binds it from the node's outputs, evaluates
// the attributes and checks the guards that mention it, against eager.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/compiled.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/passes/pipeline.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

Tensor floats(std::vector<float> values, IntList shape) {
  return tensor(values, shape);
}

// The nonzero elements of x, squared: sizes over nz0 from nonzero on.
struct NonzeroSquares {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Node* nonzero = nullptr;

  explicit NonzeroSquares(const DimList& x_shape) {
    Value* x = graph->add_input(TensorMeta{DType::Float32, x_shape}, "x");
    Value* flat = graph->append(op("reshape"), {x}, {{"shape", IntList{-1}}})->output();
    nonzero = graph->append(op("nonzero"), {flat});
    Value* indices =
        graph->append(op("reshape"), {nonzero->output()}, {{"shape", IntList{-1}}})->output();
    Value* picked = graph->append(op("index_select"), {flat, indices}, {{"dim", 0}})->output();
    Value* squares = graph->append(op("mul"), {picked, picked})->output();
    graph->set_outputs({squares});
  }
};

Tensor eager_nonzero_squares(const Tensor& x) {
  Tensor flat = reshape(x, IntList{-1});
  Tensor picked = index_select(flat, 0, reshape(nonzero(flat), IntList{-1}));
  return dispatch1(op("mul"), {picked, picked});
}

TEST(DynamicSizes, EachNodeGetsASymbolNoOtherSizeUses) {
  Graph g;
  // An input already named nz0: the first nonzero must not take it.
  Value* x = g.add_input(TensorMeta{DType::Float32, {Dim::symbol("nz0"), 3}}, "x");
  Node* first = g.append(op("nonzero"), {x});
  Node* second = g.append(op("nonzero"), {x});
  Node* uniq = g.append(op("unique"), {x});
  EXPECT_EQ(bound_symbol(*first), "nz1");
  EXPECT_EQ(bound_symbol(*second), "nz2");
  EXPECT_EQ(bound_symbol(*uniq), "uniq0");
  EXPECT_EQ(to_string(first->output()->shape()), "[nz1, 2]");
  EXPECT_EQ(to_string(uniq->output(0)->shape()), "[uniq0]");
  EXPECT_EQ(to_string(uniq->output(2)->shape()), "[nz0, 3]");  // inverse: x's shape
  EXPECT_TRUE(binds_size_symbols(g));
  EXPECT_EQ(g.symbols(), std::vector<std::string>{"nz0"});  // bound by inputs: only nz0
}

TEST(DynamicSizes, TextRoundTripsAndVerifies) {
  NonzeroSquares f({4, 3});
  ASSERT_NO_THROW(verify(*f.graph));
  const std::string text = to_text(*f.graph);
  EXPECT_NE(text.find("i64[nz0, 1] = nonzero"), std::string::npos) << text;
  EXPECT_NE(text.find("size_symbol=\"nz0\""), std::string::npos) << text;
  std::unique_ptr<Graph> parsed = parse_graph(text);
  ASSERT_NO_THROW(verify(*parsed));
  EXPECT_EQ(to_text(*parsed), text);
}

TEST(DynamicSizes, ExecutableRunsAtRunTimeAtEveryCount) {
  NonzeroSquares f({2, 3});
  Executable exe(f.graph);
  EXPECT_EQ(exe.stats().planned_bytes, -1);  // no arena: sizes decided by the run
  for (const Tensor& x : {floats({0, 1, 0, 2, 0, 3}, {2, 3}), floats({0, 0, 0, 0, 0, 0}, {2, 3}),
                          floats({1, 2, 3, 4, 5, -6}, {2, 3})}) {
    std::vector<Tensor> got = exe.run({x});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(bitwise_equal(got[0], eager_nonzero_squares(x)));
  }
}

TEST(DynamicSizes, AttributesOverTheSymbolTakeItsValueWhenItIsBound) {
  NonzeroSquares f({6});
  Graph& g = *f.graph;
  const Dim nz = Dim::symbol(bound_symbol(*f.nonzero));
  Value* column = g.append(op("reshape"), {g.outputs()[0]}, {{"shape", DimList{nz, 1}}})->output();
  Value* wide = g.append(op("expand"), {column}, {{"size", DimList{nz, 2}}})->output();
  g.set_outputs({wide});
  ASSERT_NO_THROW(verify(g));
  CompiledFunction compiled(f.graph, 1);
  for (const Tensor& x : {floats({0, 2, 0, 3, 0, 0}, {6}), floats({1, 1, 1, 1, 1, 1}, {6})}) {
    Tensor squares = eager_nonzero_squares(x);
    Tensor want = expand(reshape(squares, IntList{squares.numel(), 1}), {squares.numel(), 2});
    EXPECT_TRUE(bitwise_equal(compiled({x})[0], want));
  }
}

TEST(DynamicSizes, AGuardOnTheSymbolIsCheckedOnceItIsBound) {
  NonzeroSquares f({4});
  const SizeExpr nz = SizeExpr::symbol(bound_symbol(*f.nonzero));
  f.graph->add_guard(ShapeGuard{nz, 2, ShapeGuard::Relation::Le, "a test's decision"});
  CompiledFunction compiled(f.graph, 1);
  EXPECT_NO_THROW(compiled({floats({0, 1, 0, 2}, {4})}));
  try {
    compiled({floats({1, 1, 0, 2}, {4})});
    FAIL() << "a count of 3 broke nz0 <= 2 unnoticed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nz0 <= 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nz0 = 3"), std::string::npos) << e.what();
  }
}

TEST(DynamicSizes, SymbolicInputsAndRunTimeSizesTogether) {
  NonzeroSquares f({Dim::symbol("n")});
  CompiledFunction compiled(f.graph, 1);
  ASSERT_TRUE(compiled.symbolic());
  for (const Tensor& x :
       {floats({0, 1, 2}, {3}), floats({5, 0, 0, 0, 0, 7, 1}, {7}), floats({}, {0})}) {
    EXPECT_TRUE(bitwise_equal(compiled({x})[0], eager_nonzero_squares(x)));
  }
}

TEST(DynamicSizes, TracedNonzeroAndUniqueMatchEagerAtOtherCounts) {
  TracedFn fn = [](const std::vector<Tensor>& in) {
    Tensor squares = eager_nonzero_squares(in[0]);
    UniqueResult u = unique(in[0], true, true, true);
    return std::vector<Tensor>{squares, u.values, u.inverse, u.counts};
  };
  CompiledFunction compiled = trace(fn, {floats({0, 1, 1, 3, 0, 2}, {2, 3})});
  const std::string text = to_text(compiled.graph());
  EXPECT_NE(text.find("nonzero"), std::string::npos) << text;
  EXPECT_NE(text.find("unique"), std::string::npos) << text;
  for (const Tensor& x : {floats({0, 1, 1, 3, 0, 2}, {2, 3}), floats({4, 4, 4, 4, 4, 4}, {2, 3}),
                          floats({0, 0, 0, 0, 0, 0}, {2, 3}), floats({6, 5, 4, 3, 2, 1}, {2, 3})}) {
    std::vector<Tensor> got = compiled({x}), want = fn({x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(bitwise_equal(got[i], want[i])) << "output " << i;
  }
}

// ones(idx.shape[0], 2): nonzero's output is unused, its count is not, so
// the passes keep the node that binds it.
TEST(DynamicSizes, ANodeReadOnlyForItsCountSurvivesThePasses) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({5}), "x");
  Node* nonzero = g->append(op("nonzero"), {x});
  const Dim count = Dim::symbol(bound_symbol(*nonzero));
  Value* one = g->add_constant(tensor(std::vector<float>{1.0f}, {}));
  g->set_outputs({g->append(op("expand"), {one}, {{"size", DimList{count, 2}}})->output()});
  optimize(*g);
  ASSERT_EQ(count_op_runs(*g, "nonzero"), 1u) << to_text(*g);
  CompiledFunction compiled(g, 1);
  EXPECT_EQ(compiled({floats({0, 3, 0, 1, 1}, {5})})[0].shape(), (IntList{3, 2}));
  EXPECT_EQ(compiled({floats({0, 0, 0, 0, 0}, {5})})[0].shape(), (IntList{0, 2}));
}

TEST(DynamicSizes, CompileReportSaysThereIsNoArena) {
  NonzeroSquares f({4});
  CompiledFunction compiled(f.graph, 1);
  EXPECT_NE(compiled.compile_report().to_string().find("allocates at run time"), std::string::npos)
      << compiled.compile_report().to_string();
}

}  // namespace
}  // namespace kiln::jit
