// The IR-file pass tests: every tests/passes/*.ir file is parsed, run
// through the passes its RUN line names (verifying after each), printed, and
// matched against its CHECK lines (ir_check.h). Also tests of the matcher
// itself, so a broken matcher cannot pass every file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "ir_check.h"
#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/passes/peephole_rules.h"
#include "kiln/jit/passes/pipeline.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

std::vector<std::string> ir_test_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_PASS_TESTS_DIR)) {
    if (entry.path().extension() == ".ir") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The RUN line's pass options; `--report` (a kiln-opt flag, not a pass
// option) sets *report.
PassOptions options_of(const IrTestFile& file, bool* report = nullptr) {
  std::vector<std::string> args;
  for (const std::string& arg : file.args) {
    if (arg == "--report") {
      if (report) *report = true;
      continue;
    }
    args.push_back(arg);
  }
  PassOptions options = pass_options_from_args(args);
  options.dump_after.clear();
  return options;
}

// The file's graph after its RUN line's passes, as text, and with --report
// the report as '#' comments after it, as kiln-opt prints them.
std::string run_ir_test(const IrTestFile& file) {
  bool with_report = false;
  PassOptions options = options_of(file, &with_report);
  options.verify = true;
  std::unique_ptr<Graph> graph = parse_graph(file.text);
  PassReport report = optimize(*graph, options);
  std::string text = to_text(*graph);
  if (!with_report) return text;
  std::istringstream lines(report.to_string());
  for (std::string line; std::getline(lines, line);)
    text += "# " + line + "\n";
  return text;
}

class PassFile : public testing::TestWithParam<std::string> {};

TEST_P(PassFile, OutputMatchesChecks) {
  IrTestFile file = read_ir_test(GetParam());
  std::string output = run_ir_test(file);
  std::string failure = match_checks(output, file.checks);
  EXPECT_EQ(failure, "") << file.path << "\n--- output ---\n" << output;
}

INSTANTIATE_TEST_SUITE_P(Files, PassFile, testing::ValuesIn(ir_test_files()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           std::replace_if(
                               name.begin(), name.end(), [](char c) { return !std::isalnum(c); },
                               '_');
                           return name;
                         });

// Every peephole rule fires in some file, and every registered pass is
// named by some file's RUN line and changes the graph in one of those.
TEST(PassFiles, DirectoryHoldsATestPerRule) {
  std::set<std::string> fired, named, changed;
  for (const std::string& path : ir_test_files()) {
    IrTestFile file = read_ir_test(path);
    PassOptions options = options_of(file);
    std::unique_ptr<Graph> graph = parse_graph(file.text);
    PassReport report = optimize(*graph, options);
    named.insert(options.passes.begin(), options.passes.end());
    for (const PassRecord& pass : report.passes) {
      bool is_named = std::count(options.passes.begin(), options.passes.end(), pass.name) > 0;
      if (is_named && pass.runs_changed > 0) changed.insert(pass.name);
      if (pass.name != "peephole") continue;
      for (const auto& [rule, times] : pass.rules) {
        if (times > 0) fired.insert(rule);
      }
    }
  }
  std::vector<std::string> missing;
  for (const PeepholeRule& rule : peephole_rules()) {
    std::string what = str("peephole rule ", rule.name, " fires in no file");
    if (!fired.contains(rule.name) && std::count(missing.begin(), missing.end(), what) == 0)
      missing.push_back(what);
  }
  for (const PassInfo& pass : pass_registry().all()) {
    if (!named.contains(pass.name)) missing.push_back(str("pass ", pass.name, ": no RUN line"));
    if (!changed.contains(pass.name)) {
      missing.push_back(str("pass ", pass.name, " changes no graph of a file naming it"));
    }
  }
  EXPECT_EQ(missing, std::vector<std::string>{});
}

// ---- the files' graphs compute the same before and after their passes

// Values that tell rewrites apart: signed zeros, NaN, infinities; small
// integers (valid indices into small tables).
Tensor telling_values(const TensorMeta& type, size_t salt) {
  static const double kFloats[] = {-0.0,  0.0, NAN, INFINITY, -INFINITY, 1.5,
                                   -2.25, 3.0, 0.5, -1.0,     7.0};
  IntList shape = to_static(type.shape);
  std::vector<double> values(size_t(numel_of(shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    size_t k = i + salt;
    values[i] = is_floating(type.dtype)     ? kFloats[k % std::size(kFloats)]
                : type.dtype == DType::Bool ? double(k % 2)
                                            : double(k % 4);
  }
  return tensor_from_data(values.data(), DType::Float64, shape, TensorOptions(type.dtype));
}

// Fresh weights for every parameter (a graph may write them in place).
void bind_params(Graph& g) {
  for (size_t i = 0; i < g.params().size(); ++i)
    g.params()[i]->set_data(telling_values(g.params()[i]->type(), 3 + i));
}

struct Outcome {
  std::vector<Tensor> results;
  std::string error;
};

Outcome run_graph(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& inputs) {
  try {
    bind_params(*g);
    manual_seed(11);
    return {Executable(g).run(inputs), ""};
  } catch (const Error& e) {
    return {{}, e.what()};
  }
}

// "" when the file's graph gives the same bits before and after its passes.
std::string compare_before_after(const IrTestFile& file) {
  // Parsed twice rather than cloned: a graph may write its constants in place.
  std::shared_ptr<Graph> before = parse_graph(file.text);
  std::shared_ptr<Graph> after = parse_graph(file.text);
  optimize(*after, options_of(file));
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < before->inputs().size(); ++i)
    inputs.push_back(telling_values(before->inputs()[i]->type(), i));
  Outcome want = run_graph(before, inputs), got = run_graph(after, inputs);
  if (!want.error.empty() || !got.error.empty()) {
    return want.error.empty() == got.error.empty() ? "" : "one failed: " + want.error + got.error;
  }
  for (size_t i = 0; i < want.results.size(); ++i) {
    if (!bitwise_equal(got.results.at(i), want.results[i])) return str("output ", i, " differs");
  }
  return "";
}

TEST(PassFiles, RewritesKeepResultsBitForBit) {
  for (const std::string& path : ir_test_files()) {
    IrTestFile file = read_ir_test(path);
    if (std::count(file.args.begin(), file.args.end(), "--fast-math")) continue;
    EXPECT_EQ(compare_before_after(file), "") << path;
  }
}

// The comparison above sees a signed zero: the fast-math rule x + 0 -> x
// gives -0.0 where eager gives +0.0.
TEST(PassFiles, ComparisonSeesTheFastMathSignedZero) {
  IrTestFile file =
      read_ir_test(std::string(KILN_PASS_TESTS_DIR) + "/peephole_add_positive_zero_fast_math.ir");
  EXPECT_EQ(compare_before_after(file), "output 0 differs");
}

// ---- the matcher

std::vector<CheckLine> checks_of(const std::string& text) {
  return parse_ir_test("# RUN: kiln-opt\n" + text).checks;
}

const std::string kOutput =
    "graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%x)\n"
    "  %1 : f32[2] = neg(%0)\n  return (%1)\n}\n";

TEST(IrCheck, ChecksMatchInOrder) {
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: relu\n# CHECK: neg\n# CHECK: return")), "");
  std::string failure = match_checks(kOutput, checks_of("# CHECK: neg\n# CHECK: relu"));
  EXPECT_NE(failure.find("CHECK 'relu' (line 3) not found"), std::string::npos) << failure;
}

TEST(IrCheck, ACheckNeverMatchesTheSameLineTwice) {
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK: relu\n# CHECK: relu")), "");
}

TEST(IrCheck, CheckNotCoversTheStretchBetweenMatches) {
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: relu\n# CHECK-NOT: relu\n# CHECK: neg")), "");
  std::string failure =
      match_checks(kOutput, checks_of("# CHECK: graph\n# CHECK-NOT: relu\n# CHECK: neg"));
  EXPECT_NE(failure.find("CHECK-NOT 'relu' (line 3) matched output line 2"), std::string::npos)
      << failure;
  // Last: up to the end; first: from the start.
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK: relu\n# CHECK-NOT: return")), "");
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK-NOT: graph")), "");
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK-NOT: mul")), "");
}

TEST(IrCheck, CheckNextMatchesOnlyTheNextLine) {
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: relu\n# CHECK-NEXT: neg")), "");
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK: graph\n# CHECK-NEXT: neg")), "");
}

// ---- the matcher's patterns: [[NAME:regex]], [[NAME]], {{regex}}

TEST(IrCheck, ACapturedNameMatchesOnlyWhatItCaptured) {
  // relu's result is %0, returned is %1: a use of R matches %0 only.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu(%x)\n"
                                            "# CHECK: neg([[R]])")),
            "");
  std::string failure = match_checks(
      kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu(%x)\n# CHECK: return ([[R]])"));
  EXPECT_NE(failure.find("CHECK 'return ([[R]])' (line 3, with R = '%0') not found"),
            std::string::npos)
      << failure;
  // The capture is what the regex matched, no more.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu(%x)\n"
                                            "# CHECK: [[N:%[0-9]+]] : f32[2] = neg([[R]])\n"
                                            "# CHECK: return ([[N]])")),
            "");
  // A name captured again holds the new text from there on.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu(%x)\n"
                                            "# CHECK: [[R:%[0-9]+]] : f32[2] = neg(\n"
                                            "# CHECK: return ([[R]])")),
            "");
}

