// .kiln files holding graphs with symbolic sizes (format version 2, issue
// 21): a symbolic graph saved, loaded in C++ and run at sizes it never saw
// gives what the original gives; its guards travel with it and are checked
// on every call; static graphs keep format version 1; and files that abuse
// the new fields are refused by name.
#include <gtest/gtest.h>

#include <random>

#include "io_test_util.h"
#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/io/model_file.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

using io_test::KilnParts;
using io_test::TempDir;
using nlohmann::json;

// A transformer-style block over [batch, seq, 16]: project, split into 2
// heads of 8 with a view whose target names the symbols, attention per
// head, back to [batch, seq, 16]; a second output keeps the first half of
// the sequence (a slice ending at seq // 2).
constexpr const char* kAttention = R"(graph(%x : f32[batch, seq, 16]) {
  %w : f32[16, 16] = param
  %0 = linear(%x, %w, none)
  %1 = view(%0) {shape=[batch, seq, 2, 8]}
  %2 = transpose(%1) {dim0=1, dim1=2}
  %3 = transpose(%2) {dim0=2, dim1=3}
  %4 = matmul(%2, %3)
  %5 = softmax(%4) {dim=-1}
  %6 = matmul(%5, %2)
  %7 = transpose(%6) {dim0=1, dim1=2}
  %8 = reshape(%7) {shape=[batch, seq, -1]}
  %9 : f32[batch, seq // 2, 16] = slice(%8) {dim=1, end=seq // 2}
  return (%8, %9)
}
)";

// The decision the slice took while tracing (its end within the sequence),
// which inferring the graph again takes from this guard.
std::shared_ptr<Graph> attention_graph() {
  std::shared_ptr<Graph> g = parse_graph(kAttention);
  g->find_param("w")->set_data(randn({16, 16}));
  SizeExpr seq = SizeExpr::symbol("seq");
  g->add_guard(ShapeGuard{floordiv(seq, 2), seq, ShapeGuard::Relation::Le, "slice"});
  return g;
}

ShapeGuard batch_above_one() {
  return ShapeGuard{SizeExpr(1), SizeExpr::symbol("batch"), ShapeGuard::Relation::Lt,
                    "a branch on x.shape[0]"};
}

void expect_same_outputs(const CompiledFunction& got, const CompiledFunction& want,
                         const Tensor& x) {
  std::vector<Tensor> a = got({x}), b = want({x});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "output " << i << " at " << str(x.shape());
}

TEST(IoSymbolic, SavedGraphLoadsAndRunsAtNewSizesAsTheOriginal) {
  manual_seed(3);
  std::shared_ptr<Graph> graph = attention_graph();
  graph->add_guard(batch_above_one());
  CompiledFunction original(graph, 2);
  TempDir dir;
  std::string path = dir.file("attention.kiln");
  save(original, path, {.example_inputs = {randn({2, 6, 16})}});

  ModelFile file = read_model_file(path);
  EXPECT_EQ(file.format_version, 2u);
  EXPECT_EQ(to_text(*file.graph, {.full = true}), to_text(*graph, {.full = true}));
  ASSERT_EQ(file.graph->guards().size(), 2u);
  EXPECT_EQ(file.graph->guards()[0].to_string(), "seq // 2 <= seq");
  EXPECT_EQ(file.graph->guards()[1], batch_above_one());
  EXPECT_EQ(file.graph->guards()[1].reason, "a branch on x.shape[0]");

  CompiledFunction loaded = compile(file, {.verify = true});
  for (IntList shape : {IntList{3, 7, 16}, IntList{5, 128, 16}, IntList{2, 1, 16}})
    expect_same_outputs(loaded, original, randn(shape));
  EXPECT_EQ(loaded({randn({4, 9, 16})})[1].shape(), (IntList{4, 4, 16}));
}

TEST(IoSymbolic, ALoadedModelChecksItsGuardsAndSymbolsOnEveryCall) {
  std::shared_ptr<Graph> graph = attention_graph();
  graph->add_guard(batch_above_one());
  TempDir dir;
  save(CompiledFunction(graph, 2), dir.file("a.kiln"));
  CompiledFunction loaded = load(dir.file("a.kiln"));
  EXPECT_THROW_WITH(loaded({randn({1, 4, 16})}),
                    "built under the guard 1 < batch (a branch on x.shape[0]), which these "
                    "sizes break");
  EXPECT_THROW_WITH(loaded({randn({2, 4, 8})}), "input 0 ('x') dim 2: expected 16, got 8");
  EXPECT_THROW_WITH(loaded({randn({2, 16})}), "input 0");
}

