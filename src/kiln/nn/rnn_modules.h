// RNN, LSTM, GRU and their cells as modules, with PyTorch's arguments,
// parameter names (weight_ih_l0, bias_hh_l1_reverse, ...; the cells'
// weight_ih, weight_hh, bias_ih, bias_hh) and initialization: every
// parameter ~ U(±1/sqrt(hidden_size)). The math is functional's (rnn.h).
//
//   auto lstm = std::make_shared<nn::LSTM>(64, 128, nn::RNNOptions{.num_layers = 2});
//   auto [y, h_n, c_n] = lstm->forward_with_state(x);
#pragma once

#include <string>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/nn/rnn.h"

namespace kiln::nn {

using functional::RNNMode;
using functional::RNNResult;

// The module's arguments past input_size and hidden_size, as PyTorch's.
struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t proj_size = 0;  // LSTM only in PyTorch; kiln refuses any other value
};

// Shared by RNN, LSTM and GRU.
class RNNBase : public Module {
 public:
  // forward() gives the output; forward_with_state also h_n (and c_n).
  Tensor forward(const Tensor& input) override;
  // h0 (and c0 for the LSTM) [num_layers * D, B, H], undefined for zeros.
  RNNResult forward_with_state(const Tensor& input, const Tensor& h0 = {}, const Tensor& c0 = {});
  std::string extra_repr() const override;
  void reset_parameters();
  // The parameters in functional::recurrent's order.
  std::vector<Tensor> flat_weights() const;

  RNNMode mode;
  int64_t input_size, hidden_size;
  RNNOptions options;

 protected:
  RNNBase(const char* type_name, RNNMode mode, int64_t input_size, int64_t hidden_size,
          const RNNOptions& options);

 private:
  std::vector<Tensor> weights_;  // handles to the registered parameters, in order
};

// h_t = act(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh); nonlinearity "tanh" or "relu".
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {},
      const std::string& nonlinearity = "tanh");

  std::string nonlinearity;
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
};

// Shared by the cells: weight_ih [G*H, I], weight_hh [G*H, H], bias_ih and
// bias_hh [G*H] (undefined without bias).
class RNNCellBase : public Module {
 public:
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  RNNCellBase(const char* type_name, int64_t input_size, int64_t hidden_size, bool bias,
              int64_t gates);
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          std::string nonlinearity = "tanh");
  using Module::forward;
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& h);
  std::string extra_repr() const override;

  std::string nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  // (h', c'); forward(x) gives h'.
  std::pair<Tensor, Tensor> forward_with_state(const Tensor& input, const Tensor& h = {},
                                               const Tensor& c = {});
  Tensor forward(const Tensor& input) override { return forward_with_state(input).first; }
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  using Module::forward;
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& h);
};

}  // namespace kiln::nn
