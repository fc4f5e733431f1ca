// Tracing eager code into a graph and running it: what is recorded (nodes,
// inputs, named parameters, constants, in-place writes), and that the
// compiled function computes what the eager code computes.
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/interpreter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "jit_test_util.h"
#include "kiln/kiln.h"

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

size_t count_nodes(const Graph& g, const std::string& op_name) {
  return count_op_runs(g, op_name);
}

std::shared_ptr<nn::Sequential> make_mlp() {  // W1 of SCENARIOS.md
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

std::shared_ptr<nn::Sequential> make_lenet() {  // W2 of SCENARIOS.md
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<nn::Sigmoid>(), std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<nn::Conv2d>(6, 16, IntList{5}), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(16 * 5 * 5, 120), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::Linear>(120, 84), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::Linear>(84, 10));
}

TEST(JitTrace, MlpGraphHasNamedParamsAndMatchesEagerBitwise) {
  manual_seed(0);
  auto net = make_mlp();
  Tensor x = randn({64, 512});
  CompiledFunction f = trace(*net, x);

  const Graph& g = f.graph();
  ASSERT_EQ(g.inputs().size(), 1u);
  // linear -> relu twice became linear_act (the fuse_activations pass), then a linear.
  EXPECT_EQ(count_nodes(g, "linear_act"), 2u);
  EXPECT_EQ(count_nodes(g, "linear"), 1u);
  EXPECT_EQ(count_nodes(g, "relu"), 0u);
  std::vector<std::string> names;
  for (const Value* p : g.params())
    names.push_back(p->name());
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                             "4.bias"}));
  EXPECT_TRUE(g.find_param("0.weight")->data().is_same(net->state_dict()[0].second));
  EXPECT_TRUE(g.constants().empty());

  Tensor x2 = randn({64, 512});
  EXPECT_TRUE(same_bits(f({x2})[0], net->forward(x2)));
}

TEST(JitTrace, LeNetTracedMatchesEager) {
  manual_seed(1);
  auto lenet = make_lenet();
  Tensor x = rand({1, 1, 28, 28});
  CompiledFunction f = trace(*lenet, x);
  EXPECT_EQ(count_nodes(f.graph(), "conv2d_act"), 2u);  // conv2d -> sigmoid, fused
  EXPECT_EQ(count_nodes(f.graph(), "linear_act"), 2u);
  EXPECT_EQ(count_nodes(f.graph(), "sigmoid"), 0u);
  EXPECT_EQ(count_nodes(f.graph(), "avg_pool2d"), 2u);
  Tensor x2 = rand({1, 1, 28, 28});
  Tensor y = f({x2})[0];
  EXPECT_EQ(y.shape(), (IntList{1, 10}));
  EXPECT_TRUE(same_bits(y, lenet->forward(x2)));
}

TEST(JitTrace, ParametersAreBoundNotCopied) {
  manual_seed(2);
  nn::Linear fc(3, 2);
  Tensor x = randn({4, 3});
  CompiledFunction f = trace(fc, x);
  Tensor before = f({x})[0];
  {
    NoGradGuard no_grad;
    mul_(fc.weight, 2.0);  // an optimizer step does the same
  }
  Tensor after = f({x})[0];
  EXPECT_FALSE(same_bits(before, after));
  EXPECT_TRUE(same_bits(after, fc.forward(x)));
}

TEST(JitTrace, AbsentBiasIsAnAbsentInput) {
  nn::Linear fc(3, 2, /*bias=*/false);
  CompiledFunction f = trace(fc, randn({1, 3}));
  ASSERT_EQ(count_nodes(f.graph(), "linear"), 1u);
  const Node* linear = f.graph().nodes()[0];
  EXPECT_EQ(linear->input(2), nullptr);
  EXPECT_EQ(f.graph().params().size(), 1u);  // the absent bias is no parameter
}

// SCENARIOS.md §4: fancy_func on constant inputs gives 10 from a graph of
// adds (constant folding, issue 6, turns it into the constant itself).
Tensors fancy_func(const Tensors& in) {
  auto add = [](const Tensor& a, const Tensor& b) { return a + b; };
  Tensor e = add(in[0], in[1]);
  Tensor f = add(in[2], in[3]);
  return {add(e, f)};
}

