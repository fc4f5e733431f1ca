// Every known way a traced graph can diverge from the eager code it came
// from, each asserting that kiln reports it: a warning by default (captured
// here by a test handler) and a kiln::Error with RecordOptions{.strict = true}.
// A new footgun found later gets a test here (tinygrad keeps such a list).
//
// What tracing records instead of reporting, and so needs no report (tested
// at the end): dropout and other random ops, shape-dependent code under
// hybridize's signature guards, in-place writes into inputs and parameters.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/jit/compile/hybridize.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/kiln.h"

namespace kiln::jit {
namespace {

using Tensors = std::vector<Tensor>;

// Traces `fn` twice: without strict, expecting a warning of `kind` that
// mentions `text`; with strict, expecting an error mentioning it. Returns
// the first warning of that kind (for checking its location).
TraceWarning expect_reported(const TracedFn& fn, const Tensors& inputs, WarningKind kind,
                             const std::string& text, RecordOptions options = {}) {
  TraceWarning found{kind, "(not reported)"};
  {
    CapturedWarnings captured;
    trace(fn, inputs, options);
    const TraceWarning* w = captured.find(kind, text);
    EXPECT_NE(w, nullptr) << "no " << to_string(kind) << " warning mentioning '" << text
                          << "'; got:\n"
                          << captured.all();
    if (w) found = *w;
  }
  options.strict = true;
  Error e = error_of([&] { trace(fn, inputs, options); });
  EXPECT_TRUE(mentions(e, text)) << e.what();
  EXPECT_EQ(dispatch_observer(), nullptr);  // the failed trace stopped recording
  EXPECT_EQ(trace_hook(), nullptr);
  return found;
}

// ---------------------------------------------------------------- host reads

TEST(JitDivergence, ItemOnATracedValue) {
  auto fn = [](const Tensors& in) {
    double total = sum(relu(in[0])).item<double>();
    return Tensors{in[0] * total};
  };
  TraceWarning w = expect_reported(fn, {randn({4})}, WarningKind::HostRead,
                                   "item() on a traced value: the value was frozen into the graph");
  EXPECT_NE(w.file.find("jit_divergence_test.cpp"), std::string::npos) << w.file;
  EXPECT_GT(w.line, 0u);
  EXPECT_NE(w.message.find("jit_divergence_test.cpp:"), std::string::npos) << w.message;
}

// Python's `if x.sum() > 0:` calls bool(x), which reads the value the same way.
TEST(JitDivergence, ControlFlowOnATracedValue) {
  auto fn = [](const Tensors& in) {
    if (gt(sum(in[0]), 0.0).item<bool>()) return Tensors{relu(in[0])};
    return Tensors{neg(in[0])};
  };
  expect_reported(fn, {randn({4})}, WarningKind::HostRead, "item() on a traced value");
}

TEST(JitDivergence, ReadingAnInputsValue) {
  auto fn = [](const Tensors& in) { return Tensors{full({2}, in[0].item<double>())}; };
  expect_reported(fn, {tensor({3.f})}, WarningKind::InputRead,
                  "item() on graph input 0: its value at trace time was frozen");
}

TEST(JitDivergence, ReadingAParametersValue) {
  Tensor w = randn({1});
  auto fn = [&](const Tensors& in) { return Tensors{in[0] * w.item<double>()}; };
  expect_reported(fn, {randn({3})}, WarningKind::InputRead, "item() on parameter 'w'",
                  {.params = {{"w", w}}});
}

TEST(JitDivergence, ToVectorOnATracedValue) {
  auto fn = [](const Tensors& in) {
    std::vector<float> values = exp(in[0]).to_vector<float>();
    return Tensors{tensor(values, {int64_t(values.size())})};
  };
  expect_reported(fn, {randn({3})}, WarningKind::HostRead, "to_vector() on a traced value");
}

TEST(JitDivergence, ToStringOfATracedValue) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    std::string shown = y.to_string();  // a print() in forward shows trace-time values only
    return Tensors{y};
  };
  expect_reported(fn, {randn({3})}, WarningKind::HostRead, "to_string() on a traced value");
}