TEST(IrCheck, ANameUsedOnItsOwnLineMatchesTheSameText) {
  const std::vector<CheckLine> checks = checks_of(
      "# CHECK: [[S:%[0-9]+]] : f32[2] = add([[A:%[0-9]+]], [[A]])\n"
      "# CHECK-NEXT: return ([[S]])");
  // Not the first add, whose inputs differ: the second.
  EXPECT_EQ(match_checks("  %2 : f32[2] = add(%0, %1)\n  %3 : f32[2] = add(%0, %0)\n"
                         "  return (%3)\n",
                         checks),
            "");
  EXPECT_NE(match_checks("  %2 : f32[2] = add(%0, %1)\n  return (%2)\n", checks), "");
}

TEST(IrCheck, RegexMatchesWithoutCapturing) {
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: {{%[0-9]+}} : f32[2] = relu(%x)")), "");
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK: {{%[a-z]+}} : f32[2] = relu(%x)")), "");
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: = {{relu|tanh}}(\n# CHECK: neg")), "");
  // A brace count and a bracket expression holding "]]" or "}}" end right.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: {{[a-z]{3}}}(%x)\n# CHECK: [[N:[%]]]1 :")),
            "");
}

TEST(IrCheck, TheRestOfALineIsLiteral) {
  // As regexes, "(%1)" would match "%1" and "[2]" the digit 2.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: return (%1)")), "");
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: f32[2] = relu(%x)")), "");
  EXPECT_NE(match_checks(kOutput, checks_of("# CHECK: return %1")), "");
  EXPECT_NE(match_checks("  f322 = relu.x\n", checks_of("# CHECK: f32[2] = relu(%x)")), "");
}

