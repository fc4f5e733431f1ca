// The IR text form: the printer's format, exact round trips through the
// parser (every op of the op table, every dtype and attribute kind), and the
// parser's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/collective_ops.h"
#include "kiln/ops/custom_function_ops.h"
#include "kiln/ops/registry.h"
#include "op_refs.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

constexpr PrintOptions kFull{.full = true};

// Equal element for element, bit for bit but for NaN payloads (NaN signs
// must match too).
bool same_data(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (!is_floating(a.dtype())) return a.to_vector<int64_t>() == b.to_vector<int64_t>();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
    if (std::signbit(x[i]) != std::signbit(y[i]) || (!both_nan && x[i] != y[i])) return false;
  }
  return true;
}

// print(parse(print(g))) == print(g), the constants read back exactly, and
// the parsed graph verifies.
void expect_round_trip(const Graph& g, const std::string& where = "") {
  const std::string text = to_text(g, kFull);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    FAIL() << where << ": " << e.what() << "\n" << text;
  }
  EXPECT_EQ(to_text(*parsed, kFull), text) << where;
  ASSERT_EQ(parsed->constants().size(), g.constants().size()) << where;
  for (size_t k = 0; k < g.constants().size(); ++k) {
    EXPECT_TRUE(same_data(parsed->constants()[k]->data(), g.constants()[k]->data()))
        << where << ": constant %c" << k;
  }
  EXPECT_NO_THROW(verify(*parsed)) << where << "\n" << text;
}

TEST(JitText, PrintsTheMlp) {
  std::unique_ptr<Graph> g = small_mlp();
  EXPECT_EQ(to_text(*g),
            "graph(%x : f32[2, 8]) {\n"
            "  %layers.0.weight : f32[4, 8] = param\n"
            "  %layers.0.bias : f32[4] = param\n"
            "  %layers.2.weight : f32[3, 4] = param\n"
            "  %c0 : f64[] = number 0.5\n"
            "  %0 : f32[2, 4] = linear(%x, %layers.0.weight, %layers.0.bias)\n"
            "  %1 : f32[2, 4] = relu(%0)\n"
            "  %2 : f32[] = cast(%c0) {dtype=f32}\n"
            "  %3 : f32[2, 4] = mul(%1, %2)\n"
            "  %4 : f32[2, 3] = linear(%3, %layers.2.weight, none)\n"
            "  %5 : f32[2], %6 : i64[2] = max(%4) {dim=1, keepdim=false}\n"
            "  return (%5, %6)\n"
            "}\n");
  std::ostringstream os;
  os << *g;
  EXPECT_EQ(os.str(), to_text(*g));
  expect_round_trip(*g);
}

TEST(JitText, EveryOpTableRowRoundTrips) {
  std::set<std::string> covered;
  for (const nlohmann::json& row : op_refs()["cases"]) {
    if (row.contains("error")) continue;
    const std::string id = row["id"];
    for (bool as_constants : {false, true}) {
      std::unique_ptr<Graph> g;
      try {
        g = graph_of_row(row, as_constants);
      } catch (const Error& e) {
        ADD_FAILURE() << id << ": " << e.what();
        continue;
      }
      EXPECT_NO_THROW(verify(*g)) << id;
      expect_round_trip(*g, id);
    }
    covered.insert(row["op"].get<std::string>());
  }
  for (const OpDef* def : op_registry().all()) {
    if (!def->blocks.empty()) continue;             // JitControlFlowIr.TextRoundTripsAndVerifies
    if (runs_registered_callbacks(*def)) continue;  // its id names a run-time Function
    if (is_collective(*def)) continue;              // CollectiveOps.TextRoundTripsAndVerifies
    EXPECT_TRUE(covered.count(def->name)) << def->name << " was not round-tripped";
  }
}

