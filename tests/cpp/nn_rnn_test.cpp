// kiln::nn's recurrent modules against PyTorch (the "recurrent" rows of
// tests/oracle/gen_nn_refs.py: outputs, final states and the gradients of
// input, initial states and every parameter), their construction, errors
// and dropout, and the traced LSTM: one loop per layer and direction.
#include <gtest/gtest.h>

#include <cmath>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "nn_refs.h"
#include "op_refs.h"

namespace kiln {
namespace {

using nlohmann::json;

template <typename T>
T arg(const json& kwargs, const char* name, T fallback) {
  return kwargs.contains(name) ? kwargs[name].get<T>() : fallback;
}

nn::RNNOptions layer_options(const json& kw) {
  return {.num_layers = arg<int64_t>(kw, "num_layers", 1),
          .bias = arg(kw, "bias", true),
          .batch_first = arg(kw, "batch_first", false),
          .dropout = arg(kw, "dropout", 0.0),
          .bidirectional = arg(kw, "bidirectional", false)};
}

// The module torch built from getattr(nn, ctor)(**kwargs), and a forward
// returning what the row's "results" hold.
struct Built {
  nn::ModulePtr module;
  std::function<std::vector<Tensor>(const Tensor&, const std::vector<Tensor>&)> run;
};

Built build(const std::string& ctor, const json& kw) {
  const int64_t in = kw["input_size"].get<int64_t>(), hidden = kw["hidden_size"].get<int64_t>();
  const bool bias = arg(kw, "bias", true);
  auto state = [](const std::vector<Tensor>& s, size_t i) {
    return i < s.size() ? s[i] : Tensor();
  };
  if (ctor == "RNN" || ctor == "LSTM" || ctor == "GRU") {
    std::shared_ptr<nn::RNNBase> m;
    if (ctor == "RNN") {
      m = std::make_shared<nn::RNN>(in, hidden, layer_options(kw),
                                    arg<std::string>(kw, "nonlinearity", "tanh"));
    } else if (ctor == "LSTM") {
      m = std::make_shared<nn::LSTM>(in, hidden, layer_options(kw));
    } else {
      m = std::make_shared<nn::GRU>(in, hidden, layer_options(kw));
    }
    return {m, [m, state](const Tensor& x, const std::vector<Tensor>& s) {
              nn::RNNResult r = m->forward_with_state(x, state(s, 0), state(s, 1));
              std::vector<Tensor> out{r.output, r.h_n};
              if (r.c_n.defined()) out.push_back(r.c_n);
              return out;
            }};
  }
  if (ctor == "RNNCell") {
    auto m = std::make_shared<nn::RNNCell>(in, hidden, bias,
                                           arg<std::string>(kw, "nonlinearity", "tanh"));
    return {m, [m, state](const Tensor& x, const std::vector<Tensor>& s) {
              return std::vector<Tensor>{m->forward(x, state(s, 0))};
            }};
  }
  if (ctor == "LSTMCell") {
    auto m = std::make_shared<nn::LSTMCell>(in, hidden, bias);
    return {m, [m, state](const Tensor& x, const std::vector<Tensor>& s) {
              auto [h, c] = m->forward_with_state(x, state(s, 0), state(s, 1));
              return std::vector<Tensor>{h, c};
            }};
  }
  auto m = std::make_shared<nn::GRUCell>(in, hidden, bias);
  return {m, [m, state](const Tensor& x, const std::vector<Tensor>& s) {
            return std::vector<Tensor>{m->forward(x, state(s, 0))};
          }};
}

class RecurrentVsTorch : public testing::TestWithParam<size_t> {};

TEST_P(RecurrentVsTorch, OutputsStatesAndGradientsMatch) {
  const json& row = nn_refs()["recurrent"][GetParam()];
  Built b = build(row["ctor"], row["kwargs"]);
  b.module->train(row["train"].get<bool>());
  nn::StateDict torch_state;
  for (const json& e : row["state"])
    torch_state.emplace_back(e[0].get<std::string>(), tensor_from_json(e[1]));
  std::vector<std::string> kiln_keys, torch_keys;
  for (const auto& [name, t] : b.module->state_dict())
    kiln_keys.push_back(name);
  for (const auto& [name, t] : torch_state)
    torch_keys.push_back(name);
  ASSERT_EQ(kiln_keys, torch_keys);
  b.module->load_state_dict(torch_state);

  Tensor x = requires_grad_(tensor_from_json(row["input"]));
  std::vector<Tensor> states;
  for (const json& s : row["states"])
    states.push_back(requires_grad_(tensor_from_json(s)));
  std::vector<Tensor> results = b.run(x, states);
  ASSERT_EQ(results.size(), row["results"].size());
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < results.size(); ++i) {
    expect_matches(results[i], row["results"][i], 1e-4, 1e-5, "result " + std::to_string(i));
    seeds.push_back(tensor_from_json(row["seeds"][i]));
  }
  std::vector<Tensor> leaves{x};
  leaves.insert(leaves.end(), states.begin(), states.end());
  for (const auto& [name, p] : b.module->named_parameters())
    leaves.push_back(p);
  std::vector<Tensor> grads = grad(results, leaves, seeds, false, false, true);
  expect_matches(grads[0], row["input_grad"], 1e-4, 1e-4, "input grad");
  for (size_t i = 0; i < states.size(); ++i)
    expect_matches(grads[1 + i], row["state_grads"][i], 1e-4, 1e-4, "initial state grad");
  const json& param_grads = row["param_grads"];
  ASSERT_EQ(param_grads.size(), grads.size() - 1 - states.size());
  for (size_t i = 0; i < param_grads.size(); ++i) {
    expect_matches(grads[1 + states.size() + i], param_grads[i][1], 1e-4, 1e-4,
                   "grad of " + param_grads[i][0].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, RecurrentVsTorch, testing::ValuesIn(nn_ref_rows("recurrent")),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(nn_refs()["recurrent"][info.param]["id"]);
                         });

TEST(NnRnn, ParameterNamesShapesAndInit) {
  manual_seed(0);
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> names;
  for (const auto& [name, p] : lstm.named_parameters()) {
    names.push_back(name);
    // U(±1/sqrt(hidden)) = U(±0.5)
    EXPECT_LE(max(abs(p)).item<double>(), 0.5) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "weight_ih_l0");
  EXPECT_EQ(names[3], "bias_hh_l0");
  EXPECT_EQ(names[4], "weight_ih_l0_reverse");
  EXPECT_EQ(names[15], "bias_hh_l1_reverse");
  EXPECT_EQ(lstm.named_parameters()[0].second.shape(), (IntList{16, 3}));
  EXPECT_EQ(lstm.named_parameters()[8].second.shape(), (IntList{16, 8}));  // layer 1 reads 2H

  nn::GRUCell cell(5, 2, false);
  ASSERT_EQ(cell.named_parameters().size(), 2u);
  EXPECT_EQ(cell.weight_ih.shape(), (IntList{6, 5}));
  EXPECT_FALSE(cell.bias_hh.defined());
}

TEST(NnRnn, ReprAsPyTorch) {
  nn::RNN rnn(3, 4, {.num_layers = 2, .bias = false, .batch_first = true, .bidirectional = true},
              "relu");
  EXPECT_EQ(rnn.type_name() + "(" + rnn.extra_repr() + ")",
            "RNN(3, 4, num_layers=2, bias=False, batch_first=True, bidirectional=True)");
  nn::RNNCell cell(3, 4, false, "relu");
  EXPECT_EQ(cell.extra_repr(), "3, 4, bias=False, nonlinearity=relu");
}

void expect_error(const std::function<void()>& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(NnRnn, BadArgumentsAndInputsSayWhat) {
  expect_error([] { nn::LSTM(3, 4, {.proj_size = 2}); }, "proj_size=2 is not supported");
  expect_error([] { nn::RNN(3, 4, {}, "gelu"); }, "Unknown nonlinearity 'gelu'");
  expect_error([] { nn::GRU(3, 4, {.dropout = 1.5}); }, "dropout should be a number in range");
  expect_error([] { nn::LSTM(3, 0); }, "hidden_size must be greater than zero");
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  expect_error(
      [&] {
        lstm.forward(randn({2, 3, 4, 5}));
      },
      "LSTM: Expected input to be 2D or 3D, got 4D instead");
  expect_error(
      [&] {
        lstm.forward(randn({5, 2, 6}));
      },
      "input.size(-1) must be equal to input_size. Expected 3, got 6");
  expect_error([&] { lstm.forward(randn({0, 2, 3})); }, "Expected sequence length to be larger");
  expect_error(
      [&] {
        lstm.forward_with_state(randn({5, 2, 3}), randn({1, 2, 4}), randn({2, 2, 4}));
      },
      "Expected hidden[0] size (2, 2, 4), got [1, 2, 4]");
  expect_error(
      [&] {
        lstm.forward_with_state(randn({5, 3}), randn({2, 1, 4}), randn({2, 1, 4}));
      },
      "For unbatched 2-D input, hx should also be 2-D");
  expect_error(
      [&] {
        lstm.forward_with_state(randn({5, 2, 3}), randn({2, 2, 4}));
      },
      "give both h0 and c0, or neither");
  nn::GRUCell cell(3, 4);
  expect_error(
      [&] {
        cell.forward(randn({2, 2, 3}));
      },
      "GRUCell: Expected input to be 1D or 2D, got 3D instead");
  expect_error(
      [&] {
        cell.forward(randn({2, 3}), randn({3, 4}));
      },
      "Input batch size 2 doesn't match hidden0 batch size 3");
  expect_error(
      [&] {
        cell.forward(randn({2, 3}), randn({2, 5}));
      },
      "hidden0 has inconsistent hidden_size: got 5, expected 4");
}

// Dropout acts between layers in training only: eval (or p = 0) gives the
// same result as a model without it, and training draws a new mask per call.
TEST(NnRnn, DropoutBetweenLayersOnlyWhileTraining) {
  manual_seed(1);
  nn::GRU with(3, 5, {.num_layers = 2, .dropout = 0.5});
  nn::GRU without(3, 5, {.num_layers = 2});
  without.load_state_dict(with.state_dict());
  Tensor x = randn({4, 2, 3});
  with.eval();
  without.eval();
  EXPECT_TRUE(bitwise_equal(with.forward(x), without.forward(x)));
  with.train();
  Tensor a = with.forward(x), b = with.forward(x);
  EXPECT_EQ(a.shape(), (IntList{4, 2, 5}));
  EXPECT_GT(max(abs(a - b)).item<double>(), 0.0);
  // One layer: nothing comes after it, so nothing is dropped.
  nn::LSTM single(3, 5, {.dropout = 0.5});
  EXPECT_TRUE(bitwise_equal(single.forward(x), single.forward(x)));
}

// A traced LSTM is one scan node per layer and direction (the cell inside
// its body, not unrolled per time step), and runs as eager does.
TEST(NnRnn, TracedLstmIsOneLoopPerLayerAndDirection) {
  manual_seed(2);
  nn::LSTM lstm(4, 6, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  lstm.eval();
  Tensor x = randn({3, 7, 4});
  jit::CompiledFunction f = jit::trace(lstm, x);
  size_t scans = 0, cells = 0;
  for (const jit::Node* node : f.graph().nodes()) {
    scans += node->op().name == "scan";
    cells += node->op().name == "lstm_cell_pointwise";
  }
  EXPECT_EQ(scans, 4u) << jit::to_text(f.graph());
  EXPECT_EQ(cells, 0u) << "the cell is unrolled into the top-level graph";
  Tensor want = lstm.forward(x);
  Tensor got = f({x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LE(max(abs(got - want)).item<double>(), 1e-6);
  Tensor x2 = randn({3, 7, 4});
  EXPECT_LE(max(abs(f({x2})[0] - lstm.forward(x2))).item<double>(), 1e-6);
}

// Traced with a symbolic batch and sequence length, one graph serves
// other sizes (the initial zeros follow the batch, the scan the length).
TEST(NnRnn, TracedGruWithDynamicBatchAndLength) {
  manual_seed(3);
  auto gru = std::make_shared<nn::GRU>(4, 5, nn::RNNOptions{.num_layers = 2});
  gru->eval();
  jit::RecordOptions options;
  options.dynamic_dims = {{0, 0, "seq"}, {0, 1, "batch"}};
  options.params = gru->named_parameters();
  jit::TracedFn fn = [&](const std::vector<Tensor>& in) {
    nn::RNNResult r = gru->forward_with_state(in[0]);
    return std::vector<Tensor>{r.output, r.h_n};
  };
  jit::CompiledFunction f = jit::trace(fn, {randn({6, 3, 4})}, options);
  for (auto [steps, batch] : {std::pair<int64_t, int64_t>{6, 3}, {2, 1}, {9, 5}}) {
    Tensor x = randn({steps, batch, 4});
    std::vector<Tensor> got = f({x});
    nn::RNNResult want = gru->forward_with_state(x);
    ASSERT_EQ(got[0].shape(), want.output.shape()) << steps << "x" << batch;
    EXPECT_LE(max(abs(got[0] - want.output)).item<double>(), 1e-6) << steps << "x" << batch;
    EXPECT_LE(max(abs(got[1] - want.h_n)).item<double>(), 1e-6) << steps << "x" << batch;
  }
}

}  // namespace
}  // namespace kiln
