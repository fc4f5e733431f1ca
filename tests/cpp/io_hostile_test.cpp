// Hostile .kiln files: each malformed file raises a kiln::Error that names
// what is wrong, and nothing crashes or allocates more than the file implies.
// Most cases start from a good file and change one thing; those behind the
// header checksum rewrite the header and fix the checksum, so the check
// under test (not the checksum) is what refuses them.
#include <gtest/gtest.h>

#include <random>

#include "io_test_util.h"
#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/io/model_file.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/random.h"

namespace kiln::jit {
namespace {

using io_test::KilnParts;
using io_test::TempDir;
using nlohmann::json;

class HostileModelFile : public testing::Test {
 protected:
  void SetUp() override {
    manual_seed(5);
    auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 4),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(4, 2));
    x_ = randn({3, 8});
    save(trace(*net, x_), dir_.file("good.kiln"), {.example_inputs = {x_}});
    good_ = io_test::read_bytes(dir_.file("good.kiln"));
  }

  // Writes `bytes` and returns the message reading them raises.
  std::string error_of_bytes(const std::string& bytes) {
    std::string path = dir_.file("bad.kiln");
    io_test::write_bytes(path, bytes);
    return error_text([&] { compile(read_model_file(path)); });
  }
  std::string error_of_header(const std::function<void(json&)>& change) {
    KilnParts parts = KilnParts::split(good_);
    change(parts.header);
    return error_of_bytes(parts.join());
  }
  json& record(json& header, const std::string& role, size_t which = 0) {
    for (json& item : header["tensors"])
      if (item["role"] == role && which-- == 0) return item;
    throw std::runtime_error("no such record");
  }

  TempDir dir_;
  Tensor x_;
  std::string good_;
};

#define EXPECT_MENTIONS(message, text) \
  EXPECT_NE((message).find(text), std::string::npos) << (message)

TEST_F(HostileModelFile, TheGoodFileLoads) {
  EXPECT_NO_THROW(load(dir_.file("good.kiln"), {.verify = true}));
}

TEST_F(HostileModelFile, TruncatedAnywhere) {
  std::vector<size_t> cuts = {
      0,
      1,
      7,
      8,
      31,
      32,
      100,
      good_.size() / 2,
      good_.size() - 64,
      good_.size() - 64 + 10};  // the last blob starts 64 bytes from the end
  for (size_t cut : cuts) {
    std::string message = error_of_bytes(good_.substr(0, cut));
    EXPECT_FALSE(message.empty()) << "cut at " << cut;
  }
  EXPECT_MENTIONS(error_of_bytes(good_.substr(0, 20)), "shorter than the 32-byte prefix");
  EXPECT_MENTIONS(error_of_bytes(good_.substr(0, 100)), "truncated?");
  EXPECT_MENTIONS(error_of_bytes(good_.substr(0, good_.size() - 64)), "outside the data section");
}

TEST_F(HostileModelFile, PrefixFields) {
  std::string bad = good_;
  bad[1] = 'X';
  EXPECT_MENTIONS(error_of_bytes(bad), "not a kiln model (the magic bytes differ)");
  KilnParts parts = KilnParts::split(good_);
  parts.prefix.format_version = 3;
  EXPECT_MENTIONS(error_of_bytes(parts.join()),
                  "newer kiln in model format version 3; this kiln reads format versions up to 2, "
                  "so loading it needs a kiln that reads version 3");
  parts.prefix.format_version = 0;
  EXPECT_MENTIONS(error_of_bytes(parts.join()), "format version 0");
  parts.prefix.format_version = 1;
  parts.prefix.reserved = 9;
  EXPECT_MENTIONS(error_of_bytes(parts.join()), "reserved prefix field is 9");
}