TEST(JitText, ConstantsOfEveryDtypeRoundTripBitForBit) {
  const float f_min = std::numeric_limits<float>::denorm_min();
  const double d_max = std::numeric_limits<double>::max();
  Graph g;
  Value* f = g.add_constant(
      tensor(std::vector<float>{0.1f, -0.0f, f_min, 3.4028235e38f, NAN, -INFINITY}, {2, 3}));
  Value* d =
      g.add_constant(tensor(std::vector<double>{0.1, 1e-300, d_max, -2.5}, {4}, DType::Float64));
  Value* i = g.add_constant(tensor(std::vector<int32_t>{INT32_MIN, INT32_MAX}, {2}));
  Value* l = g.add_constant(tensor(std::vector<int64_t>{INT64_MIN, INT64_MAX, 0}, {3, 1}));
  Value* b = g.add_constant(tensor(std::vector<bool>{true, false}, {1, 2}));
  g.add_constant(empty({2, 0, 3}, DType::Float32));
  g.add_constant(scalar_tensor(int64_t(7)), /*wrapped_number=*/true);
  g.add_constant(full({}, true, DType::Bool));
  g.set_outputs({f, d, i, l, b});

  const std::string text = to_text(g, kFull);
  EXPECT_NE(text.find("[[0.1, -0, 1e-45], [3.4028235e+38, nan, -inf]]"), std::string::npos) << text;
  EXPECT_NE(text.find("= const [-2147483648, 2147483647]"), std::string::npos) << text;
  EXPECT_NE(text.find("= const [[true, false]]"), std::string::npos) << text;
  EXPECT_NE(text.find("%c5 : f32[2, 0, 3] = const [[], []]"), std::string::npos) << text;
  EXPECT_NE(text.find("%c6 : i64[] = number 7"), std::string::npos) << text;
  expect_round_trip(g);

  std::unique_ptr<Graph> parsed = parse_graph(text);
  const auto& constants = parsed->constants();
  ASSERT_EQ(constants.size(), g.constants().size());
  EXPECT_TRUE(constants[6]->type().wrapped_number);
  EXPECT_FALSE(constants[7]->type().wrapped_number);
  std::vector<float> floats = constants[0]->data().to_vector<float>();
  EXPECT_TRUE(std::signbit(floats[1]));
  EXPECT_EQ(floats[2], f_min);
  EXPECT_TRUE(std::isnan(floats[4]));
  EXPECT_EQ(constants[1]->data().to_vector<double>(),
            (std::vector<double>{0.1, 1e-300, d_max, -2.5}));
  EXPECT_EQ(constants[3]->data().to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX, 0}));
}

TEST(JitText, EveryAttributeKindRoundTrips) {
  Graph g;
  Value* x = g.add_input(meta(DType::Float32, {2, 3}), "x");
  Value* i = g.add_input(meta(DType::Int64, {2, 3}), "i");
  Node* sum = g.append(op("sum"), {x}, {{"dims", IntList{0, 1}}, {"dtype", DType::Float32}});
  Node* gelu = g.append(op("gelu"), {x}, {{"approximate", std::string("tanh")}});
  Node* clamp = g.append(op("clamp"), {x}, {{"min", -1e-05}});
  Node* leaky = g.append(op("leaky_relu"), {x}, {{"negative_slope", 0.1}});
  Node* hot = g.append(op("one_hot"), {i}, {{"num_classes", 5}});
  Node* cast = g.append(op("cast"), {i}, {{"dtype", DType::Bool}});
  Node* pool = g.append(op("squeeze"), {x});
  g.set_outputs({sum->output(), gelu->output(), clamp->output(), leaky->output(), hot->output(),
                 cast->output(), pool->output()});
  const std::string text = to_text(g);
  EXPECT_NE(text.find("sum(%x) {dims=[0, 1], keepdim=false, dtype=f32}"), std::string::npos);
  EXPECT_NE(text.find("gelu(%x) {approximate=\"tanh\"}"), std::string::npos);
  EXPECT_NE(text.find("clamp(%x) {min=-1e-05, max=None}"), std::string::npos);
  EXPECT_NE(text.find("leaky_relu(%x) {negative_slope=0.1}"), std::string::npos);
  EXPECT_NE(text.find("cast(%i) {dtype=bool}"), std::string::npos);
  EXPECT_NE(text.find("squeeze(%x) {dims=None}"), std::string::npos);
  expect_round_trip(g);
}