TEST(IoSymbolic, InputsSharingASymbolAndSizeAttributesRoundTrip) {
  std::shared_ptr<Graph> graph = parse_graph(R"(graph(%a : f32[batch, 4], %b : f32[batch]) {
  %c0 : f32[4] = const [1, 2, 3, 4]
  %0 : f32[batch, 4] = expand(%c0) {size=[batch, 4]}
  %1 : f32[batch, 4] = add(%a, %0)
  %2 : f32[batch, 1] = unsqueeze(%b) {dim=1}
  %3 : f32[batch, 4] = mul(%1, %2)
  %4 : f32[2*batch, 4] = cat(%3, %a) {dim=0}
  %5 : f32[batch // 2, 4] = narrow(%3) {dim=0, start=0, length=batch // 2}
  return (%4, %5)
}
)");
  CompiledFunction original(graph, 2);
  TempDir dir;
  save(original, dir.file("s.kiln"));
  CompiledFunction loaded = load(dir.file("s.kiln"));
  for (int64_t batch : {1, 6, 11}) {
    std::vector<Tensor> inputs = {randn({batch, 4}), randn({batch})};
    std::vector<Tensor> got = loaded(inputs), want = original(inputs);
    EXPECT_EQ(got[0].shape(), (IntList{2 * batch, 4}));
    EXPECT_TRUE(bitwise_equal(got[0], want[0]));
    EXPECT_TRUE(bitwise_equal(got[1], want[1]));
  }
  EXPECT_THROW_WITH(loaded({randn({3, 4}), randn({5})}),
                    "input 1 ('b') dim 0 is batch, which input 0 ('a') dim 0 sets to 3, but got 5");
}

// A static graph is written in version 1, which a kiln from before symbolic
// graphs reads too, with no "guards" field.
TEST(IoSymbolic, StaticGraphsAreStillWrittenInVersionOne) {
  std::shared_ptr<Graph> graph = parse_graph(R"(graph(%x : f32[2, 3]) {
  %0 = relu(%x)
  return (%0)
}
)");
  TempDir dir;
  save(CompiledFunction(graph, 1), dir.file("r.kiln"));
  KilnParts parts = KilnParts::split(io_test::read_bytes(dir.file("r.kiln")));
  EXPECT_EQ(parts.prefix.format_version, 1u);
  EXPECT_FALSE(parts.header.contains("guards"));
  EXPECT_EQ(read_model_file(dir.file("r.kiln")).format_version, 1u);
}

// A file written by the first kiln with format version 2, kept so that
// later code must still read it (tests/data/models/make_mymodel_v2.py).
TEST(IoSymbolic, TheVersionTwoFileStillLoads) {
  std::string path = std::string(KILN_TEST_DATA_DIR) + "/models/mymodel_v2.kiln";
  ModelFile file = read_model_file(path);
  EXPECT_EQ(file.format_version, 2u);
  EXPECT_EQ(file.graph->symbols(), (std::vector<std::string>{"batch", "seq"}));
  CompiledFunction loaded = compile(file, {.verify = true});
  Tensor x = randn({3, 6, 16});
  std::vector<Tensor> out = loaded({x});
  EXPECT_EQ(out[0].shape(), (IntList{3, 6, 16}));
  EXPECT_TRUE(bitwise_equal(out[1], contiguous(narrow(out[0], 1, 0, 3))));
}

class HostileSymbolicFile : public testing::Test {
 protected:
  void SetUp() override {
    manual_seed(8);
    std::shared_ptr<Graph> graph = attention_graph();
    graph->add_guard(batch_above_one());
    save(CompiledFunction(graph, 2), dir_.file("good.kiln"),
         {.example_inputs = {randn({2, 3, 16})}});
    good_ = io_test::read_bytes(dir_.file("good.kiln"));
  }

