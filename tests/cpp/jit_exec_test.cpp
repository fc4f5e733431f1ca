// The executor: graphs built by hand with the Graph API, lowered to a plan
// and run; every result compared bit for bit with the same ops run eagerly.
#include "kiln/jit/exec/executable.h"
#include "kiln/ops/random.h"

#include <gtest/gtest.h>

#include <thread>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/allocator.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/passes/pipeline.h"
#include "kiln/nn/container.h"
#include "kiln/nn/layers.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::jit {
namespace {

Value* add_param(Graph& g, const std::string& name, const Tensor& t) {
  return t.defined() ? g.add_param(name, meta_of(t), t) : nullptr;
}

// One layer of a Sequential as graph nodes, parameters bound to the
// module's own tensors under their state_dict names.
Value* append_layer(Graph& g, const nn::ModulePtr& m, const std::string& prefix, Value* x) {
  if (auto lin = std::dynamic_pointer_cast<nn::Linear>(m)) {
    return g
        .append(op("linear"), {x, add_param(g, prefix + "weight", lin->weight),
                               add_param(g, prefix + "bias", lin->bias)})
        ->output();
  }
  if (auto conv = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
    Attrs attrs{{"stride", conv->stride},
                {"padding", conv->padding},
                {"dilation", conv->dilation},
                {"groups", conv->groups}};
    return g
        .append(op("conv2d"),
                {x, add_param(g, prefix + "weight", conv->weight),
                 add_param(g, prefix + "bias", conv->bias)},
                attrs)
        ->output();
  }
  if (auto pool = std::dynamic_pointer_cast<nn::AvgPool2d>(m)) {
    Attrs attrs{{"kernel_size", pool->kernel_size},
                {"stride", pool->stride},
                {"padding", pool->padding},
                {"ceil_mode", pool->ceil_mode},
                {"count_include_pad", pool->count_include_pad}};
    return g.append(op("avg_pool2d"), {x}, attrs)->output();
  }
  if (std::dynamic_pointer_cast<nn::Flatten>(m)) {
    const DimList& shape = x->shape();
    return g.append(op("view"), {x}, {{"shape", DimList{shape[0], -1}}})->output();
  }
  if (std::dynamic_pointer_cast<nn::ReLU>(m)) return g.append(op("relu"), {x})->output();
  if (std::dynamic_pointer_cast<nn::Sigmoid>(m)) return g.append(op("sigmoid"), {x})->output();
  throw Error(str("append_layer: no graph for a ", m->type_name()));
}

std::shared_ptr<Graph> graph_of(const nn::Sequential& net, const IntList& input_shape) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32(input_shape), "x");
  int index = 0;
  for (const nn::ModulePtr& m : net)
    x = append_layer(*g, m, std::to_string(index++) + ".", x);
  g->set_outputs({x});
  return g;
}

std::shared_ptr<nn::Sequential> make_w1() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

std::shared_ptr<nn::Sequential> make_lenet() {
  using namespace nn;
  return std::make_shared<Sequential>(
      std::make_shared<Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<Sigmoid>(), std::make_shared<AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<Conv2d>(6, 16, IntList{5}), std::make_shared<Sigmoid>(),
      std::make_shared<AvgPool2d>(IntList{2}, IntList{2}), std::make_shared<Flatten>(),
      std::make_shared<Linear>(16 * 5 * 5, 120), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(120, 84), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(84, 10));
}

Tensor eager(nn::Sequential& net, const Tensor& x) {
  NoGradGuard no_grad;
  return net.forward(x);
}

size_t prepared_steps(const Executable& exe) {
  size_t n = 0;
  for (const Step& step : exe.plan().steps)
    n += step.prepared != nullptr;
  return n;
}

TEST(JitExec, W1MatchesEagerBitwise) {
  auto net = make_w1();
  for (int64_t batch : {1, 64}) {
    Executable exe(graph_of(*net, {batch, 512}));
    EXPECT_EQ(prepared_steps(exe), 3u) << "every linear gets prepared state";
    Tensor x = randn({batch, 512});
    std::vector<Tensor> y = exe.run({x});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(bitwise_equal(y[0], eager(*net, x))) << "batch " << batch;
    EXPECT_FALSE(y[0].requires_grad());
  }
}