TEST(JitText, OddNamesAreQuotedAndKept) {
  Graph g;
  const std::vector<std::string> names = {
      "plain", "with space", "q\"uote\\", "line\nbreak", "0", "c1", "in2", "ünï", "", "tab\there"};
  std::vector<Value*> inputs;
  for (const std::string& name : names)
    inputs.push_back(g.add_input(meta(DType::Float32, {1}), name));
  g.add_param("0.weight", meta(DType::Float32, {1}));
  g.add_param("ctrl\x01", meta(DType::Float32, {1}));
  g.set_outputs(inputs);
  const std::string text = to_text(g);
  EXPECT_NE(text.find("graph(%plain : f32[1], %\"with space\" : f32[1], %\"q\\\"uote\\\\\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%\"line\\nbreak\""), std::string::npos) << text;
  EXPECT_NE(text.find("%\"0\" : f32[1], %\"c1\" : f32[1], %\"in2\" : f32[1]"), std::string::npos);
  EXPECT_NE(text.find("%in8 : f32[1]"), std::string::npos) << text;  // the unnamed input
  EXPECT_NE(text.find("%0.weight : f32[1] = param"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"ctrl\\x01\""), std::string::npos) << text;
  expect_round_trip(g);
  std::unique_ptr<Graph> parsed = parse_graph(text);
  for (size_t k = 0; k < names.size(); ++k)
    EXPECT_EQ(parsed->inputs()[k]->name(), names[k]);
  EXPECT_EQ(parsed->params()[1]->name(), "ctrl\x01");
}

TEST(JitText, RepeatedNamesPrintApart) {
  Graph g;
  Value* a = g.add_input(meta(DType::Float32, {1}), "x");
  Value* b = g.add_input(meta(DType::Float32, {1}), "x");
  g.add_param("x.1", meta(DType::Float32, {1}));
  g.set_outputs({a, b});
  const std::string text = to_text(g);
  EXPECT_NE(text.find("graph(%x : f32[1], %x.2 : f32[1])"), std::string::npos) << text;
  EXPECT_NE(text.find("%x.1 : f32[1] = param"), std::string::npos) << text;
  EXPECT_NE(text.find("return (%x, %x.2)"), std::string::npos) << text;
  std::unique_ptr<Graph> parsed = parse_graph(text);
  EXPECT_EQ(to_text(*parsed), text);
}

TEST(JitText, LargeConstantsAreElidedForDisplayOnly) {
  Graph g;
  Value* big = g.add_constant(arange(int64_t(20)));
  Value* small = g.add_constant(arange(int64_t(3)));
  g.set_outputs({big, small});
  const std::string shown = to_text(g);
  EXPECT_NE(shown.find("%c0 : i64[20] = const <20 x i64>"), std::string::npos) << shown;
  EXPECT_NE(shown.find("%c1 : i64[3] = const [0, 1, 2]"), std::string::npos) << shown;
  EXPECT_NE(to_text(g, {.constant_limit = 2}).find("const <3 x i64>"), std::string::npos);
  EXPECT_NE(to_text(g, kFull).find("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"), std::string::npos);
  Error e = error_of([&] { parse_graph(shown); });
  EXPECT_TRUE(mentions(e, "2:25")) << e.what();
  EXPECT_TRUE(mentions(e, "elided")) << e.what();
  EXPECT_TRUE(mentions(e, "PrintOptions::full")) << e.what();
  expect_round_trip(g);
}