TEST(JitTrace, FancyFuncOnConstantInputsGivesTen) {
  Tensors in = {tensor({1.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})};
  CompiledFunction f = trace(fancy_func, in);
  EXPECT_EQ(count_nodes(f.graph(), "add"), 3u);
  EXPECT_EQ(f(in)[0].item<double>(), 10.0);
  EXPECT_EQ(f({tensor({2.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})})[0].item<double>(),
            11.0);
}

TEST(JitTrace, FunctionWithoutInputsComputesFromConstants) {
  CapturedWarnings captured;
  CompiledFunction f = trace(
      [](const Tensors&) {
        Tensors in = {tensor({1.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})};
        return fancy_func(in);
      },
      {}, {}, {.optimize = false});  // as recorded (the passes fold it: jit_passes_test)
  EXPECT_TRUE(f.graph().inputs().empty());
  EXPECT_EQ(f.graph().constants().size(), 4u);
  EXPECT_EQ(count_nodes(f.graph(), "add"), 3u);
  EXPECT_EQ(f({})[0].item<double>(), 10.0);
  EXPECT_TRUE(captured.warnings.empty()) << captured.all();  // constant by design
}

TEST(JitTrace, OutputsMayBeInputsParamsOrConstants) {
  CapturedWarnings captured;
  nn::NamedTensors params = {{"w", ones({2})}};
  Tensor c = full({2}, 7.0);
  CompiledFunction f = trace(
      [&](const Tensors& in) {
        return Tensors{in[0], params[0].second, c};
      },
      {zeros({3})}, {.params = params});
  Tensor x = randn({3});
  Tensors out = f({x});
  // The compiled plan returns fresh tensors (copies), so a caller writing
  // into a result never writes into an input or a weight.
  EXPECT_TRUE(same_bits(out[0], x));
  EXPECT_TRUE(same_bits(out[1], params[0].second));
  EXPECT_FALSE(out[1].is_alias_of(params[0].second));
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{7, 7}));
  EXPECT_FALSE(out[2].is_same(c));  // a constant is a copy (Note [Constants are copies])
  EXPECT_NE(captured.find(WarningKind::ConstantOutput, "output 2"), nullptr) << captured.all();
}

// x = relu(x); x.add_(1); x *= 2, recorded as values: the graph is pure.
TEST(JitTrace, InPlaceOpsAreRecordedFunctionally) {
  auto fn = [](const Tensors& in) {
    Tensor x = relu(in[0]);
    add_(x, 1);
    mul_(x, 2);
    return Tensors{x};
  };
  CompiledFunction f = trace(fn, {randn({5})});
  EXPECT_EQ(count_nodes(f.graph(), "relu"), 1u);
  EXPECT_EQ(count_nodes(f.graph(), "add"), 1u);
  EXPECT_EQ(count_nodes(f.graph(), "mul"), 1u);
  EXPECT_TRUE(f.state_updates().empty());
  Tensor x = randn({5});
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
}

TEST(JitTrace, InPlaceBroadcastAndCastIntoOutAreExplicitNodes) {
  auto fn = [](const Tensors& in) {
    Tensor acc = zeros({2, 3}, DType::Float64);
    copy_(acc, in[0]);  // float32 [3] into float64 [2, 3]
    add_(acc, in[0]);
    return Tensors{acc};
  };
  CompiledFunction f = trace(fn, {randn({3})});
  EXPECT_EQ(count_nodes(f.graph(), "expand"), 1u);
  EXPECT_GE(count_nodes(f.graph(), "cast"), 1u);
  Tensor x = randn({3});
  Tensor y = f({x})[0];
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_TRUE(same_bits(y, fn({x})[0]));
}

// acc = zeros; acc += x: the constant is the zeros from before the write.
TEST(JitTrace, ConstantsKeepTheValueFromBeforeAnInPlaceWrite) {
  auto fn = [](const Tensors& in) {
    Tensor acc = zeros({3});
    add_(acc, in[0]);
    add_(acc, in[0]);
    return Tensors{acc};
  };
  CompiledFunction f = trace(fn, {randn({3})});
  Tensor x = tensor({1.f, 2.f, 3.f});
  EXPECT_EQ(f({x})[0].to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

// The caller's tensor changes as it does in eager code.
TEST(JitTrace, InPlaceWritesIntoInputsAreWrittenBack) {
  auto fn = [](const Tensors& in) {
    add_(in[0], 1);
    return Tensors{mul(in[0], 2)};
  };
  CompiledFunction f = trace(fn, {zeros({2})});
  ASSERT_EQ(f.state_updates().size(), 1u);
  EXPECT_EQ(f.state_updates()[0].target, ValueKind::Input);
  EXPECT_EQ(f.graph().outputs().size(), 2u);
  Tensor x = tensor({1.f, 5.f});
  Tensors out = f({x});
  ASSERT_EQ(out.size(), 1u);  // the state update is not returned
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4, 12}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 6}));
}