TEST(JitExec, LeNetMatchesEagerBitwise) {
  auto net = make_lenet();
  for (int64_t batch : {1, 64}) {
    Executable exe(graph_of(*net, {batch, 1, 28, 28}));
    EXPECT_EQ(prepared_steps(exe), 5u) << "two convolutions and three linears";
    Tensor x = rand({batch, 1, 28, 28});
    EXPECT_TRUE(bitwise_equal(exe.run({x})[0], eager(*net, x))) << "batch " << batch;
  }
}

// Each thread calls with its own input and checks every result against the
// one-thread result for that input.
void expect_threads_agree(const Executable& exe, const IntList& input_shape) {
  constexpr int kThreads = 8, kCalls = 1000;
  std::vector<Tensor> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(randn(input_shape));
    expected.push_back(exe.run({inputs.back()})[0]);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        Tensor y = exe.run({inputs[size_t(t)]})[0];
        if (!bitwise_equal(y, expected[size_t(t)])) ++mismatches[size_t(t)];
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
  EXPECT_LE(exe.num_workspaces(), size_t(kThreads));
}

TEST(JitExec, EightThreadsAgreeWithOneThreadMatvec) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {1, 512}));  // batch 1: kiln's matvec kernel
  expect_threads_agree(exe, {1, 512});
}

TEST(JitExec, EightThreadsAgreeWithOneThreadPackedGemm) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {8, 512}));  // kiln's GEMM on weights packed once
  expect_threads_agree(exe, {8, 512});
}

TEST(JitExec, InputErrorsNameTheInputExpectedAndGot) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {1, 512}));
  Error count = error_of([&] { exe.run({}); });
  EXPECT_TRUE(mentions(count, "expected 1 inputs, got 0")) << count.what();
  Error shape = error_of([&] { exe.run({randn({2, 512})}); });
  EXPECT_TRUE(mentions(shape, "input 0 ('x')")) << shape.what();
  EXPECT_TRUE(mentions(shape, "[1, 512]") && mentions(shape, "[2, 512]")) << shape.what();
  Error dtype = error_of([&] { exe.run({zeros({1, 512}, DType::Float64)}); });
  EXPECT_EQ(dtype.kind(), ErrorKind::Type);
  EXPECT_TRUE(mentions(dtype, "float32") && mentions(dtype, "float64")) << dtype.what();
  Error undefined = error_of([&] { exe.run({Tensor()}); });
  EXPECT_TRUE(mentions(undefined, "undefined")) << undefined.what();
}

TEST(JitExec, NonContiguousInputsMatchEager) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {3, 512}));
  Tensor transposed = transpose(randn({512, 3}), 0, 1);
  Tensor every_other = slice(randn({3, 1024}), 1, 0, std::nullopt, 2);
  Tensor broadcast = expand(randn({1, 512}), {3, 512});
  for (const Tensor& x : {transposed, every_other, broadcast}) {
    ASSERT_FALSE(x.is_contiguous());
    EXPECT_TRUE(bitwise_equal(exe.run({x})[0], eager(*net, x)));
    Tensor dense = clone(x);  // and the fast path still right after the slow one
    EXPECT_TRUE(bitwise_equal(exe.run({dense})[0], eager(*net, dense)));
  }
}

// y = relu(transpose(x))[1:3] + expand(b); z = view(y) @ w; outputs z and a
// view of y, so views sit over an input, the arena and a parameter.
struct ViewGraph {
  Tensor b = randn({1, 4}), w = randn({8, 5});
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();

