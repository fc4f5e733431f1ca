// hybridize and the signature cache: one compiled entry per input signature,
// the reasons for each miss, and that compiled calls behave as eager ones
// (autograd, dropout, batch_norm's running statistics).
#include "kiln/jit/compile/hybridize.h"

#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/kiln.h"

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

// SCENARIOS.md §2's HybridNet; `calls` stands in for its print("tracing forward").
class HybridNet : public nn::Module {
 public:
  HybridNet() : nn::Module("HybridNet") {
    hidden = register_module("hidden", std::make_shared<nn::Linear>(4, 10));
    output = register_module("output", std::make_shared<nn::Linear>(10, 2));
  }
  Tensor forward(const Tensor& x) override {
    ++calls;
    return output->forward(relu(hidden->forward(x)));
  }
  std::shared_ptr<nn::Linear> hidden, output;
  int calls = 0;
};

TEST(JitHybridize, ForwardBodyRunsOnlyWhileTracing) {
  manual_seed(0);
  auto net = std::make_shared<HybridNet>();
  auto h = hybridize(net);
  Tensor x = randn({1, 4});
  Tensor y1 = (*h)(x);
  EXPECT_EQ(net->calls, 1);  // recorded
  Tensor y2 = (*h)(randn({1, 4}));
  EXPECT_EQ(net->calls, 1);  // the compiled graph ran
  Tensor y3 = (*h)(x);
  EXPECT_EQ(net->calls, 1);
  EXPECT_TRUE(same_bits(y1, y3));
  EXPECT_EQ(y2.shape(), (IntList{1, 2}));
  EXPECT_TRUE(same_bits(y3, net->forward(x)));  // eager, which runs the body
  EXPECT_EQ(net->calls, 2);
}

TEST(JitHybridize, NewShapeRecordsAgainAndSaysWhy) {
  auto net = std::make_shared<HybridNet>();
  auto h = hybridize(net);
  (*h)(randn({1, 4}));
  (*h)(randn({1, 4}));
  (*h)(randn({3, 4}));
  EXPECT_EQ(net->calls, 2);
  CacheInfo info = h->cache_info();
  // The batch took a second value: it is traced again as a symbol, and
  // that entry replaces the static one (automatic dynamic shapes).
  ASSERT_EQ(info.entries.size(), 1u);
  EXPECT_EQ(info.entries[0], "(float32[s0, 4]); grad mode: on; training: true");
  EXPECT_EQ(info.hits, 1u);
  EXPECT_EQ(info.misses, (std::vector<std::string>{"first call", "input 0 dim 0: 1 -> 3"}));
  EXPECT_TRUE(info.to_string().find("1 entries, 1 hits, 2 misses") != std::string::npos)
      << info.to_string();
  (*h)(randn({5, 4}));
  EXPECT_EQ(net->calls, 2);
}

TEST(JitHybridize, GradModeAndTrainingAreSeparateEntries) {
  auto net = std::make_shared<HybridNet>();
  auto h = hybridize(net);
  Tensor x = randn({2, 4});
  (*h)(x);
  {
    NoGradGuard no_grad;
    (*h)(x);
  }
  h->eval();
  (*h)(x);
  (*h)(x);
  EXPECT_EQ(net->calls, 3);
  CacheInfo info = h->cache_info();
  EXPECT_EQ(info.entries.size(), 3u);
  EXPECT_EQ(info.hits, 1u);
  EXPECT_EQ(info.misses,
            (std::vector<std::string>{"first call", "grad mode: on -> off",
                                      "grad mode: off -> on; training: true -> false"}));
}

TEST(JitHybridize, DtypeChangeIsNamed) {
  HybridFunction f = compile([](const Tensors& in) { return Tensors{sin(in[0]) + cos(in[1])}; });
  Tensor a = randn({10, 10});
  f({a, a});
  f({a, to(a, DType::Float64)});
  EXPECT_EQ(f.cache_info().misses.back(), "input 1 dtype: float32 -> float64");
}

TEST(JitHybridize, WarnsOncePastEightEntriesNamingTheChangingDim) {
  CapturedWarnings captured;
  HybridCache f(
      "compile", [](const Tensors& in) { return Tensors{relu(in[0])}; }, {}, {}, {},
      DynamicShapes::Never);
  for (int64_t batch = 1; batch <= 12; ++batch)
    f(Tensors{randn({batch, 3})}, false);
  EXPECT_EQ(f.info().entries.size(), 12u);
  ASSERT_EQ(captured.count(WarningKind::CacheGrowth), 1u) << captured.all();
  const TraceWarning* w = captured.find(WarningKind::CacheGrowth);
  EXPECT_NE(w->message.find("9 compiled entries"), std::string::npos) << w->message;
  EXPECT_NE(w->message.find("input 0 dim 0 changed 8 times"), std::string::npos) << w->message;
}

