// Graphviz export: one box per node, distinct shapes for inputs, parameters,
// constants and outputs, one edge per use; `dot` reads it when installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "jit_test_util.h"
#include "kiln/jit/ir/dot.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

size_t count_of(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1))
    ++n;
  return n;
}

TEST(JitDot, OneBoxPerNodeAndOneEdgePerUse) {
  std::unique_ptr<Graph> g = small_mlp();
  const std::string dot = to_dot(*g);
  EXPECT_EQ(dot.rfind("digraph ", 0), 0u) << dot;
  EXPECT_EQ(count_of(dot, "shape=box"), g->num_nodes());
  EXPECT_EQ(count_of(dot, "shape=invhouse"), g->inputs().size());
  EXPECT_EQ(count_of(dot, "shape=cylinder"), g->params().size());
  EXPECT_EQ(count_of(dot, "shape=note"), g->constants().size());
  EXPECT_EQ(count_of(dot, "shape=house"), g->outputs().size());
  size_t uses = g->outputs().size();
  for (const Node* node : g->nodes()) {
    for (const Value* in : node->inputs())
      uses += in != nullptr;
  }
  EXPECT_EQ(count_of(dot, " -> "), uses);

  EXPECT_NE(dot.find("n0 [shape=box, label=\"%0 = linear\\nf32[2, 4]\"]"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("label=\"%5, %6 = max\\nf32[2]\\ni64[2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("p0 [shape=cylinder, label=\"%layers.0.weight\\nf32[4, 8]\"]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("c0 [shape=note, label=\"%c0\\nf64[]\\n0.5\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in0 -> n0 [label=\"0\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n5 -> out1 [label=\"out 1\"];"), std::string::npos) << dot;
}

TEST(JitDot, QuotesInNamesAreEscaped) {
  Graph g;
  Value* x = g.add_input(meta(DType::Float32, {2}), "say \"hi\"");
  g.set_outputs({g.append(op("relu"), {x})->output()});
  EXPECT_NE(to_dot(g).find("label=\"%\\\"say \\\\\\\"hi\\\\\\\"\\\"\\nf32[2]\""), std::string::npos)
      << to_dot(g);
}

TEST(JitDot, GraphvizReadsIt) {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "graphviz's dot is not installed";
  }
  std::string path = testing::TempDir() + "kiln_jit_dot_test.dot";
  std::ofstream(path) << to_dot(*small_mlp());
  EXPECT_EQ(std::system(("dot -Tsvg " + path + " -o /dev/null").c_str()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln::jit