  ViewGraph() {
    Graph& g = *graph;
    Value* x = g.add_input(f32({4, 6}), "x");
    Value* bias = g.add_param("b", f32({1, 4}), b);
    Value* weight = g.add_param("w", f32({8, 5}), w);
    Value* xt = g.append(op("transpose"), {x}, {{"dim0", 0}, {"dim1", 1}})->output();
    Value* r = g.append(op("relu"), {xt})->output();
    Value* part = g.append(op("slice"), {r}, {{"dim", 0}, {"start", 1}, {"end", 3}})->output();
    Value* wide = g.append(op("expand"), {bias}, {{"size", IntList{2, 4}}})->output();
    Value* y = g.append(op("add"), {part, wide})->output();
    Value* flat = g.append(op("view"), {y}, {{"shape", IntList{1, 8}}})->output();
    Value* z = g.append(op("matmul"), {flat, weight})->output();
    Value* yt = g.append(op("transpose"), {y}, {{"dim0", 0}, {"dim1", 1}})->output();
    g.set_outputs({z, yt});
  }

  std::vector<Tensor> eager(const Tensor& x) const {
    Tensor y = slice(relu(transpose(x, 0, 1)), 0, 1, 3) + expand(b, {2, 4});
    return {matmul(view(y, {1, 8}), w), transpose(y, 0, 1)};
  }
};

TEST(JitExec, ViewsInsideTheGraphMatchEager) {
  ViewGraph vg;
  Executable exe(vg.graph);
  for (const Tensor& x : {randn({4, 6}), transpose(randn({6, 4}), 0, 1)}) {
    std::vector<Tensor> got = exe.run({x}), want = vg.eager(x);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(bitwise_equal(got[0], want[0]));
    EXPECT_TRUE(bitwise_equal(got[1], want[1]));
    EXPECT_TRUE(got[1].is_contiguous()) << "a view output is returned as a fresh copy";
  }
}

TEST(JitExec, ViewOfAStridedInputFailsAsInEager) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({4, 6}), "x");
  g->set_outputs({g->append(op("view"), {x}, {{"shape", IntList{24}}})->output()});
  Executable exe(g);
  Tensor strided = transpose(randn({6, 4}), 0, 1);
  std::string eager_error = error_text([&] { view(strided, {24}); });
  EXPECT_EQ(error_text([&] { exe.run({strided}); }), eager_error);
  Tensor dense = randn({4, 6});
  EXPECT_TRUE(bitwise_equal(exe.run({dense})[0], view(dense, {24})));
}

TEST(JitExec, OutputsNeverAliasInputsOrParameters) {
  auto g = std::make_shared<Graph>();
  Tensor weight = randn({3});
  Value* x = g->add_input(f32({3}), "x");
  Value* w = g->add_param("w", f32({3}), weight);
  Value* r = g->append(op("relu"), {x})->output();
  g->set_outputs({x, w, r, r});
  Executable exe(g);
  Tensor input = randn({3});
  std::vector<Tensor> y = exe.run({input});
  ASSERT_EQ(y.size(), 4u);
  EXPECT_TRUE(bitwise_equal(y[0], input));
  EXPECT_TRUE(bitwise_equal(y[1], weight));
  EXPECT_TRUE(bitwise_equal(y[2], relu(input)));
  EXPECT_TRUE(bitwise_equal(y[3], relu(input)));
  EXPECT_FALSE(y[0].is_alias_of(input));
  EXPECT_FALSE(y[1].is_alias_of(weight));
  EXPECT_FALSE(y[2].is_alias_of(y[3]));
  fill_(y[1], 0.0);
  EXPECT_TRUE(bitwise_equal(exe.run({input})[1], weight)) << "the parameter is untouched";
}

TEST(JitExec, ParameterUpdatesInPlaceAreSeen) {
  for (int64_t batch : {1, 64}) {  // matvec reads the weights; the GEMM packs them
    auto net = make_w1();
    Executable exe(graph_of(*net, {batch, 512}));
    Tensor x = randn({batch, 512});
    Tensor before = exe.run({x})[0];
    auto first = net->at<nn::Linear>(0);
    {
      NoGradGuard no_grad;
      mul_(first->weight, 0.5);  // what an optimizer step does
    }
    Tensor after = exe.run({x})[0];
    EXPECT_FALSE(bitwise_equal(after, before)) << "batch " << batch;
    EXPECT_TRUE(bitwise_equal(after, eager(*net, x))) << "batch " << batch;
  }
}

