// The pointwise part of a recurrent cell step, over contiguous row-major
// buffers (the op glue makes inputs contiguous first). The matrix products
// of the step (x W_ihᵀ + b_ih, h W_hhᵀ + b_hh) come in as `gi` and `gh`, so
// the adds, the gate activations and the state update are one pass over
// the gates, as PyTorch's fused CUDA cells and cuDNN do.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// LSTM, gates in PyTorch's order (i, f, g, o) along each row of 4H:
//   i, f, o = sigmoid(gi + gh);  g = tanh(gi + gh)
//   c_out = f c + i g;  h_out = o tanh(c_out)
// gi, gh: [rows, 4H]; c, h_out, c_out: [rows, H].
template <typename T>
void lstm_cell_pointwise(const T* gi, const T* gh, const T* c, T* h_out, T* c_out, int64_t rows,
                         int64_t hidden);

// GRU, gates in PyTorch's order (r, z, n) along each row of 3H:
//   r, z = sigmoid(gi + gh);  n = tanh(gi_n + r gh_n)
//   h_out = (1 - z) n + z h
// gi, gh: [rows, 3H]; h, h_out: [rows, H].
template <typename T>
void gru_cell_pointwise(const T* gi, const T* gh, const T* h, T* h_out, int64_t rows,
                        int64_t hidden);

// The backward of each, recomputing the gates from gi and gh (the forward
// keeps nothing else). LSTM: from c_out and the gradients dh_out, dc_out
// [rows, H], the gradient of the gates' pre-activations (= of gi and of gh)
// dgates [rows, 4H] and of the cell state dc [rows, H].
template <typename T>
void lstm_cell_pointwise_backward(const T* gi, const T* gh, const T* c, const T* c_out,
                                  const T* dh_out, const T* dc_out, T* dgates, T* dc, int64_t rows,
                                  int64_t hidden);

// GRU: from dh_out [rows, H], dgi and dgh [rows, 3H] (they differ in the n
// gate, where gh_n is scaled by r) and dh [rows, H].
template <typename T>
void gru_cell_pointwise_backward(const T* gi, const T* gh, const T* h, const T* dh_out, T* dgi,
                                 T* dgh, T* dh, int64_t rows, int64_t hidden);

}  // namespace kiln::cpu
