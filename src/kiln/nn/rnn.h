// Recurrent layers as functions: the cells (one step) and the multi-layer,
// optionally bidirectional RNN, LSTM and GRU over a sequence, with
// PyTorch's semantics and weight layout. The modules (rnn_modules.h) and
// the Python layers (kiln.nn.LSTM, ...) call these.
//
// A layer runs one kiln::scan per direction: the input projection of the
// whole sequence, x W_ihᵀ + b_ih, is one product before the loop; the loop
// body is h W_hhᵀ + b_hh and the fused pointwise op of the cell
// (ops/rnn.h). Eagerly the scan runs its steps; a trace records it as one
// loop node, so a traced LSTM is one loop per layer and direction.
//
//   namespace F = kiln::nn::functional;
//   auto [y, h_n, c_n] = F::lstm(x, {}, {}, weights, {.num_layers = 2, .batch_first = true});
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::nn::functional {

// ---- cells: one step. x [B, I] or [I] (unbatched, with h [H]); the weights
// are PyTorch's: w_ih [G*H, I], w_hh [G*H, H], b_ih and b_hh [G*H] or
// undefined, with G = 1 (RNN), 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n).
// An undefined h (and c) starts from zeros.

// h' = act(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh), act "tanh" or "relu".
Tensor rnn_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = {}, const Tensor& b_hh = {},
                const std::string& nonlinearity = "tanh");
// (h', c').
std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = {},
                                    const Tensor& b_hh = {});
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = {}, const Tensor& b_hh = {});

// ---- layers over a sequence ----

enum class RNNMode { RNNTanh, RNNRelu, LSTM, GRU };
// "RNN_TANH", "RNN_RELU", "LSTM", "GRU" (PyTorch's names); an error otherwise.
RNNMode rnn_mode(const std::string& name);
// RNNTanh or RNNRelu for "tanh" or "relu"; an error otherwise.
RNNMode rnn_nonlinearity_mode(const std::string& nonlinearity);
int64_t gate_count(RNNMode mode);  // G above

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on each layer's output but the last, while training
  bool training = false;
  bool bidirectional = false;
};

// c_n is undefined except for the LSTM.
struct RNNResult {
  Tensor output, h_n, c_n;
};

// input: [T, B, I] ([B, T, I] when batch_first) or unbatched [T, I].
// h0 (and c0 for the LSTM): [num_layers * D, B, H] ([num_layers * D, H]
// unbatched), D = 2 when bidirectional, or undefined for zeros.
// weights: PyTorch's _flat_weights order, for each layer and then each
// direction (forward, reverse): w_ih, w_hh, and b_ih, b_hh when bias.
// output: [T, B, D * H] (batch_first: [B, T, D * H]), both directions'
// features side by side; h_n, c_n: the last state of each layer and
// direction, in the order of the weights.
RNNResult recurrent(RNNMode mode, const Tensor& input, const Tensor& h0, const Tensor& c0,
                    const std::vector<Tensor>& weights, const RNNOptions& options = {});

// recurrent over a padded batch of sequences of different lengths: lengths
// (integers [B]; undefined: all T) gives each sequence's steps. Past its
// end a sequence's state stays as it was and its output is zero, so h_n
// (c_n) hold each sequence's state at its own last step and the reverse
// direction starts each at its own last step: PyTorch's semantics for a
// PackedSequence (kiln/nn/rnn_packed.h runs packed input through this).
// Batched input only.
RNNResult recurrent_masked(RNNMode mode, const Tensor& input, const Tensor& lengths,
                           const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                           const RNNOptions& options = {});

// nonlinearity "tanh" or "relu".
RNNResult rnn(const Tensor& input, const Tensor& h0, const std::vector<Tensor>& weights,
              const RNNOptions& options = {}, const std::string& nonlinearity = "tanh");
inline RNNResult lstm(const Tensor& input, const Tensor& h0, const Tensor& c0,
                      const std::vector<Tensor>& weights, const RNNOptions& options = {}) {
  return recurrent(RNNMode::LSTM, input, h0, c0, weights, options);
}
inline RNNResult gru(const Tensor& input, const Tensor& h0, const std::vector<Tensor>& weights,
                     const RNNOptions& options = {}) {
  return recurrent(RNNMode::GRU, input, h0, {}, weights, options);
}

}  // namespace kiln::nn::functional
