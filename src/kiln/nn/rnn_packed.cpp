// torch.nn.utils.rnn over kiln ops. The batch sizes and lengths are read on
// the host (they set the shapes); the data moves only through index_select
// of flat row indices (packed row n <-> padded row t * B + b) and cat, so
// gradients reach every input. Errors read as PyTorch's
// (aten/src/ATen/native/PackedSequence.cpp and torch/nn/utils/rnn.py).
#include "kiln/nn/rnn_packed.h"

#include <algorithm>
#include <numeric>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/view.h"

namespace kiln::nn::utils::rnn {

namespace {

// A 1-D tensor of integers as host values (lengths, batch sizes).
IntList host_ints(const Tensor& t, const char* what) {
  KILN_CHECK(t.defined() && t.dim() == 1, what, " must be a 1-D tensor, got ",
             t.defined() ? t.dim() : 0, "-D");
  return to(t, DType::Int64).to_vector<int64_t>();
}

Tensor int64_tensor(const IntList& values) {
  return tensor(values, {int64_t(values.size())}, DType::Int64);
}

// shape with its leading dims replaced by `leading`: [leading..., shape[skip:]...].
IntList with_leading(const IntList& leading, const IntList& shape, size_t skip) {
  IntList out = leading;
  out.insert(out.end(), shape.begin() + std::ptrdiff_t(skip), shape.end());
  return out;
}

// The padded row (t * batch + b) of every packed row, in packed order.
Tensor packed_rows(const IntList& batch_sizes, int64_t batch) {
  IntList rows;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    for (int64_t b = 0; b < batch_sizes[t]; ++b)
      rows.push_back(int64_t(t) * batch + b);
  }
  return int64_tensor(rows);
}

// padded [T, B, *] -> packed data [N, *].
Tensor pack_rows(const Tensor& padded, const IntList& batch_sizes) {
  const int64_t steps = padded.shape()[0], batch = padded.shape()[1];
  Tensor flat = reshape(padded, with_leading({steps * batch}, padded.shape(), 2));
  return index_select(flat, 0, packed_rows(batch_sizes, batch));
}

// Each sequence's length, from the batch sizes (non-increasing).
IntList lengths_of(const IntList& batch_sizes) {
  IntList lengths(size_t(batch_sizes.empty() ? 0 : batch_sizes[0]), 0);
  for (int64_t size : batch_sizes) {
    for (int64_t b = 0; b < size; ++b)
      ++lengths[size_t(b)];
  }
  return lengths;
}

IntList checked_batch_sizes(const PackedSequence& sequence) {
  IntList batch_sizes = host_ints(sequence.batch_sizes, "batch_sizes");
  KILN_CHECK(!batch_sizes.empty() && batch_sizes[0] > 0,
             "PackedSequence: batch_sizes must be non-empty and start above 0");
  for (size_t t = 1; t < batch_sizes.size(); ++t)
    KILN_CHECK(batch_sizes[t] <= batch_sizes[t - 1] && batch_sizes[t] > 0,
               "PackedSequence: batch_sizes must be positive and non-increasing, got ",
               batch_sizes);
  const Tensor& data = sequence.data;
  KILN_CHECK(data.defined() && data.dim() >= 1, "PackedSequence: data must have at least 1 dim");
  const int64_t rows = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t(0));
  KILN_CHECK(data.shape()[0] == rows, "PackedSequence: data has ", data.shape()[0],
             " rows but batch_sizes ", batch_sizes, " add up to ", rows);
  return batch_sizes;
}

// packed data [N, *] -> padded [steps, B, *] (sorted batch order), the
// missing steps padding_value.
Tensor unpack_rows(const Tensor& data, const IntList& batch_sizes, int64_t steps,
                   double padding_value) {
  const int64_t batch = batch_sizes[0], rows = data.shape()[0];
  Tensor pad_row = full(with_leading({1}, data.shape(), 1), padding_value, data.dtype());
  Tensor source = cat({data, pad_row}, 0);
  IntList index(size_t(steps * batch), rows);  // row `rows` is the padding
  int64_t offset = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    for (int64_t b = 0; b < batch_sizes[t]; ++b)
      index[t * size_t(batch) + size_t(b)] = offset + b;
    offset += batch_sizes[t];
  }
  Tensor padded = index_select(source, 0, int64_tensor(index));
  return reshape(padded, with_leading({steps, batch}, data.shape(), 1));
}

}  // namespace

