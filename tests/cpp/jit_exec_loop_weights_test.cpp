// A loop's captured weights in a compiled plan (control_flow_exec.h): a
// scan's step keeps its recurrent weight packed by the key the scan gives
// it, once per run for a graph input and until the version moves for a
// parameter, with the results of eager every time; at batch 1 an LSTM
// layer's scan packs W_hh for its fused kernel (lstm_scan.h) the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::jit {
namespace {

// Batch 4: the step's product runs kiln's GEMM, which packs its weight.
constexpr int64_t kSteps = 20, kBatch = 4, kInput = 3, kHidden = 8;
// The graph as recorded: no pass unrolls the loop or changes a rounding.
const CompileOptions kAsRecorded{.optimize = false};

// The plan of the step of the graph's first scan, as text.
std::string scan_step_plan(const Executable& exe) {
  for (const Step& step : exe.plan().steps) {
    if (step.control_flow) return step.control_flow->blocks().at(0)->plan().to_string();
  }
  return "no control-flow step in\n" + exe.plan().to_string();
}

TEST(JitExecLoopWeights, ScanStepPacksItsCapturedParameterUntilItChanges) {
  manual_seed(5);
  nn::LSTM lstm(kInput, kHidden, {.num_layers = 2});
  lstm.eval();
  NoGradGuard no_grad;
  Tensor x = randn({kSteps, kBatch, kInput});
  Executable exe(trace(lstm, x, {}, kAsRecorded).shared_graph());  // weights: its parameters
  const std::string step_plan = scan_step_plan(exe);
  EXPECT_NE(step_plan.find("[packs keyed input "), std::string::npos) << step_plan;
  for (int round = 0; round < 3; ++round) {
    Tensor again = randn({kSteps, kBatch, kInput});
    EXPECT_TRUE(bitwise_equal(exe.run({x})[0], lstm.forward(x))) << "round " << round;
    EXPECT_TRUE(bitwise_equal(exe.run({again})[0], lstm.forward(again))) << "round " << round;
    // An optimizer step on the recurrent weights: the next call repacks.
    for (Tensor& w : lstm.flat_weights()) {
      if (w.dim() == 2 && w.shape()[1] == kHidden) mul_(w, 0.75);
    }
  }
}

// Weights given as graph inputs: every run packs them again (a new key),
// so a call with other weights never reads the last call's packed copy.
TEST(JitExecLoopWeights, ScanStepRepacksWeightsGivenAsInputsEveryRun) {
  manual_seed(6);
  NoGradGuard no_grad;
  auto lstm = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> weights(in.begin() + 1, in.end());
    return std::vector<Tensor>{nn::functional::lstm(in[0], {}, {}, weights).output};
  };
  auto weights = [] {
    return std::vector<Tensor>{randn({4 * kHidden, kInput}), randn({4 * kHidden, kHidden}),
                               randn({4 * kHidden}), randn({4 * kHidden})};
  };
  std::vector<Tensor> example{randn({kSteps, kBatch, kInput})};
  for (const Tensor& w : weights())
    example.push_back(w);
  Executable exe(trace(lstm, example, {}, kAsRecorded).shared_graph());
  const std::string step_plan = scan_step_plan(exe);
  EXPECT_NE(step_plan.find("[packs keyed input "), std::string::npos) << step_plan;
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> in{randn({kSteps, kBatch, kInput})};
    for (const Tensor& w : weights())
      in.push_back(w);
    EXPECT_TRUE(bitwise_equal(exe.run(in)[0], lstm(in)[0])) << "round " << round;
  }
}

// The largest |got - want| of two float32 tensors of one shape.
double max_difference(const Tensor& got, const Tensor& want) {
  const Tensor a = contiguous(got), b = contiguous(want);
  double most = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    most = std::max(most, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  return most;
}

// At batch 1 an LSTM layer's scan runs as one fused kernel per step
// (lstm_scan.h), over W_hh packed under the parameter's key: the bits of
// row 0 of the same layers run at batch 4 (kiln's GEMM, then the cell),
// close to eager at batch 1 (whose matvec sums in another order), and new
// weights are packed again.
TEST(JitExecLoopWeights, BatchOneLstmScanRunsFusedWithABatchedRowsBits) {
  manual_seed(7);
  nn::LSTM lstm(kInput, kHidden, {.num_layers = 2, .bidirectional = true});
  lstm.eval();
  NoGradGuard no_grad;
  Tensor x = randn({kSteps, 1, kInput});
  Executable exe(trace(lstm, x, {}, kAsRecorded).shared_graph());
  for (int round = 0; round < 3; ++round) {
    Tensor batched = lstm.forward(cat({x, randn({kSteps, kBatch - 1, kInput})}, 1));
    const Tensor got = exe.run({x})[0];
    EXPECT_TRUE(bitwise_equal(got, narrow(batched, 1, 0, 1))) << "round " << round;
    EXPECT_LT(max_difference(got, lstm.forward(x)), 1e-5) << "round " << round;
    for (Tensor& w : lstm.flat_weights()) {
      if (w.dim() == 2 && w.shape()[1] == kHidden) mul_(w, 0.75);
    }
  }
}

}  // namespace
}  // namespace kiln::jit