  std::string error_of_header(const std::function<void(KilnParts&)>& change) {
    KilnParts parts = KilnParts::split(good_);
    change(parts);
    std::string path = dir_.file("bad.kiln");
    io_test::write_bytes(path, parts.join());
    return error_text([&] { compile(read_model_file(path)); });
  }
  std::string error_of_guard(const std::function<void(json&)>& change) {
    return error_of_header([&](KilnParts& parts) { change(parts.header["guards"][1]); });
  }

  TempDir dir_;
  std::string good_;
};

#define EXPECT_MENTIONS(message, text) \
  EXPECT_NE((message).find(text), std::string::npos) << (message)

TEST_F(HostileSymbolicFile, TheGoodFileLoads) {
  EXPECT_NO_THROW(load(dir_.file("good.kiln"), {.verify = true}));
}

TEST_F(HostileSymbolicFile, Guards) {
  EXPECT_MENTIONS(error_of_guard([](json& g) { g["relation"] = ">"; }),
                  "guards[1]: unknown relation \">\" (expected ==, !=, < or <=)");
  EXPECT_MENTIONS(error_of_guard([](json& g) { g["lhs"] = "1 +"; }), "guards[1].lhs: ");
  EXPECT_MENTIONS(error_of_guard([](json& g) { g["rhs"] = 5; }),
                  "guards[1].rhs: expected a string");
  EXPECT_MENTIONS(error_of_guard([](json& g) { g.erase("lhs"); }), "\"lhs\" is missing");
  EXPECT_MENTIONS(error_of_guard([](json& g) { g["rhs"] = "heads"; }),
                  "the guard 1 < heads uses the size heads, but no graph input has a dim that is "
                  "heads alone");
  EXPECT_MENTIONS(error_of_header([](KilnParts& p) { p.header["guards"] = "1 < batch"; }),
                  "guards: expected a JSON array, got string");
  EXPECT_MENTIONS(error_of_header([](KilnParts& p) { p.header["guards"] = {1}; }),
                  "guards[0]: expected a JSON object, got number");
}

// Version 1 knows nothing of symbols: a file that says 1 and holds them was
// not written by kiln.
TEST_F(HostileSymbolicFile, VersionOneHoldsNoSymbols) {
  EXPECT_MENTIONS(error_of_header([](KilnParts& p) { p.prefix.format_version = 1; }),
                  "format version 1 has no guards (symbolic graphs are written in version 2)");
  EXPECT_MENTIONS(error_of_header([](KilnParts& p) {
                    p.prefix.format_version = 1;
                    p.header.erase("guards");
                  }),
                  "has the symbolic shape [batch, seq, 16], which format version 1 cannot hold");
}

TEST_F(HostileSymbolicFile, SymbolsNoInputSets) {
  auto with_graph = [&](const std::string& from, const std::string& to) {
    return error_of_header([&](KilnParts& p) {
      std::string text = p.header["graph"];
      size_t at = text.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      p.header["graph"] = text.replace(at, from.size(), to);
    });
  };
  EXPECT_MENTIONS(with_graph("{shape=[batch, seq, 2, 8]}", "{shape=[batch, len, 2, 8]}"),
                  "attribute 'shape' of view uses the size len, but no graph input has a dim "
                  "that is len alone, so no call sets it");
  EXPECT_MENTIONS(with_graph("%x : f32[batch, seq, 16]", "%x : f32[batch, 2*seq, 16]"),
                  "uses the size seq, but no graph input has a dim that is seq alone");
}

TEST_F(HostileSymbolicFile, AnExampleOfTheWrongSizes) {
  std::string message = error_of_header([](KilnParts& p) {
    p.header["guards"][1]["lhs"] = "2";  // the example's batch 2 breaks 2 < batch
  });
  EXPECT_MENTIONS(message, "the stored example: the graph was built under the guard 2 < batch");
}

TEST_F(HostileSymbolicFile, RandomDamageNeverCrashes) {
  std::mt19937 rng(12);
  std::string path = dir_.file("damaged.kiln");
  for (int trial = 0; trial < 200; ++trial) {
    KilnParts parts = KilnParts::split(good_);
    std::string header = parts.header.dump();
    header[rng() % header.size()] ^= char(1 + rng() % 255);  // resealed: reaches the parsers
    io_test::write_bytes(path, parts.join(header));
    try {
      CompiledFunction model = compile(read_model_file(path));
      model({randn({3, 5, 16})});
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace kiln::jit