// At batch 64 the first two linears run kiln's GEMM and keep their weights
// packed (the plan says which); the 2-column head reads its weight as it is.
// Unfused (linear) and fused (linear_act after the passes) alike.
TEST(JitExec, WeightsArePackedOnceAndFollowTheirVersion) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "unfused");
    auto net = make_w1();
    std::shared_ptr<Graph> graph = graph_of(*net, {64, 512});
    if (fused) optimize(*graph);
    Executable exe(graph);
    const std::string text = exe.plan().to_string();
    size_t packed = 0;
    for (const Step& step : exe.plan().steps)
      packed += step.packed_held >= 0;
    EXPECT_EQ(packed, 2u) << text;
    EXPECT_NE(text.find(fused ? "linear_act" : "linear"), std::string::npos) << text;
    EXPECT_NE(text.find("[packs fixed "), std::string::npos) << text;
    Tensor x = randn({64, 512});
    for (int round = 0; round < 3; ++round) {
      EXPECT_TRUE(bitwise_equal(exe.run({x})[0], eager(*net, x))) << "round " << round;
      NoGradGuard no_grad;
      copy_(net->at<nn::Linear>(2)->weight, randn({128, 256}));  // a load_state_dict
    }
  }
}

TEST(JitExec, MultiOutputOps) {
  auto g = std::make_shared<Graph>();
  Tensor weight = randn({6}), bias = randn({6});
  Value* x = g->add_input(f32({4, 6}), "x");
  Node* pieces = g->append(op("split"), {x}, {{"split_size", 4}, {"dim", 1}});
  Node* norm = g->append(
      op("layer_norm"),
      {x, g->add_param("ln.weight", f32({6}), weight), g->add_param("ln.bias", f32({6}), bias)},
      {{"normalized_shape", IntList{6}}});
  Value* sum = g->append(op("add"), {pieces->output(0), norm->output(1)})->output();
  g->set_outputs({pieces->output(1), norm->output(0), norm->output(2), sum});
  Executable exe(g);
  Tensor input = randn({4, 6});
  std::vector<Tensor> got = exe.run({input});
  std::vector<Tensor> parts = split(input, 4, 1);
  std::vector<Tensor> ln =
      dispatch(op("layer_norm"), {input, weight, bias}, {{"normalized_shape", IntList{6}}});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(bitwise_equal(got[0], parts[1]));
  EXPECT_TRUE(bitwise_equal(got[1], ln[0]));
  EXPECT_TRUE(bitwise_equal(got[2], ln[2]));
  EXPECT_TRUE(bitwise_equal(got[3], parts[0] + ln[1]));
}

TEST(JitExec, DropoutDrawsPerCallLikeEager) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({64}), "x");
  Node* drop = g->append(op("dropout"), {x}, {{"p", 0.5}, {"train", true}});
  g->set_outputs({drop->output(0), drop->output(1)});
  Executable exe(g);
  Tensor input = randn({64});
  manual_seed(11);
  std::vector<Tensor> eager1 = dispatch(op("dropout"), {input}, {{"p", 0.5}});
  std::vector<Tensor> eager2 = dispatch(op("dropout"), {input}, {{"p", 0.5}});
  manual_seed(11);
  std::vector<Tensor> compiled1 = exe.run({input}), compiled2 = exe.run({input});
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(bitwise_equal(compiled1[k], eager1[k]));
    EXPECT_TRUE(bitwise_equal(compiled2[k], eager2[k]));
  }
  EXPECT_FALSE(bitwise_equal(compiled1[1], compiled2[1])) << "each call draws anew";
}

