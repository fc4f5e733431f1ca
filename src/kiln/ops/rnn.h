// The fused pointwise steps of the recurrent cells (nn/rnn.h builds the
// cells and layers on them). The step's two products come in already made:
// gi = x W_ihᵀ + b_ih (for a whole sequence at once, outside the loop) and
// gh = h W_hhᵀ + b_hh; these ops do the rest of the step in one pass.
#pragma once

#include <utility>

#include "kiln/core/tensor.h"

namespace kiln {

// LSTM: gi, gh [B, 4H] (gates i, f, g, o), c [B, H] -> (h', c').
std::pair<Tensor, Tensor> lstm_cell_pointwise(const Tensor& gi, const Tensor& gh, const Tensor& c);

// GRU: gi, gh [B, 3H] (gates r, z, n), h [B, H] -> h'.
Tensor gru_cell_pointwise(const Tensor& gi, const Tensor& gh, const Tensor& h);

}  // namespace kiln
