// Batches of sequences of different lengths, as torch.nn.utils.rnn: padding
// a list of sequences into one tensor, packing a padded batch (only the
// steps each sequence has, step-major) and back, and running the recurrent
// layers over a packed batch.
//
// A packed batch holds the sequences sorted by decreasing length: data
// [N, *] is step 0 of every sequence, then step 1 of those that have one,
// and so on; batch_sizes[t] (int64) counts the sequences alive at step t.
// sorted_indices[i] is the input's batch index of sorted sequence i
// (undefined when the input was already sorted), unsorted_indices its
// inverse. Each function is made of index_select, cat and stack, so
// gradients flow to the padded (or packed) input.
//
//   namespace R = kiln::nn::utils::rnn;
//   R::PackedSequence packed = R::pack_padded_sequence(x, lengths, false, false);
//   auto [y, h_n, c_n] = R::recurrent_packed(RNNMode::LSTM, packed, {}, {}, weights);
//   auto [padded, y_lengths] = R::pad_packed_sequence(y);
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/nn/rnn.h"

namespace kiln::nn::utils::rnn {

struct PackedSequence {
  Tensor data, batch_sizes, sorted_indices, unsorted_indices;
};

// The inverse of a permutation (1-D int64): out[perm[i]] = i. Undefined in,
// undefined out.
Tensor invert_permutation(const Tensor& permutation);

// Sequences [L_i, *] padded with padding_value to the longest and stacked:
// [T, B, *], or [B, T, *] when batch_first. padding_side "right" or "left".
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false,
                    double padding_value = 0.0, const std::string& padding_side = "right");

// input [T, B, *] ([B, T, *] when batch_first) holding sequence b in its
// first lengths[b] steps (lengths: integers [B], read on the host). With
// enforce_sorted the lengths must not increase; otherwise the batch is
// sorted first (a stable sort, as PyTorch's on the CPU).
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths,
                                    bool batch_first = false, bool enforce_sorted = true);

// (padded [T, B, *] or [B, T, *], lengths int64 [B]) in the input's batch
// order; T is the longest sequence, or total_length when given.
std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence,
                                              bool batch_first = false, double padding_value = 0.0,
                                              std::optional<int64_t> total_length = std::nullopt);

// pad_sequence then pack_padded_sequence.
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);
// The first lengths[b] steps of each sequence of a padded batch.
std::vector<Tensor> unpad_sequence(const Tensor& padded, const Tensor& lengths,
                                   bool batch_first = false);
// The sequences of a packed batch, in the input's order.
std::vector<Tensor> unpack_sequence(const PackedSequence& sequence);

// c_n is undefined except for the LSTM.
struct PackedRNNResult {
  PackedSequence output;
  Tensor h_n, c_n;
};

// functional::recurrent over a packed batch (data [N, I]): output [N, D*H]
// packed like the input; h0, c0 and h_n, c_n [L*D, B, H] in the input's
// batch order, h_n (c_n) each sequence's state at its own last step.
// options.batch_first is ignored, as PyTorch ignores it for packed input.
PackedRNNResult recurrent_packed(functional::RNNMode mode, const PackedSequence& input,
                                 const Tensor& h0, const Tensor& c0,
                                 const std::vector<Tensor>& weights,
                                 const functional::RNNOptions& options = {});

}  // namespace kiln::nn::utils::rnn