// SCENARIOS.md §4: trace() optimizes by default, so fancy_func on constants
// compiles to the constant 10, and the report says what the passes did.
TEST(JitTrace, TracedGraphsGoThroughThePasses) {
  CompiledFunction f = trace(
      [](const Tensors&) {
        Tensors in = {tensor({1.f}), tensor({2.f}), tensor({3.f}), tensor({4.f})};
        return fancy_func(in);
      },
      {});
  EXPECT_EQ(f.graph().num_nodes(), 0u);
  ASSERT_EQ(f.graph().constants().size(), 1u);
  EXPECT_EQ(f({})[0].item<double>(), 10.0);
  EXPECT_NE(f.report().to_string().find("constant_fold"), std::string::npos)
      << f.report().to_string();
}

TEST(JitTrace, CompileReportHasTheMemoryPlanAndTimes) {
  auto net = make_mlp();
  CompiledFunction f = trace(*net, randn({1, 512}));
  const CompileReport& report = f.compile_report();
  EXPECT_EQ(report.passes.passes.size(), 8u);  // the default pipeline's passes
  EXPECT_EQ(report.passes.count("fuse linear + relu"), 2);
  EXPECT_GT(report.steps, 0u);
  EXPECT_GT(report.planned_bytes, 0);
  EXPECT_LE(report.planned_bytes, report.unshared_bytes);
  EXPECT_GT(report.record_seconds, 0);
  EXPECT_GT(report.lower_seconds, 0);
  EXPECT_NE(report.to_string().find("bytes planned for intermediates"), std::string::npos)
      << report.to_string();
}

TEST(JitTrace, WrappedNumbersAreWrappedConstants) {
  auto fn = [](const Tensors& in) { return Tensors{in[0] + 2}; };
  Tensor x = tensor({1, 2}, DType::Int32);
  CompiledFunction f = trace(fn, {x}, {}, {.optimize = false});  // as recorded
  ASSERT_EQ(f.graph().constants().size(), 1u);
  EXPECT_TRUE(f.graph().constants()[0]->type().wrapped_number);
  Tensor y = f({tensor({5, 6}, DType::Int32)})[0];
  EXPECT_EQ(y.dtype(), DType::Int32);  // a number does not promote int32
  EXPECT_EQ(y.to_vector<int>(), (std::vector<int>{7, 8}));
}

TEST(JitTrace, DetachedTensorHoldsTheSameValue) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    return Tensors{detach(y) * 3};
  };
  CompiledFunction f = trace(fn, {randn({4})});
  EXPECT_TRUE(f.graph().constants().size() == 1u);  // only the 3
  Tensor x = randn({4});
  EXPECT_TRUE(same_bits(f({x})[0], fn({x})[0]));
}

TEST(JitTrace, CompiledFunctionChecksItsInputs) {
  CompiledFunction f =
      trace([](const Tensors& in) { return Tensors{relu(in[0])}; }, {randn({2, 4})});
  Error e = error_of([&] { f({randn({3, 4})}); });
  EXPECT_TRUE(mentions(e, "[3, 4]")) << e.what();
  EXPECT_TRUE(mentions(e, "traced for float32[2, 4]")) << e.what();
  EXPECT_TRUE(mentions(error_of([&] { f({}); }), "expected 1 inputs, got 0"));
  EXPECT_TRUE(mentions(error_of([&] { CompiledFunction().graph(); }), "empty"));
}

