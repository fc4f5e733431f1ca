// Saving and loading .kiln model files: round trips (bit for bit), weights
// mapped not copied, large constants, state updates, the example replay, and
// the file kept from the format's first version.
#include <gtest/gtest.h>

#include <thread>

#include "io_test_util.h"
#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/io/model_file.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"

namespace kiln::jit {
namespace {

using io_test::TempDir;

std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

std::shared_ptr<nn::Sequential> make_conv_bn() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 4, IntList{3}), std::make_shared<nn::BatchNorm2d>(4),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 6 * 6, 3));
}

TEST(ModelFile, RoundTripIsBitForBit) {
  manual_seed(1);
  auto net = make_mlp();
  Tensor x = randn({4, 512});
  CompiledFunction traced = trace(*net, x);
  TempDir dir;
  save(traced, dir.file("mlp.kiln"), {.example_inputs = {x}});

  CompiledFunction loaded = load(dir.file("mlp.kiln"), {.verify = true});
  EXPECT_EQ(to_text(loaded.graph(), {.full = true}), to_text(traced.graph(), {.full = true}));
  Tensor other = randn({4, 512});
  EXPECT_TRUE(bitwise_equal(loaded({other})[0], traced({other})[0]));
}

TEST(ModelFile, WeightsAreMappedFromTheFileNotCopied) {
  auto net = make_mlp();
  CompiledFunction traced = trace(*net, randn({1, 512}));
  TempDir dir;
  save(traced, dir.file("mlp.kiln"));
  ModelFile file = read_model_file(dir.file("mlp.kiln"));
  ASSERT_EQ(file.graph->params().size(), 6u);
  for (const Value* param : file.graph->params()) {
    EXPECT_FALSE(param->data().storage()->owned_by_kiln()) << param->name();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(param->data().data_ptr()) % 64, 0u) << param->name();
  }
  EXPECT_EQ(file.weight_bytes, uint64_t(512 * 256 + 256 + 256 * 128 + 128 + 128 * 2 + 2) * 4);
  EXPECT_GE(file.file_bytes, file.weight_bytes);
  EXPECT_LT(file.file_bytes, file.weight_bytes + 16 * 1024);
}

TEST(ModelFile, WritingALoadedWeightChangesNeitherTheFileNorAnotherLoad) {
  auto net = make_mlp();
  CompiledFunction traced = trace(*net, randn({1, 512}));
  TempDir dir;
  std::string path = dir.file("mlp.kiln");
  save(traced, path);
  std::string before = io_test::read_bytes(path);
  ModelFile first = read_model_file(path);
  fill_(first.graph->params()[0]->data(), 7.0);
  ModelFile second = read_model_file(path);
  EXPECT_EQ(io_test::read_bytes(path), before);
  EXPECT_TRUE(bitwise_equal(second.graph->params()[0]->data(), net->state_dict()[0].second));
}

TEST(ModelFile, FrozenConstantsTooLargeToPrintTravelAsBlobs) {
  manual_seed(2);
  auto net = make_conv_bn();
  net->eval();
  Tensor x = randn({2, 1, 8, 8});
  CompiledFunction traced = trace(*net, x, {}, {.frozen = true, .fast_math = true});
  ASSERT_TRUE(traced.graph().params().empty() || !traced.graph().constants().empty());
  TempDir dir;
  save(traced, dir.file("frozen.kiln"), {.example_inputs = {x}});
  CompiledFunction loaded = load(dir.file("frozen.kiln"), {.verify = true});
  EXPECT_EQ(to_text(loaded.graph(), {.full = true}).size(),
            to_text(traced.graph(), {.full = true}).size());
  EXPECT_EQ(loaded.graph().constants().size(), traced.graph().constants().size());
  EXPECT_EQ(loaded.graph().params().size(), traced.graph().params().size());
  EXPECT_TRUE(bitwise_equal(loaded({x})[0], traced({x})[0]));
}

TEST(ModelFile, StateUpdatesAreSavedAndSavingDoesNotRunThem) {
  manual_seed(3);
  auto net = make_conv_bn();  // training mode: batch_norm updates its statistics
  Tensor x = randn({2, 1, 8, 8});
  CompiledFunction traced = trace(*net, x);
  ASSERT_FALSE(traced.state_updates().empty());
  auto running_mean = [&] {
    for (const auto& [name, tensor] : net->state_dict())
      if (name == "1.running_mean") return tensor;
    return Tensor();
  };
  Tensor mean_before = clone(running_mean());

  TempDir dir;
  save(traced, dir.file("train.kiln"), {.example_inputs = {x}});
  EXPECT_TRUE(bitwise_equal(running_mean(), mean_before));

  ModelFile file = read_model_file(dir.file("train.kiln"));
  EXPECT_EQ(file.state_updates.size(), traced.state_updates().size());
  CompiledFunction loaded = compile(file, {.verify = true});
  Value* mean = file.graph->find_param("1.running_mean");
  EXPECT_TRUE(bitwise_equal(mean->data(), mean_before));  // verify ran on a copy
  loaded({x});
  traced({x});
  EXPECT_TRUE(bitwise_equal(mean->data(), running_mean()));
}