TEST(JitExec, BatchNormTrainingUpdatesRunningStatsLikeEager) {
  auto make_stats = [] { return std::vector<Tensor>{zeros({3}), ones({3})}; };
  std::vector<Tensor> eager_stats = make_stats(), compiled_stats = make_stats();
  Tensor input = randn({5, 3});
  const Attrs attrs{{"training", true}, {"momentum", 0.1}};
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({5, 3}), "x");
  Value* mean = g->add_param("bn.running_mean", f32({3}), compiled_stats[0]);
  Value* var = g->add_param("bn.running_var", f32({3}), compiled_stats[1]);
  Node* bn = g->append(op("batch_norm"), {x, nullptr, nullptr, mean, var}, attrs);
  g->set_outputs({bn->output(0)});
  Executable exe(g);
  for (int call = 0; call < 2; ++call) {
    uint64_t version = compiled_stats[0].version();
    Tensor y = exe.run({input})[0];
    Tensor want = dispatch(op("batch_norm"),
                           {input, Tensor(), Tensor(), eager_stats[0], eager_stats[1]}, attrs)[0];
    EXPECT_TRUE(bitwise_equal(y, want));
    EXPECT_TRUE(bitwise_equal(compiled_stats[0], eager_stats[0])) << "call " << call;
    EXPECT_TRUE(bitwise_equal(compiled_stats[1], eager_stats[1])) << "call " << call;
    EXPECT_GT(compiled_stats[0].version(), version) << "the in-place write is visible";
  }
}

void expect_run_into_allocates_nothing(int64_t batch) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {batch, 512}));
  Tensor x = randn({batch, 512}), y = empty({batch, 2});
  exe.run_into(std::vector<Tensor>{x}, std::vector<Tensor>{y});
  const AllocatorStats before = allocator_stats();
  for (int call = 0; call < 1000; ++call)
    exe.run_into(std::vector<Tensor>{x}, std::vector<Tensor>{y});
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.total_allocations, before.total_allocations);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_TRUE(bitwise_equal(y, eager(*net, x)));
  const int64_t allocations = allocator_stats().total_allocations;
  for (int call = 0; call < 100; ++call)
    exe.run({x});
  EXPECT_EQ(allocator_stats().total_allocations, allocations + 100)
      << "run() allocates its one result and nothing else";
}

TEST(JitExec, RunIntoAllocatesNothing) {
  for (int64_t batch : {1, 64}) {
    SCOPED_TRACE(str("batch ", batch));
    expect_run_into_allocates_nothing(batch);
  }
}

// run_into writes its outputs in place: their version moves, as for any
// in-place write, so a copy kept by version (Note [Eager packed weights])
// is not reused. It did not move before.
TEST(JitExec, RunIntoBumpsItsOutputsVersions) {
  auto net = make_w1();
  Executable exe(graph_of(*net, {8, 512}));
  Tensor x = randn({8, 512}), y = empty({8, 2});
  const uint64_t before = y.version();
  exe.run_into(std::vector<Tensor>{x}, std::vector<Tensor>{y});
  EXPECT_GT(y.version(), before);
  EXPECT_EQ(x.version(), 0u) << "inputs are only read";
}

TEST(JitExec, RunIntoNonContiguousOutputs) {
  ViewGraph vg;
  Executable exe(vg.graph);
  Tensor x = randn({4, 6});
  Tensor z = transpose(empty({5, 1}), 0, 1), yt = transpose(empty({2, 4}), 0, 1);
  exe.run_into(std::vector<Tensor>{x}, std::vector<Tensor>{z, yt});
  std::vector<Tensor> want = vg.eager(x);
  EXPECT_TRUE(bitwise_equal(z, want[0]));
  EXPECT_TRUE(bitwise_equal(yt, want[1]));
}

