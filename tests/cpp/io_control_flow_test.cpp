// .kiln model files holding control flow: a traced function with a cond, a
// while_loop and an LSTM-style scan saves, loads with C++ alone and runs
// equal to the function it was traced from, for inputs taking other paths.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/io/model_file.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/nn/rnn_modules.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"

namespace kiln::jit {
namespace {

using io_test::TempDir;

Tensors controlled(const Tensors& in) {
  Tensors y = cond(
      gt(sum(in[0]), 0.0), [](const Tensors& v) { return Tensors{mul(v[0], 2.0)}; },
      [](const Tensors& v) { return Tensors{neg(v[0])}; }, {in[0]});
  return while_loop([](const Tensors& v) { return lt(sum(v[0]), 50.0); },
                    [](const Tensors& v) { return Tensors{add(mul(v[0], 1.5), 1.0)}; }, y, 100);
}

TEST(ModelFileControlFlow, SavedLoadedAndRunFromCpp) {
  Tensor x = tensor<float>({1, 2, 3});
  CompiledFunction traced = trace(controlled, {x});
  TempDir dir;
  save(traced, dir.file("cf.kiln"), {.example_inputs = {x}});
  CompiledFunction loaded = load(dir.file("cf.kiln"), {.verify = true});
  EXPECT_EQ(to_text(loaded.graph(), {.full = true}), to_text(traced.graph(), {.full = true}));
  for (const Tensor& input : {x, tensor<float>({-4, 0, 1}), tensor<float>({30, 40, 50})}) {
    EXPECT_EQ(loaded({input})[0].to_vector<float>(), controlled({input})[0].to_vector<float>());
  }
}

TEST(ModelFileControlFlow, ATracedLstmRoundTrips) {
  manual_seed(3);
  nn::LSTM lstm(8, 16, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  lstm.eval();
  Tensor x = randn({5, 3, 8});
  CompiledFunction traced = trace(lstm, x);
  TempDir dir;
  save(traced, dir.file("lstm.kiln"), {.example_inputs = {x}});
  CompiledFunction loaded = load(dir.file("lstm.kiln"), {.verify = true});
  Tensor other = randn({5, 3, 8});
  std::vector<Tensor> want = traced({other}), got = loaded({other});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << "output " << i;
}

}  // namespace
}  // namespace kiln::jit
