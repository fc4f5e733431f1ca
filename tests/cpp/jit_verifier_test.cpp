// The verifier: a valid graph passes; each kind of broken graph is reported
// with a message that names the node (index and op) or value, and the
// problem.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

const TensorMeta kF23 = meta(DType::Float32, {2, 3});

// The verifier's message for `g`, checking it names everything in `parts`.
void expect_rejected(const Graph& g, const std::vector<std::string>& parts) {
  Error e = error_of([&] { verify(g); });
  for (const std::string& part : parts)
    EXPECT_TRUE(mentions(e, part)) << "'" << e.what() << "' lacks '" << part << "'";
}

TEST(JitVerifier, AcceptsAValidGraph) {
  std::unique_ptr<Graph> g = small_mlp();
  EXPECT_NO_THROW(verify(*g));
  g->params()[0]->set_data(zeros({4, 8}));
  EXPECT_NO_THROW(verify(*g));
  EXPECT_NO_THROW(verify(*g->clone()));
}

TEST(JitVerifier, DeclaredTypeMustMatchInference) {
  Graph g;
  Value* x = g.add_input(kF23, "x");
  Value* w = g.add_param("fc.weight", meta(DType::Float32, {4, 3}));
  Node* relu = g.append(op("relu"), {x});
  g.append_typed(op("linear"), {relu->output(), w, nullptr}, {}, {meta(DType::Float32, {2, 5})});
  expect_rejected(g, {"verify: node 1 (linear)", "output 0 (%1)",
                      "is declared f32[2, 5] but linear infers f32[2, 4]"});
}

TEST(JitVerifier, DeclaredTypeMustMatchInferenceFromText) {
  std::unique_ptr<Graph> g = parse_graph(R"(graph(%x : f32[2, 3]) {
    %0 : f32[2, 3] = relu(%x)
    %1 : f64[] = sum(%0) {dims=[]}
    return (%1)
  })");
  expect_rejected(*g, {"node 1 (sum)", "declared f64[] but sum infers f32[]"});
}

TEST(JitVerifier, OutputCountMustMatchTheOp) {
  Graph g;
  Value* x = g.add_input(kF23, "x");
  g.append_typed(op("relu"), {x}, {}, {kF23, kF23});
  expect_rejected(g, {"node 0 (relu)", "has 2 outputs, but relu gives 1"});
}

TEST(JitVerifier, InputDtypesMustBeWhatTheKernelTakes) {
  Graph g;
  Value* a = g.add_input(kF23, "a");
  Value* b = g.add_input(meta(DType::Int64, {2, 3}), "b");
  g.append_typed(op("add"), {a, b}, {}, {kF23});
  expect_rejected(g, {"node 0 (add)", "input 1 is int64 but the kernel takes float32", "cast"});
}

TEST(JitVerifier, InferenceErrorsNameTheNode) {
  Graph g;
  Value* a = g.add_input(kF23, "a");
  g.append_typed(op("matmul"), {a, a}, {}, {kF23});
  expect_rejected(g, {"node 0 (matmul)", "cannot be multiplied", "[2, 3]"});
}

TEST(JitVerifier, InputCountsAndAbsentInputs) {
  Graph too_many;
  Value* x = too_many.add_input(kF23, "x");
  too_many.append_typed(op("relu"), {x, x}, {}, {kF23});
  expect_rejected(too_many, {"node 0 (relu)", "has 2 inputs, relu takes at most 1"});

  Graph too_few;
  Value* y = too_few.add_input(kF23, "y");
  too_few.append_typed(op("where"), {y}, {}, {kF23});
  expect_rejected(too_few, {"node 0 (where)", "has 1 inputs, where takes at least 3"});

  Graph absent;
  Value* z = absent.add_input(kF23, "z");
  absent.append(op("neg"), {z});
  absent.append_typed(op("relu"), {nullptr}, {}, {kF23});
  expect_rejected(absent, {"node 1 (relu)", "input 0 is absent but relu requires it"});
  std::unique_ptr<Graph> parsed = parse_graph(R"(graph(%x : f32[2, 3]) {
    %0 : f32[2, 3] = linear(%x, none, none)
    return (%0)
  })");
  expect_rejected(*parsed, {"node 0 (linear)", "input 1 is absent but linear requires it"});
}

TEST(JitVerifier, ValuesMustBeDefinedBeforeUse) {
  Graph g;
  Value* x = g.add_input(kF23, "x");
  Node* later = g.append(op("relu"), {x});
  g.insert_before(later, op("neg"), {later->output()});
  expect_rejected(g, {"node 0 (neg)", "input 0 (%1) is used before it is defined (by node 1)"});
}

TEST(JitVerifier, OnlyConstantsAreWrappedNumbers) {
  Graph g;
  Value* x = g.add_input(kF23, "x");
  TensorMeta wrapped = kF23;
  wrapped.wrapped_number = true;
  g.append_typed(op("relu"), {x}, {}, {wrapped});
  expect_rejected(g, {"node 0 (relu)", "output 0 (%0) is marked a wrapped number"});
}

TEST(JitVerifier, NamesMustTellValuesApart) {
  Graph twice;
  twice.add_input(kF23, "x");
  twice.add_input(kF23, "x");
  expect_rejected(twice, {"two graph inputs are named 'x'"});

  Graph clash;
  clash.add_input(kF23, "fc.weight");
  clash.add_param("fc.weight", kF23);
  expect_rejected(clash, {"graph input 'fc.weight' has the name of a parameter"});

  Graph unnamed;  // unnamed inputs print as %in0, %in1: they need no names
  unnamed.add_input(kF23);
  unnamed.add_input(kF23);
  EXPECT_NO_THROW(verify(unnamed));
}

TEST(JitVerifier, ConstantsNeedData) {
  Graph g;
  Value* c = g.add_constant(zeros({2}));
  c->set_data(Tensor());
  expect_rejected(g, {"constant %c0 has no data"});
}

TEST(JitVerifier, ReportsTheFirstBrokenNodeInOrder) {
  std::unique_ptr<Graph> g = parse_graph(R"(graph(%x : f32[2, 3]) {
    %a : f32[2, 3] = relu(%x)
    %b : f32[2, 3] = neg(%a)
    %c : i64[2, 3] = exp(%b)
    %d : f32[2, 2] = relu(%c)
    return (%d)
  })");
  expect_rejected(*g, {"node 2 (exp)", "output 0 (%2)", "declared i64[2, 3]"});
}

}  // namespace
}  // namespace kiln::jit
