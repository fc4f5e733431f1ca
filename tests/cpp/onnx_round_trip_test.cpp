// ONNX from C++: export a traced model, import it back, run both.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/nn.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/ops/random.h"
#include "kiln/ops/registry.h"
#include "test_util.h"

namespace kiln::onnx {
namespace {

TEST(OnnxRoundTrip, LeNetExportsAndImportsBack) {
  manual_seed(9);
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<nn::Sigmoid>(), std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(6 * 14 * 14, 10));
  Tensor x = randn({2, 1, 28, 28});
  jit::CompiledFunction traced = jit::trace(*net, x);
  std::string bytes = export_model_bytes(traced.graph(), traced.num_outputs());
  Imported imported = import_model_bytes(bytes, "");
  EXPECT_EQ(imported.opset, 17);
  EXPECT_EQ(imported.num_outputs, 1u);
  jit::Capture capture;
  capture.graph = imported.graph;
  capture.num_outputs = imported.num_outputs;
  jit::CompiledFunction loaded(std::move(capture));
  std::vector<float> got = loaded({x})[0].to_vector<float>();
  std::vector<float> want = traced({x})[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(OnnxRoundTrip, ErrorsNameWhatIsWrong) {
  EXPECT_THROW_WITH(import_model_bytes("not a protobuf at all \xff\xff", ""), "onnx import");
  jit::Graph graph;
  jit::Value* x = graph.add_input({DType::Float32, {3}}, "x");
  jit::Value* index = graph.add_constant(full({2}, int64_t(0), DType::Int64));
  jit::Value* src = graph.add_constant(full({2}, 1.0));
  graph.set_outputs(
      {graph.append(op("index_add"), {x, index, src}, {{"dim", int64_t(0)}})->output()});
  EXPECT_THROW_WITH(export_model_bytes(graph, 1, {.opset_version = 13}),
                    "index_add needs opset 16 or later");
  jit::Graph backward;
  jit::Value* grad = backward.add_input({DType::Float32, {2, 5}}, "grad");
  backward.set_outputs({backward
                            .append(op("pad_backward"), {grad},
                                    {{"input_size", IntList{2, 3}},
                                     {"pad", IntList{1, 1}},
                                     {"mode", std::string("reflect")}})
                            ->output()});
  EXPECT_THROW_WITH(export_model_bytes(backward, 1), "op 'pad_backward' has no ONNX translation");
  EXPECT_THROW_WITH(export_model_bytes(graph, 1, {.opset_version = 12}), "opset_version 12");
}

// A symbolic graph (issue 21) exports its dims as dim_params and computes
// the sizes its ops take from the inputs' shapes (test_symbolic_export.py
// runs such models in ONNX Runtime).
TEST(OnnxRoundTrip, SymbolicDimsAreDimParamsAndSizesAreComputed) {
  const Dim batch = Dim::symbol("batch");
  jit::Graph graph;
  jit::Value* x = graph.add_input({DType::Float32, {batch, 4}}, "x");
  jit::Value* flat = graph.append(op("reshape"), {x}, {{"shape", DimList{4 * batch}}})->output();
  graph.set_outputs({graph.append(op("relu"), {flat})->output()});
  // Protobuf keeps strings as they are: the dim_params and op types show in
  // the bytes (the tests do not link protobuf's generated classes).
  std::string bytes = export_model_bytes(graph, 1);
  for (const char* text : {"batch", "4*batch", "Shape", "Gather", "Mul", "Reshape"})
    EXPECT_NE(bytes.find(text), std::string::npos) << text;
}

// The exported graph reads a symbol's value off an input dim that is the
// symbol alone; a size of no such symbol cannot be computed.
TEST(OnnxRoundTrip, ASymbolNoInputHoldsAloneIsRefusedByName) {
  const Dim batch = Dim::symbol("batch");
  jit::Graph graph;
  jit::Value* z = graph.add_input({DType::Float32, {2 * batch}}, "z");
  graph.set_outputs({graph.append(op("reshape"), {z}, {{"shape", DimList{batch, 2}}})->output()});
  EXPECT_THROW_WITH(export_model_bytes(graph, 1),
                    "onnx export: the size batch is no input's dim by itself");
}

}  // namespace
}  // namespace kiln::onnx
