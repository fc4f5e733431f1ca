// The pass pipeline: registration, options, verification after each pass,
// KILN_DUMP_IR, the report; constant folding of traced code and of frozen
// parameters; and numerics: with the passes that cannot change rounding,
// optimized graphs give eager's results bit for bit (W1, LeNet, every row
// of the op test table, folded and not).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/nn/container.h"
#include "kiln/nn/layers.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

PassOptions checked(PassOptions options = {}) {
  options.verify = true;
  options.dump_after.clear();
  return options;
}

size_t count_nodes(const Graph& g, const std::string& op_name) {
  size_t n = 0;
  for (const Node* node : g.nodes())
    n += node->op().name == op_name;
  return n;
}

std::shared_ptr<Graph> optimized_copy(const Graph& g, const PassOptions& options = checked()) {
  std::shared_ptr<Graph> copy = g.clone();
  optimize(*copy, options);
  return copy;
}

// ---------------------------------------------------------------- pipeline

TEST(PassPipeline, DefaultPipelineHoldsOnlyPassesThatKeepRounding) {
  std::vector<std::string> names = default_pipeline();
  EXPECT_EQ(names, (std::vector<std::string>{"constant_fold", "peephole", "cse",
                                             "simplify_control_flow", "dce", "fuse_activations",
                                             "fuse_linear_gelu", "fuse_elementwise"}));
  for (const std::string& name : names)
    EXPECT_FALSE(pass_registry().get(name).may_change_rounding) << name;
  EXPECT_EQ(default_pipeline(/*fast_math=*/true),
            (std::vector<std::string>{"constant_fold", "peephole", "cse", "simplify_control_flow",
                                      "dce", "fold_batch_norm", "fuse_attention",
                                      "fuse_conv_epilogue", "carry_conv_layout", "fuse_activations",
                                      "fuse_linear_gelu", "fuse_elementwise"}));
  // Inference: frozen graphs also fold batch_norm, fuse conv epilogues and
  // chain convolutions channels-last, unless exact.
  const std::vector<std::string> inference = default_pipeline(PassOptions{.frozen = true});
  EXPECT_NE(std::find(inference.begin(), inference.end(), "fold_batch_norm"), inference.end());
  EXPECT_NE(std::find(inference.begin(), inference.end(), "fuse_conv_epilogue"), inference.end());
  EXPECT_NE(std::find(inference.begin(), inference.end(), "carry_conv_layout"), inference.end());
  EXPECT_EQ(default_pipeline(PassOptions{.frozen = true, .exact = true}), names);
}

// The list names every registered pass once, but unroll_loops (which
// runs when a plan is lowered, on its own copy: compiled.h), and marks
// fast-math only exactly the passes that may change rounding.
TEST(PassPipeline, DefaultPipelineNamesEveryRegisteredPassOnce) {
  std::vector<std::string> registered, listed;
  for (const PassInfo& info : pass_registry().all()) {
    if (info.name != "unroll_loops") registered.push_back(info.name);
  }
  for (const PipelineStep& step : default_pipeline_steps()) {
    listed.push_back(step.pass);
    const PassInfo* info = pass_registry().find(step.pass);
    ASSERT_NE(info, nullptr) << step.pass;
    EXPECT_EQ(step.fast_math_only, info->may_change_rounding) << step.pass;
  }
  std::sort(registered.begin(), registered.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, registered);
}

TEST(PassPipeline, UnknownPassNamesTheKnownOnes) {
  Graph g;
  Error e = error_of([&] { optimize(g, checked({.passes = {"constant_fold", "nope"}})); });
  EXPECT_TRUE(mentions(e, "unknown pass 'nope'")) << e.what();
  EXPECT_TRUE(mentions(e, "constant_fold, peephole, cse, dce")) << e.what();
}

TEST(PassPipeline, RegistryRefusesIncompleteAndRepeatedPasses) {
  PassRegistry registry;
  registry.add({.name = "mine", .run = dce});
  EXPECT_TRUE(mentions(error_of([&] { registry.add({.name = "mine", .run = cse}); }),
                       "pass 'mine' is already registered"));
  EXPECT_TRUE(mentions(error_of([&] { registry.add({.name = "nothing"}); }), "needs a name"));
  EXPECT_EQ(registry.find("nothing"), nullptr);
  EXPECT_EQ(registry.get("mine").run, &dce);
}

TEST(PassPipeline, OptionsFromArguments) {
  PassOptions o = pass_options_from_args({"--passes=dce,cse", "--frozen", "--max-rounds=3"});
  EXPECT_EQ(o.passes, (std::vector<std::string>{"dce", "cse"}));
  EXPECT_TRUE(o.frozen);
  EXPECT_FALSE(o.fast_math);
  EXPECT_EQ(o.max_rounds, 3);
  EXPECT_TRUE(pass_options_from_args({"--fast-math"}).fast_math);
  EXPECT_FALSE(o.exact);
  EXPECT_TRUE(pass_options_from_args({"--frozen", "--exact"}).exact);
  EXPECT_TRUE(mentions(error_of([] { pass_options_from_args({"--fold"}); }),
                       "unknown pass option '--fold'"));
  EXPECT_TRUE(mentions(error_of([] { pass_options_from_args({"--passes=dce,fold"}); }),
                       "unknown pass 'fold'"));
  EXPECT_TRUE(mentions(error_of([] { pass_options_from_args({"--max-rounds=0"}); }),
                       "--max-rounds= takes a number"));
}