TEST(ModelFile, VerifyCatchesAnExampleThatNoLongerMatches) {
  auto net = make_mlp();
  Tensor x = randn({1, 512});
  CompiledFunction traced = trace(*net, x);
  TempDir dir;
  std::string path = dir.file("mlp.kiln");
  save(traced, path, {.example_inputs = {x}});
  // Change an example output and fix its checksum: only the replay can tell.
  io_test::KilnParts parts = io_test::KilnParts::split(io_test::read_bytes(path));
  for (auto& record : parts.header["tensors"]) {
    if (record["role"] != "example_output") continue;
    uint64_t offset = record["offset"];
    float changed = 1e6f;
    std::memcpy(parts.data.data() + offset, &changed, sizeof changed);
    record["xxh3"] = model_format::to_hex(
        model_format::checksum(parts.data.data() + offset, record["nbytes"].get<uint64_t>()));
  }
  io_test::write_bytes(path, parts.join());
  EXPECT_NO_THROW(load(path));
  EXPECT_THROW_WITH(load(path, {.verify = true}), "differs from what the loaded model computes");
}

TEST(ModelFile, VerifyWithoutAnExampleSaysSo) {
  auto net = make_mlp();
  CompiledFunction traced = trace(*net, randn({1, 512}));
  TempDir dir;
  save(traced, dir.file("mlp.kiln"));
  EXPECT_THROW_WITH(load(dir.file("mlp.kiln"), {.verify = true}), "saved without an example");
}

TEST(ModelFile, MetadataRoundTrips) {
  auto net = make_mlp();
  CompiledFunction traced = trace(*net, randn({1, 512}));
  TempDir dir;
  save(traced, dir.file("m.kiln"), {.metadata = {{"author", "kiln test"}, {"quote", "\"\n\\"}}});
  ModelFile file = read_model_file(dir.file("m.kiln"));
  EXPECT_EQ(file.metadata.at("author"), "kiln test");
  EXPECT_EQ(file.metadata.at("quote"), "\"\n\\");
  EXPECT_EQ(file.kiln_version, "0.1.0");
  EXPECT_EQ(file.format_version, 1u);  // a static graph: the oldest version that holds it
}

TEST(ModelFile, ALoadedModelRunsFromManyThreads) {
  manual_seed(4);
  auto net = make_mlp();
  CompiledFunction traced = trace(*net, randn({2, 512}));
  TempDir dir;
  save(traced, dir.file("mlp.kiln"));
  CompiledFunction loaded = load(dir.file("mlp.kiln"));
  std::vector<Tensor> inputs, expected;
  for (int i = 0; i < 8; ++i) {
    inputs.push_back(randn({2, 512}));
    expected.push_back(traced({inputs.back()})[0]);
  }
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call) {
        int i = (t + call) % 8;
        if (!bitwise_equal(loaded({inputs[i]})[0], expected[i])) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int t = 0; t < 8; ++t)
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// save() writes a new file and renames it over the old one: a model loaded
// from the old file keeps its mapping (its weights) and keeps working.
TEST(ModelFile, SavingOverALoadedFileLeavesTheLoadedModelWorking) {
  manual_seed(6);
  auto first_net = make_mlp(), second_net = make_mlp();
  Tensor x = randn({1, 512});
  TempDir dir;
  std::string path = dir.file("mlp.kiln");
  save(trace(*first_net, x), path);
  CompiledFunction loaded = load(path);
  Tensor before = loaded({x})[0];
  save(trace(*second_net, x), path);
  EXPECT_TRUE(bitwise_equal(loaded({x})[0], before));
  EXPECT_FALSE(bitwise_equal(load(path)({x})[0], before));
  size_t files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary file left behind
  EXPECT_THROW_WITH(save(loaded, dir.file("no/such/folder/m.kiln")), "cannot write");
}

// A file written by the first version of the format, kept so that later
// code must still read it (tests/data/models/README.md says how it was made).
TEST(ModelFile, TheVersionOneFileStillLoads) {
  std::string path = std::string(KILN_TEST_DATA_DIR) + "/models/mymodel_v1.kiln";
  ModelFile file = read_model_file(path);
  EXPECT_EQ(file.format_version, 1u);
  EXPECT_EQ(file.op_schema_version, 1);
  CompiledFunction loaded = compile(file, {.verify = true});
  EXPECT_EQ(loaded.graph().inputs().size(), 1u);
}

}  // namespace
}  // namespace kiln::jit
