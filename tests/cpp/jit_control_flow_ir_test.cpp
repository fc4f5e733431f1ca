// Control-flow nodes in the IR: cond, while_loop and scan owning sub-graphs,
// in the text form (print, parse, exact round trip), the verifier (what a
// block must fit), clones, DOT clusters and the walk into sub-graphs.
#include <gtest/gtest.h>

#include <set>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/ir/dot.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

const char* const kCond =
    "graph(%x : f32[4]) {\n"
    "  %c0 : f32[] = number 0\n"
    "  %0 : f32[] = sum(%x) {dims=[], keepdim=false, dtype=None}\n"
    "  %1 : bool[] = gt(%0, %c0)\n"
    "  %2 : f32[4] = cond(%1, %x)\n"
    "    then graph(%x : f32[4]) {\n"
    "      %c0 : f32[] = number 0.5\n"
    "      %0 : f32[4] = mul(%x, %c0)\n"
    "      return (%0)\n"
    "    }\n"
    "    else graph(%x : f32[4]) {\n"
    "      %0 : f32[4] = neg(%x)\n"
    "      return (%0)\n"
    "    }\n"
    "  return (%2)\n"
    "}\n";

const char* const kWhile =
    "graph(%x : f32[3], %n : i64[]) {\n"
    "  %c0 : i64[] = const 0\n"
    "  %0 : f32[3], %1 : i64[] = while_loop(%x, %c0, %n) {num_carried=2, max_iterations=-1}\n"
    "    cond graph(%x : f32[3], %i : i64[], %n : i64[]) {\n"
    "      %0 : bool[] = lt(%i, %n)\n"
    "      return (%0)\n"
    "    }\n"
    "    body graph(%x : f32[3], %i : i64[], %n : i64[]) {\n"
    "      %c0 : i64[] = number 1\n"
    "      %0 : f32[3] = add(%x, %x)\n"
    "      %1 : i64[] = add(%i, %c0)\n"
    "      return (%0, %1)\n"
    "    }\n"
    "  return (%0, %1)\n"
    "}\n";

const char* const kScan =
    "graph(%h : f32[2, 3], %xs : f32[5, 2, 3], %w : f32[3, 3]) {\n"
    "  %0 : f32[2, 3], %1 : f32[5, 2, 3] = scan(%h, %xs, %w) {num_carry=1, num_xs=1, "
    "reverse=false, length=5}\n"
    "    step graph(%h : f32[2, 3], %x : f32[2, 3], %w : f32[3, 3]) {\n"
    "      %0 : f32[2, 3] = matmul(%h, %w)\n"
    "      %1 : f32[2, 3] = add(%0, %x)\n"
    "      %2 : f32[2, 3] = tanh(%1)\n"
    "      return (%2, %2)\n"
    "    }\n"
    "  return (%0, %1)\n"
    "}\n";

void verify_text(const std::string& text) {
  verify(*parse_graph(text));
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(JitControlFlowIr, TextRoundTripsAndVerifies) {
  for (const char* text : {kCond, kWhile, kScan}) {
    std::unique_ptr<Graph> g = parse_graph(text);
    EXPECT_EQ(to_text(*g), text);
    EXPECT_NO_THROW(verify(*g));
  }
}

// The op table's rows (OpTable.EveryOpHasARow) leave control flow to these
// tests: each op with blocks is in the texts above.
TEST(JitControlFlowIr, OpsWithBlocks) {
  std::set<std::string> with_blocks;
  for (const OpDef* def : op_registry().all()) {
    if (!def->blocks.empty()) with_blocks.insert(def->name);
  }
  EXPECT_EQ(with_blocks, (std::set<std::string>{"cond", "scan", "while_loop"}));
}

TEST(JitControlFlowIr, BlocksKnowTheirOwnerAndTheWalkReachesThem) {
  std::unique_ptr<Graph> g = parse_graph(kCond);
  const Node* cond = g->nodes().back();
  ASSERT_EQ(cond->num_blocks(), 2u);
  EXPECT_EQ(cond->block(0).owner(), cond);
  EXPECT_EQ(g->owner(), nullptr);
  std::vector<size_t> sizes;
  for_each_graph(*g, [&](const Graph& graph) { sizes.push_back(graph.num_nodes()); });
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 1, 1}));
}