TEST(IrCheck, CheckNotUsesACapturedName) {
  // R = %0 is read by neg, never by relu.
  EXPECT_EQ(match_checks(kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu\n"
                                            "# CHECK-NOT: relu([[R]])\n# CHECK: return")),
            "");
  std::string failure = match_checks(kOutput, checks_of("# CHECK: [[R:%[0-9]+]] : f32[2] = relu\n"
                                                        "# CHECK-NOT: neg([[R]])\n"
                                                        "# CHECK: return"));
  EXPECT_NE(failure.find("CHECK-NOT 'neg([[R]])' (line 3, with R = '%0') matched output line 3"),
            std::string::npos)
      << failure;
}

TEST(IrCheck, PatternErrorsNameTheFileLine) {
  auto error = [](const std::string& checks) {
    return error_text([&] { parse_ir_test("# RUN: kiln-opt\n" + checks, "t.ir"); });
  };
  EXPECT_EQ(error("# CHECK: relu\n# CHECK: return ([[R]])\n"),
            "t.ir:3: '[[R]]' uses a name no earlier CHECK line defines");
  // Defined on a later line is not defined yet.
  EXPECT_EQ(error("# CHECK: [[R]]\n# CHECK: [[R:%0]]\n"),
            "t.ir:2: '[[R]]' uses a name no earlier CHECK line defines");
  EXPECT_EQ(error("# CHECK: x\n# CHECK-NOT: [[R:%[0-9]+]]\n"),
            "t.ir:3: a CHECK-NOT cannot define a name ('[[R:%[0-9]+]]'): it matches no line to "
            "capture from");
  EXPECT_EQ(error("# CHECK: return ([[R:%[0-9]+)\n"),
            "t.ir:2: '[[' without a closing ']]' in '[[R:%[0-9]+)'");
  EXPECT_EQ(error("# CHECK: {{%0\n"), "t.ir:2: '{{' without a closing '}}' in '{{%0'");
  EXPECT_EQ(error("# CHECK: [[1x:%0]]\n"),
            "t.ir:2: bad name '1x' in '[[1x:%0]]' (letters, digits and '_', not starting with a "
            "digit)");
  EXPECT_EQ(error("# CHECK: {{}}\n"), "t.ir:2: empty regex in '{{}}'");
  std::string bad = error("# CHECK: x {{(%0}}\n");
  EXPECT_TRUE(bad.starts_with("t.ir:2: bad regex '(%0' in '{{(%0}}': ")) << bad;
}

TEST(IrCheck, FileNeedsOneRunLineAndAChecks) {
  EXPECT_TRUE(mentions(error_of([] { parse_ir_test("# CHECK: x\n"); }), "no '# RUN:' line"));
  EXPECT_TRUE(mentions(error_of([] { parse_ir_test("# RUN: kiln-opt\n"); }), "no CHECK line"));
  EXPECT_TRUE(mentions(error_of([] { parse_ir_test("# RUN: a\n# RUN: b\n# CHECK: x\n"); }),
                       "a second RUN line"));
  EXPECT_TRUE(mentions(error_of([] { parse_ir_test("# RUN: a\n# CHECK-NOTE: x\n# CHECK: y\n"); }),
                       "unknown directive 'CHECK-NOTE'"));
  IrTestFile file = parse_ir_test("# RUN: kiln-opt --passes=dce --frozen\n# CHECK: x\n");
  EXPECT_EQ(file.args, (std::vector<std::string>{"--passes=dce", "--frozen"}));
}

}  // namespace
}  // namespace kiln::jit