TEST(JitText, ManyShapesOfGraphRoundTrip) {
  Graph g;
  Value* x = g.add_input(meta(DType::Float32, {2, 6}), "x");
  Value* idx = g.add_input(meta(DType::Int64, {2}));
  Node* parts = g.append(op("split"), {x}, {{"split_size", 2}, {"dim", 1}});
  Node* joined = g.append(op("cat"), {parts->output(2), parts->output(0), parts->output(0)});
  Node* drop = g.append(op("dropout"), {joined->output()}, {{"p", 0.25}, {"train", false}});
  Node* pick = g.append(op("index_select"), {drop->output(0), idx}, {{"dim", 0}});
  Value* unused = g.add_param("unused.weight", meta(DType::Float64, {0}));
  (void)unused;
  g.set_outputs({pick->output(), x, parts->output(1)});
  expect_round_trip(g);

  Graph empty_graph;
  EXPECT_EQ(to_text(empty_graph), "graph() {\n  return ()\n}\n");
  expect_round_trip(empty_graph);
}

TEST(JitText, HandWrittenTextMayLeaveOutTypesAndDefaults) {
  std::unique_ptr<Graph> g = parse_graph(R"(
    # a comment, then a graph with untyped outputs
    graph(%x : f32[2, 3]) {
      %w : f32[4, 3] = param   # weights come later
      %h = linear(%x, %w, none)
      %s = sum(%h) {dims=[1]}
      %m, %i = max(%h) {dim=0}
      return (%s, %i)
    })");
  verify(*g);
  EXPECT_EQ(to_text(*g),
            "graph(%x : f32[2, 3]) {\n"
            "  %w : f32[4, 3] = param\n"
            "  %0 : f32[2, 4] = linear(%x, %w, none)\n"
            "  %1 : f32[2] = sum(%0) {dims=[1], keepdim=false, dtype=None}\n"
            "  %2 : f32[4], %3 : i64[4] = max(%0) {dim=0, keepdim=false}\n"
            "  return (%1, %3)\n"
            "}\n");
  EXPECT_FALSE(g->params()[0]->data().defined());
}

// ---------------------------------------------------------------- errors

struct BadText {
  std::string text;
  std::string position;  // "line:column"
  std::string message;
};

const std::string kGood =
    "graph(%x : f32[2]) {\n"
    "  %0 : f32[2] = relu(%x)\n"
    "  return (%0)\n"
    "}\n";