TEST(JitDivergence, PrintingATracedValue) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    std::ostringstream os;
    os << y;
    return Tensors{y};
  };
  expect_reported(fn, {randn({3})}, WarningKind::HostRead, "operator<< (printing) on a traced");
}

// What the Python bindings call for numpy(), tolist(), bool(x), float(x).
TEST(JitDivergence, ReadsReportedByTheBindings) {
  auto fn = [](const Tensors& in) {
    Tensor y = sigmoid(in[0]);
    report_host_read(y, "numpy()");
    return Tensors{y};
  };
  expect_reported(fn, {randn({3})}, WarningKind::HostRead, "numpy() on a traced value");
}

// BatchNorm with momentum=None averages with 1 / num_batches_tracked, which
// it reads with item(): the factor of the trace is frozen.
TEST(JitDivergence, BatchNormCumulativeAverageReadsItsCounter) {
  auto bn = std::make_shared<nn::BatchNorm1d>(3, 1e-5, std::nullopt);
  auto fn = [&](const Tensors& in) { return Tensors{bn->forward(in[0])}; };
  nn::NamedTensors params = bn->state_dict();
  expect_reported(fn, {randn({4, 3})}, WarningKind::HostRead, "item() on a traced value",
                  {.params = params});
}

// ---------------------------------------------------------------- in-place writes

TEST(JitDivergence, WriteThroughAViewThenReadTheBase) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    add_(narrow(y, 0, 0, 2), 1);  // y changes in eager code; in the graph only the view
    return Tensors{y};
  };
  expect_reported(fn, {randn({4})}, WarningKind::AliasedWrite,
                  "changed by an in-place write into a view or base of it");
}

TEST(JitDivergence, WriteIntoTheBaseThenReadAView) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    Tensor head = narrow(y, 0, 0, 2);
    mul_(y, 3);
    return Tensors{head};
  };
  expect_reported(fn, {randn({4})}, WarningKind::AliasedWrite, "the output of narrow");
}

TEST(JitDivergence, WriteIntoAnInputThroughAView) {
  auto fn = [](const Tensors& in) {
    Tensor head = narrow(in[0], 0, 0, 2);
    add_(head, 1);  // the caller's tensor changes in eager code only
    return Tensors{head * 2};
  };
  expect_reported(fn, {randn({4})}, WarningKind::AliasedWrite,
                  "in-place write into graph input 0 through a view");
}

TEST(JitDivergence, WriteIntoATensorFromOutside) {
  Tensor calls = zeros({1});  // a counter the function keeps outside itself
  auto fn = [&](const Tensors& in) {
    add_(calls, 1);
    return Tensors{in[0] + calls};
  };
  expect_reported(fn, {randn({2})}, WarningKind::OutsideWrite,
                  "into a tensor from outside the traced code");
}

// ---------------------------------------------------------------- random numbers

// rand, randn and their _like forms are ops a trace records (random_ops_test);
// a draw from a generator of the caller's own is made at once, frozen into
// the graph, and said so.
TEST(JitDivergence, RandomFactoryInTracedCode) {
  static Generator own(5);
  auto fn = [](const Tensors& in) { return Tensors{in[0] + randperm(3, DType::Float32, &own)}; };
  TraceWarning w =
      expect_reported(fn, {randn({3})}, WarningKind::RandomFactory,
                      "randperm() while tracing: the random numbers it drew were frozen");
  EXPECT_NE(w.file.find("jit_divergence_test.cpp"), std::string::npos) << w.file;
}

TEST(JitDivergence, RandomFactoryWithItsOwnGeneratorInTracedCode) {
  Generator gen(4);  // no op can name a generator: its numbers are drawn at once
  auto fn = [&](const Tensors& in) { return Tensors{in[0] * rand({3}, {}, &gen)}; };
  expect_reported(fn, {randn({3})}, WarningKind::RandomFactory, "rand() while tracing");
}