TEST(JitTrace, RecorderIsDrivenStepByStep) {
  Tensor x = randn({3});
  Tensor w = randn({3});
  Recorder recorder;
  recorder.begin({x}, {{"w", w}});
  EXPECT_TRUE(recorder.recording());
  EXPECT_NE(dispatch_observer(), nullptr);
  Tensor y = x * w + 1;  // any code calling ops: here, C++; from Python, Python
  Capture capture = recorder.end({y});
  EXPECT_EQ(dispatch_observer(), nullptr);
  EXPECT_EQ(capture.num_outputs, 1u);
  EXPECT_EQ(count_nodes(*capture.graph, "mul"), 1u);
  EXPECT_EQ(count_nodes(*capture.graph, "add"), 1u);
  EXPECT_EQ(capture.graph->find_param("w")->data().impl(), w.impl());

  CompiledFunction f(std::move(capture));
  Tensor x2 = randn({3});
  EXPECT_TRUE(same_bits(f({x2})[0], x2 * w + 1));
}

TEST(JitTrace, OneRecordingPerThread) {
  Recorder outer;
  outer.begin({});
  Recorder inner;
  EXPECT_TRUE(mentions(error_of([&] { inner.begin({}); }), "already recording"));
  outer.abort();
  EXPECT_EQ(dispatch_observer(), nullptr);
  EXPECT_EQ(trace_hook(), nullptr);
}

TEST(JitTrace, ExceptionInTracedCodeStopsTheRecording) {
  auto fn = [](const Tensors& in) -> Tensors { return {matmul(in[0], in[0])}; };
  EXPECT_TRUE(mentions(error_of([&] { trace(fn, {randn({2, 3})}); }), "matmul"));
  EXPECT_EQ(dispatch_observer(), nullptr);
}

TEST(JitTrace, CompiledFunctionCalledInsideATraceIsInlined) {
  CompiledFunction inner =
      trace([](const Tensors& in) { return Tensors{sin(in[0]) + cos(in[0])}; }, {randn({3})});
  CompiledFunction outer =
      trace([&](const Tensors& in) { return Tensors{relu(inner(in)[0])}; }, {randn({3})});
  EXPECT_EQ(count_nodes(outer.graph(), "sin"), 1u);
  EXPECT_EQ(count_nodes(outer.graph(), "relu"), 1u);
}

TEST(JitTrace, CompiledFunctionRunsFromManyThreads) {
  manual_seed(5);
  auto net = make_mlp();
  CompiledFunction f = trace(*net, randn({4, 512}));
  Tensor x = randn({4, 512});
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = net->forward(x);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      NoGradGuard no_grad;  // grad mode is per thread
      for (int i = 0; i < 50; ++i)
        mismatches += !same_bits(f({x})[0], expected);
    });
  }
  for (std::thread& t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(JitTrace, DefaultWarningHandlerPrintsEachWarningOnce) {
  WarningHandler previous = set_warning_handler(nullptr);  // the default
  testing::internal::CaptureStderr();
  TraceWarning w = make_warning(WarningKind::HostRead, "item() on a test value (unique 7f3a)");
  warn(w);
  warn(w);
  std::string printed = testing::internal::GetCapturedStderr();
  set_warning_handler(previous);
  EXPECT_EQ(printed, "kiln: warning: item() on a test value (unique 7f3a)\n");
}

// A runner that counts its calls, standing in for jit/exec's Executable.
class CountingRunner final : public GraphRunner {
 public:
  explicit CountingRunner(std::shared_ptr<const Graph> g) : interpreter_(std::move(g)) {}
  std::vector<Tensor> run_unchecked(std::span<const Tensor> inputs) const override {
    ++calls;
    return interpreter_.run_unchecked(inputs);
  }
  mutable int calls = 0;

 private:
  Interpreter interpreter_;
};

TEST(JitTrace, RunnerServesCallsAutogradNeedNotSee) {
  nn::Linear fc(3, 2);
  CompiledFunction f = trace(fc, randn({1, 3}));
  auto runner = std::make_shared<CountingRunner>(f.shared_graph());
  f.set_runner(runner);
  Tensor x = randn({1, 3});
  f({x});  // grad mode on, weights require grad: replayed through dispatch
  EXPECT_EQ(runner->calls, 0);
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(f({x})[0], fc.forward(x)));
  }
  EXPECT_EQ(runner->calls, 1);

  std::shared_ptr<CountingRunner> made;
  set_runner_factory([&](std::shared_ptr<const Graph> g) {
    made = std::make_shared<CountingRunner>(std::move(g));
    return made;
  });
  CompiledFunction g = trace(fc, randn({1, 3}));
  set_runner_factory(nullptr);
  NoGradGuard no_grad;
  g({x});
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->calls, 1);
}

}  // namespace
}  // namespace kiln::jit
