// Module bookkeeping: names and their order, state_dict round trips and the
// errors a bad one gives, train/eval recursion, containers, default init.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "kiln/core/factory.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

using std::make_shared;

// A module with an own parameter and buffer registered between children, so
// the test sees that own entries come first, then each child's.
struct Net : nn::Module {
  Net() : Module("Net") {
    fc1 = register_module("fc1", make_shared<nn::Linear>(3, 4));
    scale = register_parameter("scale", ones({1}));
    steps = register_buffer("steps", zeros({}, DType::Int64));
    fc2 = register_module("fc2", make_shared<nn::Linear>(4, 2, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(x))) * scale; }
  std::shared_ptr<nn::Linear> fc1, fc2;
  Tensor scale, steps;
};

std::vector<std::string> names_of(const nn::NamedTensors& entries) {
  std::vector<std::string> names;
  for (const auto& entry : entries)
    names.push_back(entry.first);
  return names;
}

using Names = std::vector<std::string>;

TEST(Module, NamesComeInRegistrationOrderOwnEntriesFirst) {
  Net net;
  EXPECT_EQ(names_of(net.named_parameters()),
            (Names{"scale", "fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(names_of(net.named_parameters(/*recurse=*/false)), (Names{"scale"}));
  EXPECT_EQ(names_of(net.named_buffers()), (Names{"steps"}));
  EXPECT_EQ(names_of(net.state_dict()),
            (Names{"scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(net.parameters().size(), 4u);
  EXPECT_TRUE(net.parameters()[1].is_same(net.fc1->weight));
  Names children;
  for (const auto& [name, child] : net.named_children())
    children.push_back(name);
  EXPECT_EQ(children, (Names{"fc1", "fc2"}));
  EXPECT_EQ(net.children()[1], net.fc2);
  Names modules;
  for (const auto& [name, m] : net.named_modules())
    modules.push_back(name);
  EXPECT_EQ(modules, (Names{"", "fc1", "fc2"}));
}

TEST(Module, ParametersRequireGradAndBuffersDoNot) {
  Net net;
  for (const Tensor& p : net.parameters())
    EXPECT_TRUE(p.requires_grad());
  EXPECT_FALSE(net.steps.requires_grad());
}

TEST(Module, RegistrationRejectsRepeatedAndDottedNames) {
  Net net;
  EXPECT_TRUE(mentions(error_of([&] { net.register_parameter("fc1", ones({1})); }),
                       "attribute \"fc1\" already exists"));
  EXPECT_TRUE(
      mentions(error_of([&] { net.register_buffer("a.b", ones({1})); }), "can't contain \".\""));
  EXPECT_EQ(error_of([&] { net.register_buffer("", ones({1})); }).kind(), ErrorKind::Value);
}

TEST(Module, StateDictRoundTripCopiesIntoTheExistingTensors) {
  manual_seed(1);
  Net a;
  Net b;
  fill_(a.steps, int64_t(7));
  Tensor b_weight = b.fc1->weight;
  uint64_t version = b_weight.version();
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(b.fc1->weight.is_same(b_weight));  // handles an optimizer holds stay valid
  EXPECT_GT(b_weight.version(), version);
  auto sa = a.state_dict(), sb = b.state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.to_vector<double>(), sb[i].second.to_vector<double>()) << sa[i].first;
    EXPECT_FALSE(sa[i].second.is_alias_of(sb[i].second)) << sa[i].first;
  }
  EXPECT_TRUE(b.fc1->weight.requires_grad());
}

TEST(Module, StrictLoadNamesMissingUnexpectedAndMisshapenKeys) {
  Net net;
  nn::StateDict dict = net.state_dict();
  nn::StateDict missing(dict.begin() + 1, dict.end());
  Error e = error_of([&] { net.load_state_dict(missing); });
  EXPECT_TRUE(mentions(e, "missing key(s) \"scale\"")) << e.what();

  nn::StateDict extra = dict;
  extra.emplace_back("fc3.weight", ones({2}));
  e = error_of([&] { net.load_state_dict(extra); });
  EXPECT_TRUE(mentions(e, "unexpected key(s) \"fc3.weight\"")) << e.what();

  nn::StateDict wrong = dict;
  wrong[2].second = zeros({3, 4});  // fc1.weight is [4, 3]
  wrong[0].second = zeros({1});
  e = error_of([&] { net.load_state_dict(wrong); });
  EXPECT_TRUE(mentions(e, "size mismatch for \"fc1.weight\"")) << e.what();
  EXPECT_TRUE(mentions(e, "[3, 4]")) << e.what();
  EXPECT_EQ(net.scale.item<float>(), 1.0f);  // a failed load copies nothing
}

TEST(Module, NonStrictLoadSkipsMissingAndUnexpectedButNotShapes) {
  Net net;
  nn::StateDict partial{{"scale", full({1}, 3.0)}, {"nothing", ones({1})}};
  net.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(net.scale.item<float>(), 3.0f);
  nn::StateDict misshapen{{"scale", ones({2})}};
  EXPECT_TRUE(mentions(error_of([&] { net.load_state_dict(misshapen, false); }),
                       "size mismatch for \"scale\""));
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  auto inner = make_shared<nn::Sequential>(make_shared<nn::Dropout>(0.5));
  nn::Sequential outer(make_shared<nn::Linear>(2, 2), inner);
  EXPECT_TRUE(outer.is_training());
  outer.eval();
  for (const auto& [name, m] : outer.named_modules())
    EXPECT_FALSE(m->is_training()) << name;
  outer.train();
  EXPECT_TRUE(inner->at<nn::Dropout>(0)->is_training());
}

TEST(Module, DropoutFollowsTheTrainingFlag) {
  manual_seed(5);
  nn::Dropout drop(0.25);
  Tensor x = ones({20000});
  Tensor y = drop(x);
  double kept = mean(to(ne(y, 0.0), DType::Float32)).item<double>();
  EXPECT_NEAR(kept, 0.75, 0.02);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  EXPECT_TRUE(mentions(error_of([] { nn::Dropout(1.5); }), "between 0 and 1"));
}

TEST(Sequential, ChainsChildrenNamedByPosition) {
  auto fc = make_shared<nn::Linear>(3, 2);
  nn::Sequential seq(fc, make_shared<nn::ReLU>());
  seq.push_back(make_shared<nn::Tanh>());
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names_of(seq.named_parameters()), (Names{"0.weight", "0.bias"}));
  EXPECT_EQ(seq[0], fc);
  EXPECT_EQ(seq[-1]->type_name(), "Tanh");
  EXPECT_EQ(seq.at<nn::Linear>(0), fc);
  EXPECT_EQ(error_of([&] { seq.at<nn::Conv2d>(0); }).kind(), ErrorKind::Type);
  EXPECT_EQ(error_of([&] { seq[3]; }).kind(), ErrorKind::Index);
  Names types;
  for (const auto& m : seq)
    types.push_back(m->type_name());
  EXPECT_EQ(types, (Names{"Linear", "ReLU", "Tanh"}));

  Tensor x = randn({4, 3});
  auto want = tanh(relu((*fc)(x))).to_vector<float>();
  EXPECT_EQ(seq(x).to_vector<float>(), want);
}

TEST(ModuleList, HoldsModulesWithoutAForward) {
  nn::ModuleList list{make_shared<nn::Linear>(2, 2), make_shared<nn::Linear>(2, 1)};
  EXPECT_EQ(names_of(list.named_parameters()), (Names{"0.weight", "0.bias", "1.weight", "1.bias"}));
  Tensor x = ones({1, 2});
  EXPECT_EQ(error_of([&] { list(x); }).kind(), ErrorKind::NotImplemented);
}

TEST(Module, PrintsLikePyTorch) {
  nn::Sequential seq(make_shared<nn::Conv2d>(1, 4, IntList{3}, IntList{1}, IntList{1}),
                     make_shared<nn::ReLU>(), make_shared<nn::Linear>(4, 2, false));
  std::ostringstream os;
  os << seq;
  EXPECT_EQ(os.str(),
            "Sequential(\n"
            "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=4, out_features=2, bias=False)\n"
            ")");
}

TEST(Linear, WithoutBiasHasOnlyAWeight) {
  nn::Linear fc(3, 2, /*bias=*/false);
  EXPECT_EQ(names_of(fc.state_dict()), (Names{"weight"}));
  EXPECT_FALSE(fc.bias.defined());
}

// Default init: U(±1/sqrt(fan_in)) for weight and bias, so the weight's
// standard deviation is bound / sqrt(3).
void expect_uniform(const Tensor& t, double bound) {
  auto v = t.to_vector<double>();
  double sum = 0, sq = 0;
  for (double x : v) {
    ASSERT_LE(std::abs(x), bound);
    sum += x;
    sq += x * x;
  }
  double n = double(v.size());
  EXPECT_NEAR(sum / n, 0.0, 0.05 * bound);
  EXPECT_NEAR(std::sqrt(sq / n), bound / std::sqrt(3.0), 0.05 * bound);
}

TEST(DefaultInit, LinearAndConvDrawUniformOverFanIn) {
  manual_seed(2);
  nn::Linear fc(400, 100);
  expect_uniform(fc.weight, 1.0 / 20.0);
  EXPECT_LE(amax(abs(fc.bias)).item<double>(), 1.0 / 20.0);
  nn::Conv2d conv(8, 64, {3}, {1}, {0}, {1}, /*groups=*/2);
  EXPECT_EQ(conv.weight.shape(), (IntList{64, 4, 3, 3}));
  expect_uniform(conv.weight, 1.0 / 6.0);  // fan_in = 4 * 3 * 3
  EXPECT_LE(amax(abs(conv.bias)).item<double>(), 1.0 / 6.0);
}

TEST(DefaultInit, SeedMakesItReproducible) {
  manual_seed(9);
  nn::Linear a(5, 5);
  manual_seed(9);
  nn::Linear b(5, 5);
  EXPECT_EQ(a.weight.to_vector<float>(), b.weight.to_vector<float>());
  EXPECT_EQ(a.bias.to_vector<float>(), b.bias.to_vector<float>());
}

TEST(DefaultInit, EmbeddingIsStandardNormalWithAZeroPaddingRow) {
  manual_seed(4);
  nn::Embedding emb(1000, 50, /*padding_idx=*/-1);
  EXPECT_EQ(emb.padding_idx, 999);
  EXPECT_NEAR(mean(emb.weight).item<double>(), 0.0, 0.02);
  EXPECT_NEAR(kiln::std(emb.weight).item<double>(), 1.0, 0.02);
  EXPECT_EQ(sum(abs(select(emb.weight, 0, 999))).item<double>(), 0.0);
  EXPECT_TRUE(mentions(error_of([] { nn::Embedding(3, 2, 3); }), "padding_idx"));
}

TEST(DefaultInit, NormsStartAtOnesAndZeros) {
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(names_of(bn.state_dict()),
            (Names{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.weight.to_vector<float>(), std::vector<float>(3, 1.f));
  EXPECT_EQ(bn.bias.to_vector<float>(), std::vector<float>(3, 0.f));
  EXPECT_EQ(bn.running_var.to_vector<float>(), std::vector<float>(3, 1.f));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::Int64);
  nn::LayerNorm ln({2, 3}, 1e-5, true, /*bias=*/false);
  EXPECT_EQ(names_of(ln.state_dict()), (Names{"weight"}));
  EXPECT_EQ(ln.weight.shape(), (IntList{2, 3}));
}

TEST(BatchNorm, CountsBatchesOnlyWhileTraining) {
  nn::BatchNorm1d bn(2);
  Tensor x = randn({4, 2});
  bn(x);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  bn.eval();
  Tensor mean_before = clone(bn.running_mean);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_EQ(bn.running_mean.to_vector<float>(), mean_before.to_vector<float>());
  EXPECT_TRUE(mentions(error_of([&] { bn(randn({1, 2, 3, 4})); }), "expected 2D or 3D input"));
  EXPECT_TRUE(names_of(nn::BatchNorm2d(2, 1e-5, 0.1, false, false).state_dict()).empty());
}

}  // namespace
}  // namespace kiln