TEST(JitDivergence, RandomInitInTracedCode) {
  auto fn = [](const Tensors& in) {
    Tensor w = empty({3});
    nn::init::normal_(w);
    return Tensors{in[0] * w};
  };
  expect_reported(fn, {randn({3})}, WarningKind::RandomFactory, "init.normal_() while tracing");
}

// ---------------------------------------------------------------- captured state

TEST(JitDivergence, TensorRequiringGradCapturedAsAConstant) {
  Tensor w = requires_grad_(randn({3}));  // a weight the function closes over
  auto fn = [&](const Tensors& in) { return Tensors{in[0] * w}; };
  expect_reported(fn, {randn({3})}, WarningKind::GradConstant,
                  "a tensor that requires grad (shape [3]) was captured as a constant");
}

TEST(JitDivergence, RunningStatisticsHeldInAConstant) {
  Tensor mean = zeros({3}), var = ones({3});  // not registered buffers
  auto fn = [&](const Tensors& in) {
    return Tensors{batch_norm(in[0], Tensor(), Tensor(), mean, var, /*training=*/true)};
  };
  expect_reported(fn, {randn({4, 3})}, WarningKind::SideEffectOnConstant,
                  "batch_norm updates its input 3");
}

TEST(JitDivergence, ViewMadeOutsideTheOpTable) {
  auto fn = [](const Tensors& in) {
    Tensor y = relu(in[0]);
    Tensor head = make_view(y, {2}, {1}, 0);  // no dispatch: the graph cannot see it
    return Tensors{head * 2};
  };
  expect_reported(fn, {randn({4})}, WarningKind::UntracedView,
                  "a view of a traced tensor made outside the op table");
}

TEST(JitDivergence, DetachIsNotRecorded) {
  Tensor w = requires_grad_(randn({3}));
  auto fn = [&](const Tensors& in) { return Tensors{detach(in[0] * w) + w}; };
  expect_reported(fn, {randn({3})}, WarningKind::UntracedView, "detach() of the output of mul",
                  {.params = {{"w", w}}});
}

// ---------------------------------------------------------------- warnings only

TEST(JitDivergence, OutputThatIgnoresTheInputs) {
  auto fn = [](const Tensors&) { return Tensors{ones({2}) * 3}; };
  CapturedWarnings captured;
  CompiledFunction f = trace(fn, {randn({2})}, {.strict = true});  // never an error
  EXPECT_NE(captured.find(WarningKind::ConstantOutput,
                          "output 0 does not depend on the inputs: it was computed while tracing"),
            nullptr)
      << captured.all();
  EXPECT_EQ(f({randn({2})})[0].to_vector<float>(), (std::vector<float>{3, 3}));
}

// A traced graph is specialized to its input shapes; called with another,
// it says so instead of computing with the traced shape.
TEST(JitDivergence, ShapeSpecializationIsAnError) {
  auto fn = [](const Tensors& in) { return Tensors{in[0] + zeros({in[0].size(0)})}; };
  CompiledFunction f = trace(fn, {randn({3})});
  EXPECT_TRUE(mentions(error_of([&] { f({randn({4})}); }), "traced for float32[3]"));
}

// ---------------------------------------------------------------- recorded, not reported

TEST(JitDivergence, NotReportedWhatTheGraphReproduces) {
  CapturedWarnings captured;
  auto fn = [](const Tensors& in) {
    Tensor y = dropout(in[0], 0.5, true);   // draws per call when replayed
    add_(in[0], 1);                         // written back into the caller's input
    Tensor c = full({in[0].size(0)}, 2.0);  // shape-dependent: guarded under hybridize
    return Tensors{y + c};
  };
  CompiledFunction f = trace(fn, {randn({8})});
  Tensor outside_random = randn({2});  // drawn outside any trace
  HybridFunction g = compile([](const Tensors& in) { return Tensors{relu(in[0])}; });
  g({randn({2})});
  g({randn({5})});
  EXPECT_TRUE(captured.warnings.empty()) << captured.all();
}

}  // namespace
}  // namespace kiln::jit