TEST(JitExec, RunIntoRejectsBadOutputs) {
  ViewGraph vg;
  Executable exe(vg.graph);
  Tensor x = randn({4, 6});
  std::vector<Tensor> in{x};
  Error shape = error_of([&] { exe.run_into(in, std::vector<Tensor>{empty({1, 5}), empty({3})}); });
  EXPECT_TRUE(mentions(shape, "output 1 expected shape [4, 2], got [3]")) << shape.what();
  Tensor buffer = empty({13});
  Tensor first = view(slice(buffer, 0, 0, 5), {1, 5}), second = view(slice(buffer, 0, 5), {4, 2});
  Error alias = error_of([&] { exe.run_into(in, std::vector<Tensor>{first, second}); });
  EXPECT_TRUE(mentions(alias, "output 1 shares memory with an earlier output")) << alias.what();
  Tensor z = empty({1, 5});
  // A [4, 2] window on the first elements of t's memory.
  auto window = [](const Tensor& t) { return view(slice(view(t, {t.numel()}), 0, 0, 8), {4, 2}); };
  Error overlap = error_of([&] { exe.run_into(in, std::vector<Tensor>{z, window(x)}); });
  EXPECT_TRUE(mentions(overlap, "shares memory with an input")) << overlap.what();
  Error param = error_of([&] { exe.run_into(in, std::vector<Tensor>{z, window(vg.w)}); });
  EXPECT_TRUE(mentions(param, "parameter")) << param.what();
}

TEST(JitExec, PlanPlacesEveryValue) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({2, 3}), "x");
  Value* w = g->add_param("w", f32({4, 3}), randn({4, 3}));
  Value* h = g->append(op("linear"), {x, w})->output();
  Value* r = g->append(op("relu"), {h})->output();
  Value* t = g->append(op("transpose"), {r}, {{"dim0", 0}, {"dim1", 1}})->output();
  Value* s = g->append(op("sigmoid"), {t})->output();
  g->set_outputs({s, r});
  Executable exe(g);
  EXPECT_EQ(exe.plan().to_string(),
            "slots:\n"
            "  s0 %0 float32[2, 3]: input 0 +0\n"
            "  s1 %1 float32[4, 3]: fixed 0 +0\n"
            "  s2 %2 float32[2, 4]: arena buffer 0 +0 (bytes [0, 32), steps 0..1)\n"
            "  s3 %3 float32[2, 4]: output 1 +0\n"
            "  s4 %4 float32[4, 2] = transpose(s3): output 1 +0\n"
            "  s5 %5 float32[4, 2]: output 0 +0\n"
            "steps:\n"
            "  0 linear(s0, s1) -> s2 [prepared]\n"
            "  1 relu(s2) -> s3\n"
            "  2 sigmoid(s4) -> s5\n"
            "arena: 64 bytes (unshared: 64 bytes)\n");
  Tensor input = randn({2, 3});
  std::vector<Tensor> y = exe.run({input});
  Tensor r_eager = relu(linear(input, g->find_param("w")->data(), Tensor()));
  EXPECT_TRUE(bitwise_equal(y[0], sigmoid(transpose(r_eager, 0, 1))));
  EXPECT_TRUE(bitwise_equal(y[1], r_eager));
}

TEST(JitExec, RejectsGraphsThatCannotRun) {
  auto unbound = std::make_shared<Graph>();
  Value* x = unbound->add_input(f32({2, 3}));
  Value* w = unbound->add_param("fc.weight", f32({4, 3}));
  unbound->set_outputs({unbound->append(op("linear"), {x, w})->output()});
  Error e = error_of([&] { Executable exe(unbound); });
  EXPECT_TRUE(mentions(e, "'fc.weight'") && mentions(e, "no tensor bound")) << e.what();

  auto mistyped = std::make_shared<Graph>();
  Value* y = mistyped->add_input(f32({2, 3}));
  Node* r = mistyped->append_typed(op("relu"), {y}, {}, {f32({3, 2})});
  mistyped->set_outputs({r->output()});
  Error t = error_of([&] { Executable exe(mistyped); });
  EXPECT_TRUE(mentions(t, "relu") && mentions(t, "[3, 2]") && mentions(t, "[2, 3]")) << t.what();

  // A value of another graph never gets into one: the Graph API refuses it.
  Graph other;
  Value* foreign = other.add_input(f32({2}));
  auto borrowing = std::make_shared<Graph>();
  Error b = error_of([&] { borrowing->append(op("relu"), {foreign}); });
  EXPECT_TRUE(mentions(b, "value of another graph")) << b.what();
  Error o = error_of([&] { borrowing->set_outputs({foreign}); });
  EXPECT_TRUE(mentions(o, "another graph")) << o.what();
}

}  // namespace
}  // namespace kiln::jit