TEST_F(HostileModelFile, OversizedHeaderLength) {
  for (uint64_t length : {uint64_t(1) << 40, ~uint64_t(0), uint64_t(good_.size())}) {
    std::string bad = good_;
    std::memcpy(bad.data() + 16, &length, sizeof length);
    EXPECT_MENTIONS(error_of_bytes(bad), "the header claims");
  }
}

TEST_F(HostileModelFile, WrongChecksums) {
  std::string bad = good_;
  bad[40] ^= 0x20;  // inside the header
  EXPECT_MENTIONS(error_of_bytes(bad), "the header fails its checksum");
  bad = good_;
  bad[good_.size() - 64 + 1] ^= 1;  // inside the last blob (the example output)
  std::string message = error_of_bytes(bad);
  EXPECT_MENTIONS(message, "fails its checksum");
  EXPECT_MENTIONS(message, "(example_output)");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["xxh3"] = "zz"; }),
                  "is not 16 lowercase hex digits");
}

TEST_F(HostileModelFile, HeaderThatIsNotJsonOrLacksFields) {
  KilnParts parts = KilnParts::split(good_);
  EXPECT_MENTIONS(error_of_bytes(parts.join("{\"graph\": [1, 2")), "not valid JSON");
  EXPECT_MENTIONS(error_of_bytes(parts.join("[1, 2, 3]")), "expected a JSON object, got array");
  EXPECT_MENTIONS(error_of_bytes(parts.join(std::string(100000, '['))), "not valid JSON");
  for (const char* field :
       {"graph", "tensors", "num_outputs", "state_updates", "kiln_version", "op_schema_version"}) {
    EXPECT_MENTIONS(error_of_header([&](json& h) { h.erase(field); }),
                    std::string("\"") + field + "\" is missing");
  }
  EXPECT_MENTIONS(error_of_header([](json& h) { h["num_outputs"] = -1; }),
                  "expected a non-negative integer");
  EXPECT_MENTIONS(error_of_header([](json& h) { h["graph"] = 5; }), "expected a string");
  EXPECT_MENTIONS(error_of_header([](json& h) {
                    h["metadata"] = {{"k", 1}};
                  }),
                  "metadata.k: expected a string");
}

TEST_F(HostileModelFile, NewerOpSchema) {
  EXPECT_MENTIONS(error_of_header([](json& h) { h["op_schema_version"] = 99; }),
                  "needs a kiln with op schema version 99");
}

TEST_F(HostileModelFile, TensorRecords) {
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param", 1)["offset"] = 0; }),
                  "overlap");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["offset"] = 8; }),
                  "is not aligned to 64 bytes");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["offset"] = 1ull << 60; }),
                  "lies past the end of the file");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["nbytes"] = 4; }),
                  "but its record says 4 bytes");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["dtype"] = "f16"; }),
                  "unknown dtype \"f16\"");
  EXPECT_MENTIONS(error_of_header([&](json& h) {
                    record(h, "param")["shape"] = {4, -8};
                  }),
                  "expected a non-negative integer");
  EXPECT_MENTIONS(error_of_header([&](json& h) {
                    record(h, "param")["shape"] = {1ull << 40, 1ull << 40};
                  }),
                  "holds more bytes than any file can");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["role"] = "weights"; }),
                  "unknown role \"weights\"");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param")["name"] = "nope"; }),
                  "tensor 'nope' is not a parameter of the graph");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "param", 1)["name"] = "0.weight"; }),
                  "has two tensors");
  EXPECT_MENTIONS(error_of_header([&](json& h) {
                    json& tensors = h["tensors"];
                    tensors.erase(tensors.begin());
                  }),
                  "parameter '0.weight' has no tensor in the file");
  EXPECT_MENTIONS(error_of_header([&](json& h) {
                    record(h, "param")["shape"] = {8, 4};
                  }),
                  "is float32[4, 8] in the graph but float32[8, 4] in the file");
  EXPECT_MENTIONS(error_of_header([&](json& h) { record(h, "example_input")["name"] = "3"; }),
                  "out of order");
}

