// Symbolic sizes in the graph IR (issue 21): the text form prints and parses
// dims and int attributes that are size expressions, the verifier compares
// declared and inferred types by their canonical form, DOT shows them, and
// the components that need concrete sizes (rebatch, the executor) refuse a
// symbolic graph with an error naming themselves.
#include <gtest/gtest.h>

#include "kiln/core/dim.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/dot.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/rebatch.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

constexpr PrintOptions kFull{.full = true};

const Dim kBatch = Dim::symbol("batch");
const Dim kSeq = Dim::symbol("seq");
const Dim kH = Dim::symbol("h");

TensorMeta f32(DimList shape) {
  return TensorMeta{DType::Float32, std::move(shape)};
}

// print(parse(text)) == text for text the printer wrote.
void expect_round_trip(const Graph& g) {
  const std::string text = to_text(g, kFull);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << text;
  }
  EXPECT_EQ(to_text(*parsed, kFull), text);
}

// ---------------------------------------------------------------- text form

// Types and attributes given rather than inferred: the text form alone,
// whatever the op table infers.
TEST(JitSymbolicIr, PrintsAndParsesSizeExpressions) {
  Graph g;
  Value* x = g.add_input(f32({kBatch, 512}), "x");
  Value* img = g.add_input(f32({kBatch, 3, kH, kH}), "img");
  g.add_param("w", f32({8, 3, 3, 3}), zeros({8, 3, 3, 3}));
  const Dim out_h = floordiv(kH - 3, 2) + 1;
  Node* cat = g.append_typed(op("cat"), {x, x}, {{"dim", int64_t(0)}}, {f32({2 * kBatch, 512})});
  Node* conv = g.append_typed(op("conv2d"), {img, g.params()[0], nullptr},
                              {{"stride", IntList{2, 2}}}, {f32({kBatch, 8, out_h, out_h})});
  Node* view = g.append_typed(op("reshape"), {x}, {{"shape", DimList{kBatch, 8, -1}}},
                              {f32({kBatch, 8, 64})});
  Node* slice =
      g.append_typed(op("slice"), {x}, {{"dim", int64_t(0)}, {"end", floordiv(kBatch, 2)}},
                     {f32({floordiv(kBatch, 2), 512})});
  g.set_outputs({cat->output(), conv->output(), view->output(), slice->output()});

  const std::string text = to_text(g, kFull);
  EXPECT_NE(text.find("graph(%x : f32[batch, 512], %img : f32[batch, 3, h, h])"), std::string::npos)
      << text;
  EXPECT_NE(text.find("%0 : f32[2*batch, 512] = cat(%x, %x) {dim=0}"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 : f32[batch, 8, (h - 3) // 2 + 1, (h - 3) // 2 + 1] = conv2d("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{shape=[batch, 8, -1]}"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[batch // 2, 512] = slice(%x) {dim=0, start=None, end=batch // 2"),
            std::string::npos)
      << text;
  expect_round_trip(g);

  std::unique_ptr<Graph> parsed = parse_graph(text);
  EXPECT_TRUE(same_dims(parsed->nodes()[1]->output()->shape(), {kBatch, 8, out_h, out_h}));
  const Attrs& attrs = parsed->nodes()[3]->attrs();
  ASSERT_TRUE(std::holds_alternative<Dim>(attrs.get("end")));
  EXPECT_TRUE(attrs.get_dim("end").same_as(floordiv(kBatch, 2)));
  // Static attributes stay plain integers after a round trip.
  EXPECT_TRUE(std::holds_alternative<int64_t>(attrs.get("dim")));
  ASSERT_TRUE(std::holds_alternative<DimList>(parsed->nodes()[2]->attrs().get("shape")));
}

// Hand-written text may spell a size any way parse_size_expr reads; it prints
// in canonical form.
TEST(JitSymbolicIr, ParsesAnySpellingAndPrintsCanonically) {
  std::unique_ptr<Graph> g = parse_graph(
      "graph(%x : f32[seq * batch, max(h, 4), h % 4, -batch + 2*batch, h-3, (2)]) {\n"
      "  return (%x)\n"
      "}\n");
  EXPECT_TRUE(same_dims(g->inputs()[0]->shape(),
                        {kBatch * kSeq, max(kH, 4), mod(kH, 4), kBatch, kH - 3, 2}));
  EXPECT_EQ(to_text(*g),
            "graph(%x : f32[batch*seq, max(h, 4), h % 4, batch, h - 3, 2]) {\n"
            "  return (%x)\n"
            "}\n");
  expect_round_trip(*g);
}

TEST(JitSymbolicIr, ModuloIsNotAValueName) {
  // `% 4` is the operator, `%4` a value name as before.
  std::unique_ptr<Graph> g = parse_graph(
      "graph(%x : f32[seq % 4], %4 : f32[2]) {\n"
      "  return (%4)\n"
      "}\n");
  EXPECT_TRUE(same_dims(g->inputs()[0]->shape(), {mod(kSeq, 4)}));
  EXPECT_EQ(g->outputs()[0], g->inputs()[1]);
}

struct BadSize {
  std::string text;
  std::string position;  // line:column
  std::string message;
};

TEST(JitSymbolicIr, BadSizeExpressionsNameTheirPosition) {
  const std::vector<BadSize> cases = {
      {"graph(%x : f32[batch, h - ]) {", "1:26", "expected a size but found end of input"},
      {"graph(%x : f32[2 ** seq]) {", "1:18", "'**' is not supported"},
      {"graph(%x : f32[8,\n  batch / 2]) {", "2:9", "sizes use floor division '//'"},
      {"graph(%x : f32[seq // batch]) {", "1:23", "divisor of '//' must be a positive integer"},
      {"graph(%x : f32[(seq]) {", "1:20", "expected ')'"},
      {"graph(%x : f32[max(seq)]) {", "1:16", "'max' needs at least two arguments"},
      {"graph(%x : f32[batch = 2]) {", "1:22", "expected ']' to close the shape, got '='"},
      {"graph(%x : f32[true]) {", "1:16", "expected an integer or a size expression"},
      {"graph(%x : f32[batch, 2 - 3]) {", "1:23", "cannot be negative"},
      {"graph(%x : f32[batch]) {\n  %c : f32[batch] = const [1]\n", "2:21",
       "its shape cannot be symbolic"},
      {"graph(%x : f32[8]) {\n  %0 : f32[4] = slice(%x) {dim=0, end=x / 2}\n", "2:41",
       "bad size expression for attribute 'end' of slice"},
      {"graph(%x : f32[8]) {\n  %0 : f32[8] = reshape(%x) {shape=[batch, *]}\n", "2:44",
       "expected a size"},
  };
  for (const BadSize& c : cases) {
    Error e = error_of([&] { parse_graph(c.text); });
    EXPECT_TRUE(mentions(e, "IR text " + c.position + ": ")) << c.text << "\n-> " << e.what();
    EXPECT_TRUE(mentions(e, c.message)) << c.text << "\n-> " << e.what();
  }
}

TEST(JitSymbolicIr, DotShowsSymbolicTypes) {
  Graph g;
  Value* x = g.add_input(f32({kBatch, 2 * kSeq}), "x");
  Node* relu = g.append_typed(op("relu"), {x}, {}, {f32({kBatch, 2 * kSeq})});
  g.set_outputs({relu->output()});
  const std::string dot = to_dot(g);
  EXPECT_NE(dot.find("%x\\nf32[batch, 2*seq]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("%0 = relu\\nf32[batch, 2*seq]"), std::string::npos) << dot;
}

// ---------------------------------------------------------------- verifier

TEST(JitSymbolicIr, VerifierComparesCanonicalForms) {
  // batch + batch is 2*batch: the declared type matches inference.
  std::unique_ptr<Graph> g = parse_graph(
      "graph(%x : f32[batch, 512]) {\n"
      "  %0 : f32[batch + batch, 512] = cat(%x, %x) {dim=0}\n"
      "  %1 : f32[batch, 512] = relu(%x)\n"
      "  return (%0, %1)\n"
      "}\n");
  EXPECT_NO_THROW(verify(*g));
}

TEST(JitSymbolicIr, VerifierCatchesADeclaredSymbolicTypeThatDiffers) {
  std::unique_ptr<Graph> g = parse_graph(
      "graph(%x : f32[batch, 512]) {\n"
      "  %0 : f32[seq, 512] = relu(%x)\n"
      "  return (%0)\n"
      "}\n");
  Error e = error_of([&] { verify(*g); });
  EXPECT_TRUE(mentions(e,
                       "node 0 (relu): output 0 (%0) is declared f32[seq, 512] but relu "
                       "infers f32[batch, 512]"))
      << e.what();

  std::unique_ptr<Graph> doubled = parse_graph(
      "graph(%x : f32[batch, 512]) {\n"
      "  %0 : f32[batch + 1, 512] = cat(%x, %x) {dim=0}\n"
      "  return (%0)\n"
      "}\n");
  e = error_of([&] { verify(*doubled); });
  EXPECT_TRUE(mentions(e, "is declared f32[batch + 1, 512] but cat infers f32[2*batch, 512]"))
      << e.what();
}

// A graph built with inference round-trips and verifies, attributes included.
// Slicing decides `batch // 2 < 0` from an example value, as a trace would.
TEST(JitSymbolicIr, InferredGraphRoundTripsAndVerifies) {
  ShapeEnv env;
  env.set_hint("batch", 8);
  ShapeEnvScope scope(&env);
  Graph g;
  Value* x = g.add_input(f32({kBatch, 512}), "x");
  Node* cat = g.append(op("cat"), {x, x}, {{"dim", int64_t(0)}});
  Node* heads = g.append(op("reshape"), {cat->output()}, {{"shape", DimList{kBatch, -1, 64}}});
  Node* half = g.append(op("slice"), {x}, {{"dim", int64_t(0)}, {"end", floordiv(kBatch, 2)}});
  g.set_outputs({heads->output(), half->output()});
  EXPECT_TRUE(same_dims(heads->output()->shape(), {kBatch, 16, 64}));
  EXPECT_TRUE(same_dims(half->output()->shape(), {floordiv(kBatch, 2), 512}));
  verify(g);
  expect_round_trip(g);
  std::unique_ptr<Graph> parsed = parse_graph(to_text(g, kFull));
  EXPECT_NO_THROW(verify(*parsed));
}

// ---------------------------------------------------------------- components

std::unique_ptr<Graph> symbolic_relu() {
  return parse_graph(
      "graph(%x : f32[batch, 4]) {\n"
      "  %0 : f32[batch, 4] = relu(%x)\n"
      "  return (%0)\n"
      "}\n");
}

TEST(JitSymbolicIr, RebatchRefusesSymbolicSizes) {
  std::unique_ptr<Graph> g = symbolic_relu();
  EXPECT_THROW_WITH(rebatch(*g, 8), "rebatch: needs a concrete size for dim 0 of [batch, 4]");
}

TEST(JitSymbolicIr, ExecutorRefusesSymbolicSizes) {
  std::shared_ptr<const Graph> g = symbolic_relu();
  EXPECT_THROW_WITH(Executable{g}, "lower: %0: needs a concrete size for dim 0 of [batch, 4]");
}

TEST(JitSymbolicIr, ConstantFoldLeavesSizeDependentResults) {
  // expand of a constant to [batch, 4] depends on batch: it is no constant.
  std::unique_ptr<Graph> g = parse_graph(
      "graph(%x : f32[batch, 4]) {\n"
      "  %c0 : f32[4] = const [1, 2, 3, 4]\n"
      "  %0 : f32[batch, 4] = expand(%c0) {size=[batch, 4]}\n"
      "  %1 : f32[batch, 4] = add(%x, %0)\n"
      "  return (%1)\n"
      "}\n");
  PassOptions options{.passes = {"constant_fold"}};
  options.verify = true;
  options.dump_after.clear();
  optimize(*g, options);
  EXPECT_EQ(g->num_nodes(), 2u) << to_text(*g);
}

}  // namespace
}  // namespace kiln::jit
