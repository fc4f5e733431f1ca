#include "kiln/nn/rnn_modules.h"

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/init.h"

namespace kiln::nn {

namespace {

// PyTorch's reset_parameters for every recurrent layer and cell: each
// parameter ~ U(±1/sqrt(hidden_size)).
void reset_uniform(const std::vector<Tensor>& params, int64_t hidden_size) {
  const double bound = hidden_size > 0 ? 1.0 / std::sqrt(double(hidden_size)) : 0.0;
  for (const Tensor& p : params) {
    if (p.defined()) init::uniform_(p, -bound, bound);
  }
}

void check_sizes(const char* type_name, int64_t input_size, int64_t hidden_size) {
  KILN_CHECK_VALUE(input_size >= 0, type_name, ": input_size must be non-negative, got ",
                   input_size);
  KILN_CHECK_VALUE(hidden_size > 0, type_name, ": hidden_size must be greater than zero, got ",
                   hidden_size);
}

}  // namespace

// ---- RNN, LSTM, GRU --------------------------------------------------------

RNNBase::RNNBase(const char* type_name, RNNMode mode, int64_t input_size, int64_t hidden_size,
                 const RNNOptions& options)
    : Module(type_name),
      mode(mode),
      input_size(input_size),
      hidden_size(hidden_size),
      options(options) {
  check_sizes(type_name, input_size, hidden_size);
  KILN_CHECK_VALUE(options.num_layers > 0, type_name,
                   ": num_layers must be greater than zero, got ", options.num_layers);
  KILN_CHECK_VALUE(options.dropout >= 0 && options.dropout <= 1,
                   "dropout should be a number in range [0, 1] representing the probability of "
                   "an element being zeroed, got ",
                   options.dropout);
  KILN_CHECK_VALUE(options.proj_size == 0, type_name, ": proj_size=", options.proj_size,
                   " is not supported by kiln (only proj_size=0)");
  const int64_t gates = functional::gate_count(mode) * hidden_size;
  const int64_t directions = options.bidirectional ? 2 : 1;
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    const int64_t layer_input = layer == 0 ? input_size : hidden_size * directions;
    for (int64_t d = 0; d < directions; ++d) {
      const std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      weights_.push_back(register_parameter("weight_ih" + suffix, empty({gates, layer_input})));
      weights_.push_back(register_parameter("weight_hh" + suffix, empty({gates, hidden_size})));
      if (!options.bias) continue;
      weights_.push_back(register_parameter("bias_ih" + suffix, empty({gates})));
      weights_.push_back(register_parameter("bias_hh" + suffix, empty({gates})));
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  reset_uniform(weights_, hidden_size);
}

std::vector<Tensor> RNNBase::flat_weights() const {
  return weights_;
}

RNNResult RNNBase::forward_with_state(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  functional::RNNOptions f{.num_layers = options.num_layers,
                           .bias = options.bias,
                           .batch_first = options.batch_first,
                           .dropout = options.dropout,
                           .training = is_training(),
                           .bidirectional = options.bidirectional};
  return functional::recurrent(mode, input, h0, c0, weights_, f);
}

Tensor RNNBase::forward(const Tensor& input) {
  return forward_with_state(input).output;
}

std::string RNNBase::extra_repr() const {
  std::string out = str(input_size, ", ", hidden_size);
  if (options.num_layers != 1) out += str(", num_layers=", options.num_layers);
  if (!options.bias) out += ", bias=False";
  if (options.batch_first) out += ", batch_first=True";
  if (options.dropout != 0) out += str(", dropout=", options.dropout);
  if (options.bidirectional) out += ", bidirectional=True";
  return out;
}

RNN::RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options,
         const std::string& nonlinearity)
    : RNNBase("RNN", functional::rnn_nonlinearity_mode(nonlinearity), input_size, hidden_size,
              options),
      nonlinearity(nonlinearity) {}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("LSTM", RNNMode::LSTM, input_size, hidden_size, options) {}

GRU::GRU(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("GRU", RNNMode::GRU, input_size, hidden_size, options) {}

// ---- cells -----------------------------------------------------------------

RNNCellBase::RNNCellBase(const char* type_name, int64_t input_size, int64_t hidden_size, bool bias,
                         int64_t gates)
    : Module(type_name), input_size(input_size), hidden_size(hidden_size) {
  check_sizes(type_name, input_size, hidden_size);
  weight_ih = register_parameter("weight_ih", empty({gates * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", empty({gates * hidden_size, hidden_size}));
  bias_ih = register_parameter("bias_ih", bias ? empty({gates * hidden_size}) : Tensor());
  bias_hh = register_parameter("bias_hh", bias ? empty({gates * hidden_size}) : Tensor());
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  reset_uniform({weight_ih, weight_hh, bias_ih, bias_hh}, hidden_size);
}

std::string RNNCellBase::extra_repr() const {
  std::string out = str(input_size, ", ", hidden_size);
  if (!bias_ih.defined()) out += ", bias=False";
  return out;
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, std::string nonlinearity)
    : RNNCellBase("RNNCell", input_size, hidden_size, bias, 1),
      nonlinearity(std::move(nonlinearity)) {
  functional::rnn_nonlinearity_mode(this->nonlinearity);
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& h) {
  return functional::rnn_cell(input, h, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity);
}

std::string RNNCell::extra_repr() const {
  std::string out = RNNCellBase::extra_repr();
  if (nonlinearity != "tanh") out += ", nonlinearity=" + nonlinearity;
  return out;
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase("LSTMCell", input_size, hidden_size, bias, 4) {}

std::pair<Tensor, Tensor> LSTMCell::forward_with_state(const Tensor& input, const Tensor& h,
                                                       const Tensor& c) {
  return functional::lstm_cell(input, h, c, weight_ih, weight_hh, bias_ih, bias_hh);
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase("GRUCell", input_size, hidden_size, bias, 3) {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& h) {
  return functional::gru_cell(input, h, weight_ih, weight_hh, bias_ih, bias_hh);
}

}  // namespace kiln::nn
