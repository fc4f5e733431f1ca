// Running graphs with symbolic sizes: binding the symbols from a call's
// inputs, specializing, one plan per size, and the errors for calls that
// break the graph's constraints.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/compiled.h"
#include "kiln/jit/compile/per_size_runner.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

const Dim batch = Dim::symbol("batch");
const Dim seq = Dim::symbol("seq");

// A transformer-style block over [batch, seq, 16]: project, split into 2
// heads of 8 with a view whose target names the symbols, attention scores
// per head, back to [batch, seq, 16].
std::shared_ptr<Graph> attention_like_graph(const Tensor& w) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(TensorMeta{DType::Float32, {batch, seq, 16}}, "x");
  Value* weight = g->add_param("w", TensorMeta{DType::Float32, {16, 16}}, w);
  Value* h = g->append(op("linear"), {x, weight, nullptr})->output();
  Value* heads = g->append(op("view"), {h}, {{"shape", DimList{batch, seq, 2, 8}}})->output();
  Value* q =
      g->append(op("transpose"), {heads}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}})->output();
  Value* kt =
      g->append(op("transpose"), {q}, {{"dim0", int64_t(2)}, {"dim1", int64_t(3)}})->output();
  Value* scores = g->append(op("matmul"), {q, kt})->output();
  Value* probs = g->append(op("softmax"), {scores}, {{"dim", int64_t(-1)}})->output();
  Value* mixed = g->append(op("matmul"), {probs, q})->output();
  Value* back =
      g->append(op("transpose"), {mixed}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}})->output();
  Value* out = g->append(op("reshape"), {back}, {{"shape", DimList{batch, seq, -1}}})->output();
  g->set_outputs({out});
  return g;
}

Tensor eager_attention(const Tensor& x, const Tensor& w) {
  const int64_t b = x.shape()[0], s = x.shape()[1];
  Tensor q = transpose(view(linear(x, w), {b, s, 2, 8}), 1, 2);
  Tensor scores = dispatch1(op("matmul"), {q, transpose(q, 2, 3)});
  Tensor probs = dispatch1(op("softmax"), {scores}, {{"dim", int64_t(-1)}});
  Tensor mixed = dispatch1(op("matmul"), {probs, q});
  return reshape(transpose(mixed, 1, 2), {b, s, -1});
}

TEST(JitSymbolicRun, OneGraphRunsEverySequenceLengthAsEager) {
  manual_seed(0);
  Tensor w = randn({16, 16});
  std::shared_ptr<Graph> g = attention_like_graph(w);
  EXPECT_EQ(type_to_text(g->outputs()[0]->type()), "f32[batch, seq, 16]");
  CompiledFunction f(g, 1);
  for (int64_t s : {1, 7, 128}) {
    for (int64_t b : {1, 3}) {
      Tensor x = randn({b, s, 16});
      Tensor got = f({x})[0];
      EXPECT_EQ(got.shape(), (IntList{b, s, 16}));
      EXPECT_TRUE(bitwise_equal(got, eager_attention(x, w))) << "batch " << b << ", seq " << s;
    }
  }
}

TEST(JitSymbolicRun, ASizeSeenBeforeReusesItsPlan) {
  manual_seed(1);
  std::shared_ptr<Graph> g = attention_like_graph(randn({16, 16}));
  PerSizeRunner runner(g, [](std::shared_ptr<const Graph> s, const BufferPlacer& place) {
    return std::shared_ptr<const GraphRunner>(
        std::make_shared<Executable>(s, std::span<const OutputIntoParam>{}, place));
  });
  std::vector<Tensor> a{randn({2, 5, 16})}, b{randn({2, 9, 16})}, a2{randn({2, 5, 16})};
  runner.run_unchecked(a);
  runner.run_unchecked(b);
  std::shared_ptr<const Graph> first = runner.specialized(a);
  runner.run_unchecked(a2);
  EXPECT_EQ(runner.num_sizes(), 2u);
  EXPECT_EQ(runner.specialized(a2), first);
  EXPECT_EQ(type_to_text(first->outputs()[0]->type()), "f32[2, 5, 16]");
}

TEST(JitSymbolicRun, InputsThatMustShareASymbolAreChecked) {
  Graph g;
  Value* a = g.add_input(TensorMeta{DType::Float32, {batch, 4}}, "a");
  Value* b = g.add_input(TensorMeta{DType::Float32, {batch, 4}}, "b");
  g.set_outputs({g.append(op("add"), {a, b})->output()});
  std::vector<IntList> ok{{3, 4}, {3, 4}}, bad{{3, 4}, {5, 4}};
  EXPECT_EQ(bind_symbols(g, ok).at("batch"), 3);
  try {
    bind_symbols(g, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("input 1 ('b') dim 0 is batch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sets to 3, but got 5"), std::string::npos) << msg;
  }
}

TEST(JitSymbolicRun, ExpressionDimsAndGuardsAreChecked) {
  Graph g;
  Value* a = g.add_input(TensorMeta{DType::Float32, {batch, 4}});
  Value* b = g.add_input(TensorMeta{DType::Float32, {2 * batch}});
  g.set_outputs({a, b});
  std::vector<IntList> ok{{3, 4}, {6}}, bad{{3, 4}, {7}};
  EXPECT_NO_THROW(bind_symbols(g, ok));
  EXPECT_THROW(bind_symbols(g, bad), Error);
  g.add_guard(
      ShapeGuard{SizeExpr(2), SizeExpr::symbol("batch"), ShapeGuard::Relation::Lt, "a branch"});
  try {
    bind_symbols(g, std::vector<IntList>{{2, 4}, {4}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 < batch (a branch)"), std::string::npos) << e.what();
  }
}

TEST(JitSymbolicRun, WrongRankIsAnErrorBeforeRunning) {
  CompiledFunction f(attention_like_graph(randn({16, 16})), 1);
  EXPECT_THROW(f({randn({2, 16})}), Error);
}

}  // namespace
}  // namespace kiln::jit