Tensor invert_permutation(const Tensor& permutation) {
  if (!permutation.defined()) return permutation;
  return argsort(permutation, 0, false, true);
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value,
                    const std::string& padding_side) {
  KILN_CHECK(!sequences.empty(), "received an empty list of sequences");
  KILN_CHECK(padding_side == "left" || padding_side == "right",
             "Expected padding_side to be one of left or right, but got ", padding_side, ".");
  const Tensor& first = sequences[0];
  KILN_CHECK(first.defined() && first.dim() >= 1, "pad_sequence: expected sequences of at least ",
             "1 dim ([L, *]), got a 0-d tensor");
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    const bool same_trailing =
        s.dim() == first.dim() &&
        std::equal(s.shape().begin() + 1, s.shape().end(), first.shape().begin() + 1);
    KILN_CHECK(s.dim() >= 1 && same_trailing, "pad_sequence: sequence ", i, " has shape ",
               s.shape(), " but sequence 0 has ", first.shape(),
               " (the dims past the first must agree)");
    longest = std::max(longest, s.shape()[0]);
  }
  std::vector<Tensor> padded;
  padded.reserve(sequences.size());
  for (const Tensor& s : sequences) {
    Tensor sequence = to(s, first.dtype());
    const int64_t missing = longest - s.shape()[0];
    if (missing == 0) {
      padded.push_back(sequence);
      continue;
    }
    Tensor pad = full(with_leading({missing}, first.shape(), 1), padding_value, first.dtype());
    padded.push_back(padding_side == "right" ? cat({sequence, pad}, 0) : cat({pad, sequence}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths_tensor,
                                    bool batch_first, bool enforce_sorted) {
  KILN_CHECK(input.defined() && input.dim() >= 2,
             "pack_padded_sequence: expected input of at least 2 dims ([T, B, *]), got ",
             input.defined() ? input.dim() : 0, "-D");
  KILN_CHECK(input.numel() > 0, "Cannot pack empty tensors.");
  Tensor x = batch_first ? transpose(input, 0, 1) : input;
  const int64_t steps = x.shape()[0], batch = x.shape()[1];
  IntList lengths = host_ints(lengths_tensor, "'lengths' argument");
  KILN_CHECK(int64_t(lengths.size()) == batch, "Expected `len(lengths)` to be equal to ",
             "batch_size, but got ", lengths.size(), " (batch_size=", batch, ")");

  PackedSequence out;
  if (!enforce_sorted) {
    // Longest first; equal lengths keep their order (PyTorch's CPU sort).
    IntList order(lengths.size());
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
    IntList sorted;
    for (int64_t i : order)
      sorted.push_back(lengths[size_t(i)]);
    lengths = sorted;
    out.sorted_indices = int64_tensor(order);
    out.unsorted_indices = invert_permutation(out.sorted_indices);
    x = index_select(x, 1, out.sorted_indices);
  }
  KILN_CHECK(lengths.back() > 0, "Length of all samples has to be greater than 0, but found an ",
             "element in 'lengths' that is <= 0");
  for (size_t b = 1; b < lengths.size(); ++b)
    KILN_CHECK(lengths[b] <= lengths[b - 1],
               "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
               "to sidestep this requirement if you do not need ONNX exportability.");
  KILN_CHECK(lengths[0] <= steps, "pack_padded_sequence: a sequence length of ", lengths[0],
             " exceeds the input's ", steps, " steps");

  IntList batch_sizes;
  for (int64_t t = 0; t < lengths[0]; ++t)
    batch_sizes.push_back(
        std::count_if(lengths.begin(), lengths.end(), [t](int64_t length) { return length > t; }));
  out.data = pack_rows(x, batch_sizes);
  out.batch_sizes = int64_tensor(batch_sizes);
  return out;
}

std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first,
                                              double padding_value,
                                              std::optional<int64_t> total_length) {
  const IntList batch_sizes = checked_batch_sizes(sequence);
  const int64_t longest = int64_t(batch_sizes.size());
  KILN_CHECK_VALUE(!total_length || *total_length >= longest,
                   "Expected total_length to be at least the length of the longest sequence in "
                   "input, but got total_length=",
                   total_length.value_or(0), " and max sequence length being ", longest);
  Tensor padded =
      unpack_rows(sequence.data, batch_sizes, total_length.value_or(longest), padding_value);
  Tensor lengths = int64_tensor(lengths_of(batch_sizes));
  if (batch_first) padded = transpose(padded, 0, 1);
  if (!sequence.unsorted_indices.defined()) return {padded, lengths};
  return {index_select(padded, batch_first ? 0 : 1, sequence.unsorted_indices),
          index_select(lengths, 0, sequence.unsorted_indices)};
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  IntList lengths;
  for (const Tensor& s : sequences)
    lengths.push_back(s.defined() && s.dim() >= 1 ? s.shape()[0] : 0);
  return pack_padded_sequence(pad_sequence(sequences), int64_tensor(lengths), false,
                              enforce_sorted);
}

std::vector<Tensor> unpad_sequence(const Tensor& padded, const Tensor& lengths_tensor,
                                   bool batch_first) {
  KILN_CHECK(padded.defined() && padded.dim() >= 2,
             "unpad_sequence: expected a padded batch of at least 2 dims");
  Tensor batch_major = batch_first ? padded : transpose(padded, 0, 1);
  const IntList lengths = host_ints(lengths_tensor, "lengths");
  KILN_CHECK_VALUE(int64_t(lengths.size()) == batch_major.shape()[0],
                   "unpad_sequence: ", lengths.size(), " lengths for a batch of ",
                   batch_major.shape()[0]);
  std::vector<Tensor> sequences;
  for (size_t b = 0; b < lengths.size(); ++b) {
    KILN_CHECK(lengths[b] >= 0 && lengths[b] <= batch_major.shape()[1], "unpad_sequence: length ",
               lengths[b], " of sequence ", b, " is outside [0, ", batch_major.shape()[1], "]");
    sequences.push_back(narrow(select(batch_major, 0, int64_t(b)), 0, 0, lengths[b]));
  }
  return sequences;
}

std::vector<Tensor> unpack_sequence(const PackedSequence& sequence) {
  auto [padded, lengths] = pad_packed_sequence(sequence, true);
  return unpad_sequence(padded, lengths, true);
}

PackedRNNResult recurrent_packed(functional::RNNMode mode, const PackedSequence& input,
                                 const Tensor& h0, const Tensor& c0,
                                 const std::vector<Tensor>& weights,
                                 const functional::RNNOptions& options) {
  const IntList batch_sizes = checked_batch_sizes(input);
  KILN_CHECK(input.data.dim() == 2, "RNN: packed input data must be 2-D [N, input_size], got ",
             "shape ", input.data.shape());
  const int64_t batch = batch_sizes[0];
  // The layers run on the sorted batch; the states come in and go out in
  // the caller's order.
  auto to_sorted = [&](const Tensor& state, const char* what) {
    if (!state.defined()) return state;
    KILN_CHECK(state.dim() == 3 && state.shape()[1] == batch, "RNN: expected ", what,
               " of shape [num_layers * num_directions, ", batch, ", hidden_size] for this ",
               "packed batch, got ", state.shape());
    if (!input.sorted_indices.defined()) return state;
    return index_select(state, 1, input.sorted_indices);
  };
  auto to_caller = [&](const Tensor& state) {
    if (!state.defined() || !input.unsorted_indices.defined()) return state;
    return index_select(state, 1, input.unsorted_indices);
  };
  Tensor padded = unpack_rows(input.data, batch_sizes, int64_t(batch_sizes.size()), 0.0);
  functional::RNNOptions time_major = options;
  time_major.batch_first = false;
  functional::RNNResult r =
      functional::recurrent_masked(mode, padded, int64_tensor(lengths_of(batch_sizes)),
                                   to_sorted(h0, "hx"), to_sorted(c0, "cx"), weights, time_major);
  PackedRNNResult out;
  out.output = {pack_rows(r.output, batch_sizes), input.batch_sizes, input.sorted_indices,
                input.unsorted_indices};
  out.h_n = to_caller(r.h_n);
  out.c_n = to_caller(r.c_n);
  return out;
}

}  // namespace kiln::nn::utils::rnn
