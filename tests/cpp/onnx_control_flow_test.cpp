// ONNX for control flow from C++: a traced cond + while_loop and a traced
// LSTM export (If, Loop, ONNX's LSTM op), import back, and run equal to the
// traced functions; malformed control flow is refused naming the node.
// tests/python/test_onnx_control_flow.py runs the files in ONNX Runtime.
#include <gtest/gtest.h>

#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/rnn_modules.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln::onnx {
namespace {

jit::CompiledFunction round_trip(const jit::CompiledFunction& traced) {
  std::string bytes = export_model_bytes(traced.graph(), traced.num_outputs());
  Imported imported = import_model_bytes(bytes, "");
  jit::Capture capture;
  capture.graph = imported.graph;
  capture.num_outputs = imported.num_outputs;
  return jit::CompiledFunction(std::move(capture));
}

bool has_op(const jit::Graph& graph, const std::string& name) {
  for (const jit::Node* node : graph.nodes())
    if (node->op().name == name) return true;
  return false;
}

void expect_near(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    std::vector<float> g = got[k].to_vector<float>(), w = want[k].to_vector<float>();
    ASSERT_EQ(g.size(), w.size()) << "output " << k;
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(g[i], w[i], 1e-5) << "output " << k << " element " << i;
  }
}

Tensors branch_then_loop(const Tensors& in) {
  Tensors y = cond(
      gt(sum(in[0]), 0.0), [](const Tensors& v) { return Tensors{mul(v[0], 2.0)}; },
      [](const Tensors& v) { return Tensors{neg(v[0])}; }, {in[0]});
  return while_loop([](const Tensors& v) { return lt(sum(v[0]), 50.0); },
                    [](const Tensors& v) { return Tensors{add(mul(v[0], 1.5), 1.0)}; }, y, 100);
}

TEST(OnnxControlFlow, CondAndWhileLoopRoundTrip) {
  Tensor x = tensor<float>({1, 2, 3});
  jit::CompiledFunction traced = jit::trace(branch_then_loop, {x});
  jit::CompiledFunction loaded = round_trip(traced);
  EXPECT_TRUE(has_op(loaded.graph(), "cond"));
  EXPECT_TRUE(has_op(loaded.graph(), "while_loop"));
  for (const Tensor& input : {x, tensor<float>({-4, 0, 1}), tensor<float>({30, 40, 50})})
    expect_near(loaded({input}), branch_then_loop({input}));
}

TEST(OnnxControlFlow, LstmLayersRoundTripAsScans) {
  manual_seed(3);
  nn::LSTM lstm(4, 6, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  lstm.eval();
  Tensor x = randn({5, 3, 4});
  jit::CompiledFunction traced = jit::trace(lstm, x);
  jit::CompiledFunction loaded = round_trip(traced);  // through ONNX's LSTM op
  size_t scans = 0;
  for (const jit::Node* node : loaded.graph().nodes())
    scans += node->op().name == "scan";
  EXPECT_EQ(scans, 4u);  // one per layer and direction
  Tensor other = randn({5, 3, 4});
  expect_near(loaded({other}), traced({other}));
}

TEST(OnnxControlFlow, ScanWithoutXsExportsAsALoop) {
  auto counted = [](const Tensors& in) {
    return fori_loop(
        0, 4, [](const Tensor& i, const Tensors& v) { return Tensors{add(mul(v[0], 0.5), i)}; },
        {in[0]});
  };
  Tensor x = tensor<float>({1, -2});
  jit::CompiledFunction traced = jit::trace(counted, {x});
  jit::CompiledFunction loaded = round_trip(traced);
  expect_near(loaded({x}), counted({x}));
}

}  // namespace
}  // namespace kiln::onnx