TEST(JitHybridize, CacheRunIsLookupAndRunInOneCall) {
  SignatureCache cache;
  Tensor x = randn({2});
  EXPECT_FALSE(cache.run({&x, 1}, false).has_value());  // a miss: the caller traces
  Recorder recorder;
  recorder.begin({x});
  Tensor y = exp(x);
  cache.insert(signature_of({&x, 1}, false), CompiledFunction(recorder.end({y})));
  std::optional<Tensors> out = cache.run({&x, 1}, false);
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(same_bits((*out)[0], y));
  EXPECT_EQ(cache.info().hits, 1u);
}

TEST(JitHybridize, BackwardGivesTheSameGradsAsEager) {
  manual_seed(3);
  auto eager = std::make_shared<HybridNet>();
  auto twin = std::make_shared<HybridNet>();
  twin->load_state_dict(eager->state_dict());
  auto h = hybridize(twin);
  Tensor target = tensor({int64_t(1), int64_t(0), int64_t(1)});
  for (int step = 0; step < 3; ++step) {  // the trace run, then compiled runs
    Tensor x = randn({3, 4});
    eager->zero_grad();
    h->module().zero_grad();
    backward(nn::functional::cross_entropy(eager->forward(x), target));
    backward(nn::functional::cross_entropy((*h)(x), target));
    auto expected = eager->named_parameters(), got = twin->named_parameters();
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_TRUE(grad(got[i].second).defined()) << got[i].first;
      EXPECT_TRUE(same_bits(grad(got[i].second), grad(expected[i].second)))
          << "step " << step << " " << got[i].first;
    }
  }
  EXPECT_EQ(twin->calls, 1);
}

TEST(JitHybridize, DropoutDrawsNewMasksOnEveryCompiledCall) {
  CapturedWarnings captured;
  auto h = hybridize(std::make_shared<nn::Dropout>(0.5));
  Tensor x = ones({1000});
  Tensor first = (*h)(x);
  Tensor second = (*h)(x);
  Tensor third = (*h)(x);
  EXPECT_EQ(h->cache_info().entries.size(), 1u);
  EXPECT_FALSE(same_bits(second, third));
  EXPECT_FALSE(same_bits(first, second));
  for (float v : third.to_vector<float>())
    ASSERT_TRUE(v == 0.f || v == 2.f) << v;
  EXPECT_TRUE(captured.warnings.empty()) << captured.all();
  h->eval();
  EXPECT_TRUE(same_bits((*h)(x), x));  // identity in eval mode
}

TEST(JitHybridize, BatchNormTrainingUpdatesRunningStatsWhenReplayed) {
  manual_seed(4);
  auto eager = std::make_shared<nn::BatchNorm1d>(3);
  auto twin = std::make_shared<nn::BatchNorm1d>(3);
  auto h = hybridize(twin);
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({8, 3});
    Tensor expected = eager->forward(x);
    EXPECT_TRUE(same_bits((*h)(x), expected)) << "step " << step;
    EXPECT_TRUE(same_bits(twin->running_mean, eager->running_mean)) << "step " << step;
    EXPECT_TRUE(same_bits(twin->running_var, eager->running_var)) << "step " << step;
    EXPECT_EQ(twin->num_batches_tracked.item<int64_t>(), step + 1);
  }
  EXPECT_EQ(h->cache_info().entries.size(), 1u);
  EXPECT_EQ(h->cache_info().hits, 2u);
}

TEST(JitHybridize, InsideATraceRunsEagerlySoTheOuterTraceRecordsIt) {
  CapturedWarnings captured;  // the inner weights are captured as constants
  auto net = std::make_shared<HybridNet>();
  auto h = hybridize(net);
  CompiledFunction outer =
      trace([&](const Tensors& in) { return Tensors{(*h)(in[0]) * 2}; }, {randn({1, 4})});
  EXPECT_EQ(h->cache_info().entries.size(), 0u);
  EXPECT_EQ(outer.graph().params().size(), 0u);
  EXPECT_EQ(captured.count(WarningKind::GradConstant), 4u);
  Tensor x = randn({1, 4});
  NoGradGuard no_grad;
  EXPECT_TRUE(same_bits(outer({x})[0], net->forward(x) * 2));
}

// With an entry ready, too: the entry would write BatchNorm's running
// statistics and counter back outside dispatch, unseen by the outer trace.
TEST(JitHybridize, InsideATraceAWarmEntryStillRunsEagerly) {
  auto bn = std::make_shared<nn::BatchNorm1d>(3);
  auto h = hybridize(bn);
  (*h)(randn({4, 3}));  // the entry exists now
  ASSERT_EQ(h->cache_info().entries.size(), 1u);
  CompiledFunction outer = trace([&](const Tensors& in) { return Tensors{(*h)(in[0]) + 1}; },
                                 {randn({4, 3})}, {.params = bn->state_dict()});
  EXPECT_EQ(h->cache_info().hits, 0u);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);  // the recording's eager call
  outer({randn({4, 3})});
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 3);  // the outer graph updates it
}