TEST_F(HostileModelFile, GraphText) {
  auto with_graph = [&](const std::string& from, const std::string& to) {
    return error_of_header([&](json& h) {
      std::string text = h["graph"];
      size_t at = text.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      h["graph"] = text.replace(at, from.size(), to);
    });
  };
  EXPECT_MENTIONS(with_graph("linear(%0", "no_such_op(%0"), "unknown op 'no_such_op'");
  EXPECT_MENTIONS(with_graph("\"relu\"", "\"nope\""), "nope");
  EXPECT_MENTIONS(with_graph("{activation", "{units=3, activation"), "units");
  EXPECT_MENTIONS(with_graph("= linear(", "= linear(%x) #"), "graph");
  EXPECT_MENTIONS(with_graph("graph(", "graf("), "graph");
  EXPECT_MENTIONS(with_graph("f32[3, 4]", "f32[3, 5]"), "graph");
  EXPECT_MENTIONS(with_graph("f32[3, 8]", "f32[4611686018427387904, 8]"), "the shape is too large");
  EXPECT_MENTIONS(error_of_header([](json& h) { h["graph"] = std::string(50000, '['); }), "graph");
}

// The good file is a static graph, written in version 1, which holds no
// symbolic sizes (io_symbolic_test.cpp has the files of version 2).
TEST_F(HostileModelFile, SymbolicGraphInAVersionOneFileIsRefused) {
  std::string message = error_of_header([](json& h) {
    std::string text = h["graph"];
    for (size_t at; (at = text.find("f32[3, ")) != std::string::npos;)
      text.replace(at, 7, "f32[batch, ");
    h["graph"] = text;
  });
  EXPECT_MENTIONS(message,
                  "has the symbolic shape [batch, 8], which format version 1 cannot hold "
                  "(symbolic graphs are written in version 2)");
}

TEST_F(HostileModelFile, OutputsAndStateUpdates) {
  EXPECT_MENTIONS(error_of_header([](json& h) { h["num_outputs"] = 2; }),
                  "2 outputs and 0 state updates, but the graph returns 1 values");
  EXPECT_MENTIONS(error_of_header([](json& h) {
                    h["num_outputs"] = 0;
                    h["state_updates"] = {{{"output", 0}, {"param", "nope"}}};
                  }),
                  "names no input or parameter");
  EXPECT_MENTIONS(error_of_header([](json& h) {
                    h["num_outputs"] = 0;
                    h["state_updates"] = {{{"output", 0}, {"param", "0.bias"}}};
                  }),
                  "a state update writes float32[3, 2] into float32[4]");
  EXPECT_MENTIONS(error_of_header([](json& h) {
                    h["num_outputs"] = 0;
                    h["state_updates"] = {{{"output", 0}, {"input", 7}}};
                  }),
                  "names no input or parameter");
}

// Random damage: flipped bytes anywhere, and random lengths. Whatever the
// damage, the reader either loads a working model or raises kiln::Error.
TEST_F(HostileModelFile, RandomDamageNeverCrashes) {
  std::mt19937 rng(11);
  std::string path = dir_.file("damaged.kiln");
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bad = good_;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bad[rng() % bad.size()] ^= char(1 + rng() % 255);
    if (trial % 5 == 0) bad.resize(rng() % bad.size());
    io_test::write_bytes(path, bad);
    try {
      CompiledFunction model = compile(read_model_file(path));
      model({x_});
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 380);  // checksums catch nearly every flip
}

TEST_F(HostileModelFile, NotAFileAtAll) {
  EXPECT_MENTIONS(error_text([&] { read_model_file(dir_.file("absent.kiln")); }), "cannot open");
  std::filesystem::create_directory(dir_.file("folder.kiln"));
  EXPECT_MENTIONS(error_text([&] { read_model_file(dir_.file("folder.kiln")); }),
                  "is not a regular file");
}

}  // namespace
}  // namespace kiln::jit
