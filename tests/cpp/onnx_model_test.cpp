// onnx::Model from C++: models of the ONNX backend tests Debian ships
// (libonnx-testdata) whose shape or Range bounds come from graph inputs,
// called with every input and several values of those, against kiln's own
// reshape and arange; the cache of specializations stays bounded.
// tests/python/test_onnx_runtime_values.py compares with ONNX Runtime.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/core/factory.h"
#include "kiln/jit/compile/compiled.h"
#include "kiln/onnx/onnx_model.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln::onnx {
namespace {

const std::string kNodeTests = "/usr/share/libonnx-testdata/data/node/";

Model::Runner compile(const Imported& imported) {
  jit::Capture capture;
  capture.graph = imported.graph;
  capture.num_outputs = imported.num_outputs;
  auto run = std::make_shared<jit::CompiledFunction>(std::move(capture));
  return [run](const std::vector<Tensor>& inputs) { return run->run(inputs); };
}

std::string node_test(const std::string& name) {
  return kNodeTests + name + "/model.onnx";
}

TEST(OnnxModel, ReshapeToAShapeGivenAtRunTime) {
  const std::string path = node_test("test_reshape_negative_dim");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "libonnx-testdata is not installed";
  EXPECT_THROW(import_model(path), Error);  // one graph cannot hold it
  Model model(path, {}, compile, 2);
  EXPECT_EQ(model.value_inputs(), std::vector<std::string>{"shape"});
  EXPECT_EQ(model.single(), nullptr);
  Tensor data = arange(0.0, 24.0, 1.0, TensorOptions(DType::Float32));
  data = reshape(data, IntList{2, 3, 4});
  for (const IntList& shape :
       {IntList{2, -1, 2}, IntList{4, 3, 2}, IntList{1, 24, 1}, IntList{4, 3, 2}}) {
    std::vector<Tensor> out = model({data, tensor(std::vector<int64_t>(shape), {3})});
    ASSERT_EQ(out.size(), 1u);
    Tensor want = reshape(data, shape);
    EXPECT_EQ(out[0].shape(), want.shape());
    EXPECT_EQ(out[0].to_vector<float>(), want.to_vector<float>());
    EXPECT_LE(model.num_specializations(), 2u);
  }
  EXPECT_EQ(model.num_specializations(), 2u);
  EXPECT_THROW(model({data}), Error);  // both inputs are needed
}

TEST(OnnxModel, LoopTripCountFromRangeBounds) {
  const std::string path = node_test("test_range_float_type_positive_delta_expanded");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "libonnx-testdata is not installed";
  Model model(path, {}, compile);
  EXPECT_EQ(model.value_inputs(), (std::vector<std::string>{"start", "limit", "delta"}));
  for (auto [start, limit, delta] :
       {std::tuple{1.0f, 5.0f, 2.0f}, std::tuple{0.5f, 4.0f, 0.5f}, std::tuple{3.0f, 3.5f, 1.0f}}) {
    std::vector<Tensor> out = model({full({}, start, TensorOptions(DType::Float32)),
                                     full({}, limit, TensorOptions(DType::Float32)),
                                     full({}, delta, TensorOptions(DType::Float32))});
    Tensor want = arange(start, limit, delta, TensorOptions(DType::Float32));
    EXPECT_EQ(out.at(0).to_vector<float>(), want.to_vector<float>());
  }
}

}  // namespace
}  // namespace kiln::onnx