TEST(JitHybridize, CompiledForShowsTheEntry) {
  auto h = hybridize(std::make_shared<HybridNet>());
  Tensor x = randn({1, 4});
  EXPECT_EQ(h->compiled_for(x), nullptr);
  (*h)(x);
  ASSERT_NE(h->compiled_for(x), nullptr);
  EXPECT_EQ(h->compiled_for(x)->graph().params().size(), 4u);
  EXPECT_EQ(h->cache_info().misses.size(), 1u);  // looking is neither a hit nor a miss
}

// ---------------------------------------------------------------- HybridCache
// The one cache behind hybridize in C++ and Python.

TEST(JitHybridCache, MissRecordsAndReturnsWhatTheCodeReturnedHitRunsTheEntry) {
  int calls = 0;
  HybridCache cache("compile(f)", [&](const Tensors& in) {
    ++calls;
    return Tensors{sin(in[0]) * 2, neg(in[1])};
  });
  Tensor x = randn({3}), y = randn({3});
  EXPECT_FALSE(cache.run_cached(Tensors{x, y}, false).has_value());  // a miss, counted
  Tensors first = cache.record(Tensors{x, y}, false);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(same_bits(first[0], sin(x) * 2));
  std::optional<Tensors> hit = cache.run_cached(Tensors{x, y}, false);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(same_bits((*hit)[1], neg(y)));
  Tensors other = cache(Tensors{randn({5}), randn({5})}, false);  // miss and record in one call
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(other[0].shape(), (IntList{5}));
  CacheInfo info = cache.info();
  EXPECT_EQ(info.hits, 1u);
  EXPECT_EQ(info.misses, (std::vector<std::string>{
                             "first call", "input 0 dim 0: 3 -> 5; input 1 dim 0: 3 -> 5"}));
}

// What Python does when a number a module attribute holds changed.
TEST(JitHybridCache, InvalidateDropsTheEntriesAndTheNextMissSaysWhy) {
  int calls = 0;
  HybridCache cache("compile(f)", [&](const Tensors& in) {
    ++calls;
    return Tensors{in[0] * 2};
  });
  Tensor x = randn({3});
  cache(Tensors{x}, false);
  cache(Tensors{x}, false);
  cache.invalidate("self.scale changed from 0.5 to 2.0");
  EXPECT_EQ(cache.size(), 0u);
  cache(Tensors{x}, false);
  cache(Tensors{x}, false);
  EXPECT_EQ(calls, 2);
  CacheInfo info = cache.info();
  EXPECT_EQ(info.hits, 2u);
  EXPECT_EQ(info.misses,
            (std::vector<std::string>{"first call", "self.scale changed from 0.5 to 2.0"}));
}

TEST(JitHybridCache, ReadsTheParametersAtEachRecording) {
  Tensor w = randn({3});
  int reads = 0;
  HybridCache cache(
      "compile(scale)", [&](const Tensors& in) { return Tensors{in[0] * w}; }, {}, {},
      [&] {
        ++reads;
        return nn::NamedTensors{{"w", w}};
      });
  cache(Tensors{randn({3})}, false);
  cache(Tensors{randn({3})}, false);  // a hit: nothing read
  EXPECT_EQ(reads, 1);
  std::shared_ptr<const CompiledFunction> entry = cache.find(Tensors{randn({3})}, false);
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->graph().find_param("w"), nullptr);  // a live weight, not a constant
  cache(Tensors{randn({2, 3})}, false);
  EXPECT_EQ(reads, 2);
}

TEST(JitHybridCache, UsesAsManyInputNamesAsTheCallHasInputs) {
  HybridCache cache("compile(f)", [](const Tensors& in) { return Tensors{in[0] + 1}; },
                    {.input_names = {"x", "y", "z"}});
  Tensor x = randn({2});
  cache(Tensors{x}, false);
  EXPECT_EQ(cache.find(Tensors{x}, false)->graph().inputs()[0]->name(), "x");
}

TEST(JitHybridCache, StrictStopsTheRecordingThroughTheHandler) {
  CapturedWarnings captured;
  HybridCache cache("compile(f)",
                    [](const Tensors& in) { return Tensors{in[0] * sum(in[0]).item<double>()}; },
                    {.strict = true});
  Error e = error_of([&] { cache(Tensors{randn({2})}, false); });
  EXPECT_TRUE(mentions(e, "item()")) << e.what();
  ASSERT_EQ(captured.count(WarningKind::HostRead), 1u);
  EXPECT_TRUE(captured.warnings[0].fatal);  // a front end raises its own error here
  EXPECT_EQ(cache.size(), 0u);              // nothing kept
  EXPECT_EQ(dispatch_observer(), nullptr);  // and nothing left recording
}

TEST(JitHybridCache, InsideATraceAMissRunsEagerlyAndKeepsNothing) {
  HybridCache cache("compile(f)", [](const Tensors& in) { return Tensors{exp(in[0])}; });
  CompiledFunction outer = trace([&](const Tensors& in) { return cache(in, false); }, {randn({2})});
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(outer.graph().num_nodes(), 1u);  // the outer trace recorded exp itself
}

}  // namespace
}  // namespace kiln::jit