TEST(JitText, ParseErrorsSayWhereAndWhat) {
  const std::vector<BadText> cases = {
      {"", "1:1", "expected 'graph', got end of text"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = reul(%x)\n", "2:17", "unknown op 'reul'"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%y)\n", "2:22", "unknown value '%y'"},
      {"graph(%x : f32[2]) {\n  %x : f32[2] = relu(%x)\n", "2:3",
       "redefinition of '%x' (first defined at 1:7)"},
      {"graph(%x : f32[2], %x : f32[2]) {", "1:20", "redefinition"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%x) {alpha=1}\n", "2:27",
       "relu has no attribute 'alpha'"},
      {"graph(%x : f32[2]) {\n  %0 : f32[] = sum(%x) {keepdim=1}\n", "2:33",
       "expected true or false for attribute 'keepdim' of sum, got '1'"},
      {"graph(%x : f32[2]) {\n  %0 : f32[] = sum(%x) {dims=[0.5]}\n", "2:31",
       "expected an integer"},
      {"graph(%x : f32[2]) {\n  %0 : f32[] = sum(%x) {dims=[0], dims=[0]}\n", "2:35",
       "given twice"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = cast(%x) {dtype=None}\n", "2:33",
       "attribute 'dtype' of cast cannot be None"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = cast(%x) {dtype=f16}\n", "2:33", "expected a dtype"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = gelu(%x) {approximate=tanh}\n", "2:39",
       "expected a quoted string"},
      {"graph(%x : f32[2]) {\n  %c : f32[2] = const [1, 2x]\n", "2:27",
       "expected a constant element of type f32, got '2x'"},
      {"graph(%x : f32[2]) {\n  %c : f32[2] = const [1]\n", "2:25", "has 2 elements, got 1"},
      {"graph(%x : f32[2]) {\n  %c : f32[2] = const [1, 2, 3]\n", "2:28",
       "has 2 elements; expected ']'"},
      {"graph(%x : f32[2]) {\n  %c : i32[] = const 2147483648\n", "2:22",
       "expected a constant element of type i32, got '2147483648'"},
      {"graph(%x : f32[2]) {\n  %c : f32[] = const 1e39\n", "2:22",
       "expected a constant element of type f32"},
      {"graph(%x : f32[-2]) {", "1:16", "cannot be negative"},
      {"graph(%x : f32[4611686018427387904, 4]) {", "1:37", "too large"},
      {"graph(%x : f32[2]) {\n  %s = \"unterminated\n", "2:8", "unterminated string"},
      {"graph(%x : f32[2]) {\n  %s = \"a\\q\"\n", "2:10", "unknown escape \\q"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%x) $\n", "2:26", "unexpected character \"$\""},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%x)\n", "3:1",
       "expected 'return' before the end of text"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2] = relu(%x\n", "3:1",
       "expected ')' after the inputs of relu"},
      {kGood + "junk", "5:1", "expected the end of text after the graph, got 'junk'"},
      {"graph(%x : f32[2]) {\n  %w = param\n", "2:8", "a param declares one value with its type"},
      {"graph(%x : f32[2]) {\n  %0 : f32[2], %1 = max(%x) {dim=0}\n", "2:21",
       "give a type to every output of max"},
      {"graph(%x : f32[2]) {\n  %0 = max(%x) {dim=0}\n", "2:8",
       "max gives 2 outputs, the text names 1"},
      {"graph(%x : f32[2]) {\n  %0 = matmul(%x, %x, %x)\n", "2:8",
       "matmul: expected 2 inputs, got 3"},
      {"graph(%x : f32[2]) {\n  % = relu(%x)\n", "2:4", "expected a value name after '%'"},
  };
  for (const BadText& c : cases) {
    Error e = error_of([&] { parse_graph(c.text); });
    EXPECT_TRUE(mentions(e, "IR text " + c.position + ": ")) << c.text << "\n-> " << e.what();
    EXPECT_TRUE(mentions(e, c.message)) << c.text << "\n-> " << e.what();
  }
}

// Whatever the text, the parser returns a graph or throws kiln::Error.
void expect_no_crash(const std::string& text) {
  try {
    std::unique_ptr<Graph> g = parse_graph(text);
    to_text(*g);
    verify(*g);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kiln::Error: " << e.what() << "\n" << text;
  }
}

TEST(JitText, NoTextCrashesTheParser) {
  std::unique_ptr<Graph> mlp = small_mlp();
  mlp->add_constant(tensor(std::vector<float>{1.5f, -2.0f}, {2}));
  const std::string text = to_text(*mlp) + "# end\n";
  for (size_t n = 0; n <= text.size(); ++n)
    expect_no_crash(text.substr(0, n));
  const std::string alphabet = "%[](){},:=<>\"\\#-+.0123456789eaxnif\n \xff";
  uint64_t state = 12345;
  auto random = [&](size_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return size_t(state >> 33) % bound;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::string mutated = text;
    for (int edits = 1 + int(random(3)); edits > 0; --edits) {
      size_t at = random(mutated.size());
      char ch = alphabet[random(alphabet.size())];
      switch (random(3)) {
        case 0:
          mutated[at] = ch;
          break;
        case 1:
          mutated.erase(at, 1);
          break;
        default:
          mutated.insert(mutated.begin() + std::ptrdiff_t(at), ch);
      }
    }
    expect_no_crash(mutated);
  }
}

}  // namespace
}  // namespace kiln::jit
