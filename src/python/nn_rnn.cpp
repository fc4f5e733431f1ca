// kiln._C's recurrent layers and cells (kiln/nn/rnn.h), for kiln.nn.RNN,
// LSTM, GRU and the cells: arguments converted, the C++ function called.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/rnn_packed.h"

namespace kiln::python {
namespace {

namespace F = kiln::nn::functional;
using nb::arg;

}  // namespace

void bind_nn_rnn(nb::module_& m) {
  m.def(
      "rnn_layers",
      [](const std::string& mode, const Tensor& input, const OptTensor& h0, const OptTensor& c0,
         const std::vector<Tensor>& weights, bool bias, int64_t num_layers, double dropout,
         bool training, bool bidirectional, bool batch_first) {
        F::RNNResult r =
            F::recurrent(F::rnn_mode(mode), input, or_undefined(h0), or_undefined(c0), weights,
                         {.num_layers = num_layers,
                          .bias = bias,
                          .batch_first = batch_first,
                          .dropout = dropout,
                          .training = training,
                          .bidirectional = bidirectional});
        return std::make_tuple(r.output, r.h_n, or_none(r.c_n));
      },
      arg("mode"), arg("input"), arg("h0").none(), arg("c0").none(), arg("weights"), arg("bias"),
      arg("num_layers"), arg("dropout"), arg("training"), arg("bidirectional"), arg("batch_first"),
      "functional::recurrent: (output, h_n, c_n or None); mode is RNN_TANH, RNN_RELU, LSTM or "
      "GRU, weights in PyTorch's _flat_weights order.");
  m.def(
      "rnn_layers_packed",
      [](const std::string& mode, const Tensor& data, const Tensor& batch_sizes,
         const OptTensor& sorted_indices, const OptTensor& unsorted_indices, const OptTensor& h0,
         const OptTensor& c0, const std::vector<Tensor>& weights, bool bias, int64_t num_layers,
         double dropout, bool training, bool bidirectional) {
        namespace R = kiln::nn::utils::rnn;
        R::PackedSequence input{data, batch_sizes, or_undefined(sorted_indices),
                                or_undefined(unsorted_indices)};
        R::PackedRNNResult r = R::recurrent_packed(F::rnn_mode(mode), input, or_undefined(h0),
                                                   or_undefined(c0), weights,
                                                   {.num_layers = num_layers,
                                                    .bias = bias,
                                                    .dropout = dropout,
                                                    .training = training,
                                                    .bidirectional = bidirectional});
        return std::make_tuple(r.output.data, r.h_n, or_none(r.c_n));
      },
      arg("mode"), arg("data"), arg("batch_sizes"), arg("sorted_indices").none(),
      arg("unsorted_indices").none(), arg("h0").none(), arg("c0").none(), arg("weights"),
      arg("bias"), arg("num_layers"), arg("dropout"), arg("training"), arg("bidirectional"),
      "utils::rnn::recurrent_packed: (output data, h_n, c_n or None) for a PackedSequence's "
      "four tensors; h0, c0, h_n and c_n in the caller's batch order.");
  m.def(
      "rnn_cell",
      [](const Tensor& x, const OptTensor& h, const Tensor& w_ih, const Tensor& w_hh,
         const OptTensor& b_ih, const OptTensor& b_hh, const std::string& nonlinearity) {
        return F::rnn_cell(x, or_undefined(h), w_ih, w_hh, or_undefined(b_ih), or_undefined(b_hh),
                           nonlinearity);
      },
      arg("input"), arg("hx").none(), arg("w_ih"), arg("w_hh"), arg("b_ih").none(),
      arg("b_hh").none(), arg("nonlinearity") = "tanh");
  m.def(
      "lstm_cell",
      [](const Tensor& x, const OptTensor& h, const OptTensor& c, const Tensor& w_ih,
         const Tensor& w_hh, const OptTensor& b_ih, const OptTensor& b_hh) {
        return F::lstm_cell(x, or_undefined(h), or_undefined(c), w_ih, w_hh, or_undefined(b_ih),
                            or_undefined(b_hh));
      },
      arg("input"), arg("hx").none(), arg("cx").none(), arg("w_ih"), arg("w_hh"),
      arg("b_ih").none(), arg("b_hh").none());
  m.def(
      "gru_cell",
      [](const Tensor& x, const OptTensor& h, const Tensor& w_ih, const Tensor& w_hh,
         const OptTensor& b_ih, const OptTensor& b_hh) {
        return F::gru_cell(x, or_undefined(h), w_ih, w_hh, or_undefined(b_ih), or_undefined(b_hh));
      },
      arg("input"), arg("hx").none(), arg("w_ih"), arg("w_hh"), arg("b_ih").none(),
      arg("b_hh").none());
}

}  // namespace kiln::python