// A pass that breaks the graph: sum's attributes changed without its output type.
bool break_sum(Graph& g, PassContext&) {
  for (Node* node : g.nodes()) {
    if (node->op().name == "sum") node->set_attrs({{"dims", IntList{0}}});
  }
  return true;
}

TEST(PassPipeline, VerifierRunsAfterEachPassAndNamesIt) {
  auto g = parse_graph("graph(%x : f32[2, 3]) {\n %s = sum(%x) {dims=[1]}\n return (%s)\n}");
  PassInfo breaker{.name = "breaker", .run = break_sum};
  std::vector<const PassInfo*> passes = {&pass_registry().get("dce"), &breaker};
  Error e = error_of([&] { run_passes(*g, passes, checked()); });
  EXPECT_TRUE(mentions(e, "the graph is invalid after pass 'breaker'")) << e.what();
  PassOptions unchecked = checked();
  unchecked.verify = false;
  unchecked.max_rounds = 1;
  run_passes(*g, passes, unchecked);  // nobody looks
}

TEST(PassPipeline, VerificationDefaultFollowsTheEnvironment) {
  setenv("KILN_VERIFY_PASSES", "1", 1);
  EXPECT_TRUE(PassOptions().verify);
  setenv("KILN_VERIFY_PASSES", "0", 1);
  EXPECT_FALSE(PassOptions().verify);
  unsetenv("KILN_VERIFY_PASSES");
#ifdef NDEBUG
  EXPECT_FALSE(PassOptions().verify);
#else
  EXPECT_TRUE(PassOptions().verify);
#endif
}

const char* kFancy = R"(graph() {
  %a : f32[1] = const [1]
  %b : f32[1] = const [2]
  %c : f32[1] = const [3]
  %d : f32[1] = const [4]
  %e = add(%a, %b)
  %f = add(%c, %d)
  %y = add(%e, %f)
  return (%y)
})";

TEST(PassPipeline, DumpIrPrintsTheGraphAfterTheNamedPass) {
  setenv("KILN_DUMP_IR", "dce,cse", 1);
  EXPECT_EQ(PassOptions().dump_after, (std::vector<std::string>{"dce", "cse"}));
  unsetenv("KILN_DUMP_IR");
  EXPECT_TRUE(PassOptions().dump_after.empty());

  auto g = parse_graph(kFancy);
  std::ostringstream dumped;
  PassOptions options = checked();
  options.dump_after = {"dce"};
  options.dump_stream = &dumped;
  optimize(*g, options);
  EXPECT_NE(dumped.str().find("# IR after dce (round 1)\ngraph() {\n  %c0 : f32[1] = const [10]\n"),
            std::string::npos)
      << dumped.str();
  EXPECT_EQ(dumped.str().find("after constant_fold"), std::string::npos) << dumped.str();
  // What is dumped parses back (the header is a comment).
  EXPECT_EQ(to_text(*parse_graph(dumped.str().substr(0, dumped.str().find("}") + 1))), to_text(*g));
}

TEST(PassPipeline, ReportCountsNodesRulesAndRounds) {
  auto g = parse_graph(kFancy);
  PassReport report = optimize(*g, checked());
  EXPECT_EQ(report.nodes_before, 3u);
  EXPECT_EQ(report.nodes_after, 0u);
  EXPECT_TRUE(report.reached_fixed_point);
  EXPECT_EQ(report.rounds, 2);  // the second round finds nothing left to do
  const PassRecord* fold = report.find("constant_fold");
  ASSERT_NE(fold, nullptr);
  EXPECT_EQ(fold->nodes_before, 3u);
  EXPECT_EQ(fold->nodes_after, 0u);
  EXPECT_EQ(fold->runs, 2);
  EXPECT_EQ(fold->runs_changed, 1);
  EXPECT_EQ(report.count("fold add"), 3);
  EXPECT_EQ(report.count("merge constant"), 1);          // 1 + 2 is the constant 3 of the input
  EXPECT_EQ(report.count("remove unused constant"), 5);  // the other inputs, the partial sums
  std::string text = report.to_string();
  EXPECT_NE(text.find("constant_fold"), std::string::npos) << text;
  EXPECT_NE(text.find("fold add"), std::string::npos) << text;
  EXPECT_NE(text.find(" x3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("total: 3 -> 0 nodes, 2 rounds (fixed point)"), std::string::npos) << text;
}

TEST(PassPipeline, RoundLimitStopsBeforeTheFixedPoint) {
  auto g = parse_graph(kFancy);
  PassOptions options = checked({.passes = {"constant_fold"}});
  options.max_rounds = 1;
  PassReport report = optimize(*g, options);
  EXPECT_EQ(report.rounds, 1);
  EXPECT_FALSE(report.reached_fixed_point);
  EXPECT_NE(report.to_string().find("stopped at the round limit"), std::string::npos);
}

TEST(PassPipeline, NotesSayWhatWasLeftAndWhy) {
  auto g = parse_graph(R"(graph(%x : f32[100000]) {
    %c : f32[1] = const [2]
    %e = expand(%c) {size=[100000]}
    %y = mul(%x, %e)
    return (%y)
  })");
  PassReport report = optimize(*g, checked());
  const PassRecord* fold = report.find("constant_fold");
  ASSERT_NE(fold, nullptr);
  ASSERT_EQ(fold->notes.size(), 1u);  // once, though two rounds ran
  EXPECT_NE(fold->notes[0].find("expand left unfolded: its result is larger than 65536 bytes"),
            std::string::npos)
      << fold->notes[0];
}

}  // namespace
}  // namespace kiln::jit