TEST(JitControlFlowIr, CloneCopiesTheBlocks) {
  std::unique_ptr<Graph> g = parse_graph(kWhile);
  std::unique_ptr<Graph> copy = g->clone();
  EXPECT_EQ(to_text(*copy), kWhile);
  const Node* loop = copy->nodes().back();
  EXPECT_EQ(loop->block(1).owner(), loop);
  EXPECT_NE(&loop->block(1), &g->nodes().back()->block(1));
  EXPECT_NO_THROW(verify(*copy));
}

TEST(JitControlFlowIr, DotDrawsBlocksAsClusters) {
  std::string dot = to_dot(*parse_graph(kCond));
  EXPECT_NE(dot.find("subgraph cluster_n2_b0_ {"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"else\"; style=dashed;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2_b1_out0 -> n2 [style=dashed];"), std::string::npos) << dot;
}

TEST(JitControlFlowIr, VerifierRefusesBranchesOfDifferentTypes) {
  std::string text = replace(kCond, "      %0 : f32[4] = neg(%x)\n      return (%0)",
                             "      %0 : f32[] = sum(%x) {dims=[], keepdim=false, "
                             "dtype=None}\n      return (%0)");
  EXPECT_THROW_WITH(verify_text(text),
                    "cond: result 0 is f32[4] in the then branch but f32[] "
                    "in the else branch");
}

TEST(JitControlFlowIr, VerifierRefusesAPredicateThatIsNotOneBool) {
  std::string text = replace(kCond, "%1 : bool[] = gt(%0, %c0)", "%1 : f32[] = add(%0, %c0)");
  EXPECT_THROW_WITH(verify_text(text), "cond: the predicate must be a one-element bool tensor");
}

TEST(JitControlFlowIr, VerifierRefusesABodyThatChangesACarriedType) {
  std::string text =
      replace(kWhile, "      return (%0, %1)\n    }", "      return (%0, %n)\n    }");
  EXPECT_NO_THROW(verify_text(text));  // i64[] for i64[]: the same type
  text = replace(kWhile, "%0 : f32[3] = add(%x, %x)",
                 "%0 : f32[3] = add(%x, %x)\n      %9 : f32[] = sum(%x) {dims=[], "
                 "keepdim=false, dtype=None}");
  text = replace(text, "return (%0, %1)\n    }", "return (%9, %1)\n    }");
  EXPECT_THROW_WITH(verify_text(text),
                    "while_loop: the body changes carried value 0 from f32[3] to f32[]");
}

TEST(JitControlFlowIr, VerifierRefusesABlockOfTheWrongInputs) {
  std::string text = replace(kScan, "%xs : f32[5, 2, 3], %w", "%xs : f32[5, 3, 3], %w");
  EXPECT_THROW_WITH(verify_text(text),
                    "scan: block 'step' input 1 is f32[2, 3], the node "
                    "gives it f32[3, 3]");
  text = replace(kScan, "length=5", "length=4");
  EXPECT_THROW_WITH(verify_text(text), "its leading dim must be the scan's length 4");
}

TEST(JitControlFlowIr, VerifierNamesTheFaultInsideABlock) {
  std::string text = replace(kCond, "      %0 : f32[4] = neg(%x)", "      %0 : f32[5] = neg(%x)");
  EXPECT_THROW_WITH(verify_text(text), "node 2 (cond) block 'else': node 0 (neg): output 0");
}

TEST(JitControlFlowIr, ParserErrorsNameTheBlock) {
  std::string text = replace(kCond, "    else graph", "    otherwise graph");
  EXPECT_THROW_WITH(parse_graph(text), "expected block 'else' of cond");
}

TEST(JitControlFlowIr, DispatchRefusesControlFlowOps) {
  EXPECT_THROW_WITH(dispatch(op("cond"), {full({}, true, DType::Bool)}, {}),
                    "cond is control flow: call kiln::cond");
}

}  // namespace
}  // namespace kiln::jit
