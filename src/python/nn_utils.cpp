// kiln._C.nn's gradient utilities (kiln/nn/grad_utils.h) and padded and
// packed sequences (kiln/nn/rnn_packed.h), for kiln.nn.utils and
// kiln.nn.utils.rnn: arguments converted, the C++ function called. A
// PackedSequence crosses as its four tensors (data, batch_sizes,
// sorted_indices, unsorted_indices), the last two None when absent.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/nn/grad_utils.h"
#include "kiln/nn/rnn_packed.h"

namespace kiln::python {
namespace {

namespace U = kiln::nn::utils;
namespace R = kiln::nn::utils::rnn;
using nb::arg;

using PackedTuple = std::tuple<Tensor, Tensor, OptTensor, OptTensor>;

PackedTuple packed_to_python(const R::PackedSequence& p) {
  return {p.data, p.batch_sizes, or_none(p.sorted_indices), or_none(p.unsorted_indices)};
}

R::PackedSequence packed_of(const Tensor& data, const Tensor& batch_sizes,
                            const OptTensor& sorted_indices, const OptTensor& unsorted_indices) {
  return {data, batch_sizes, or_undefined(sorted_indices), or_undefined(unsorted_indices)};
}

void bind_grad_utils(nb::module_& m) {
  m.def("vector_norm", &U::vector_norm, arg("input"), arg("ord") = 2.0);
  m.def("get_total_norm", &U::get_total_norm, arg("tensors"), arg("norm_type") = 2.0,
        arg("error_if_nonfinite") = false);
  m.def("clip_grads_with_norm_", &U::clip_grads_with_norm_, arg("parameters"), arg("max_norm"),
        arg("total_norm"));
  m.def("clip_grad_norm_", &U::clip_grad_norm_, arg("parameters"), arg("max_norm"),
        arg("norm_type") = 2.0, arg("error_if_nonfinite") = false);
  m.def("clip_grad_value_", &U::clip_grad_value_, arg("parameters"), arg("clip_value"));
  m.def("parameters_to_vector", &U::parameters_to_vector, arg("parameters"));
  m.def("vector_to_parameters", &U::vector_to_parameters, arg("vec"), arg("parameters"));
}

void bind_packed_sequences(nb::module_& m) {
  m.def(
      "invert_permutation",
      [](const OptTensor& p) { return or_none(R::invert_permutation(or_undefined(p))); },
      arg("permutation").none());
  m.def("pad_sequence", &R::pad_sequence, arg("sequences"), arg("batch_first") = false,
        arg("padding_value") = 0.0, arg("padding_side") = "right");
  m.def(
      "pack_padded_sequence",
      [](const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
        return packed_to_python(
            R::pack_padded_sequence(input, lengths, batch_first, enforce_sorted));
      },
      arg("input"), arg("lengths"), arg("batch_first") = false, arg("enforce_sorted") = true);
  m.def(
      "pad_packed_sequence",
      [](const Tensor& data, const Tensor& batch_sizes, const OptTensor& sorted_indices,
         const OptTensor& unsorted_indices, bool batch_first, double padding_value,
         std::optional<int64_t> total_length) {
        return R::pad_packed_sequence(
            packed_of(data, batch_sizes, sorted_indices, unsorted_indices), batch_first,
            padding_value, total_length);
      },
      arg("data"), arg("batch_sizes"), arg("sorted_indices").none(), arg("unsorted_indices").none(),
      arg("batch_first") = false, arg("padding_value") = 0.0,
      arg("total_length").none() = nb::none());
  m.def(
      "pack_sequence",
      [](const std::vector<Tensor>& sequences, bool enforce_sorted) {
        return packed_to_python(R::pack_sequence(sequences, enforce_sorted));
      },
      arg("sequences"), arg("enforce_sorted") = true);
  m.def("unpad_sequence", &R::unpad_sequence, arg("padded_sequences"), arg("lengths"),
        arg("batch_first") = false);
  m.def(
      "unpack_sequence",
      [](const Tensor& data, const Tensor& batch_sizes, const OptTensor& sorted_indices,
         const OptTensor& unsorted_indices) {
        return R::unpack_sequence(packed_of(data, batch_sizes, sorted_indices, unsorted_indices));
      },
      arg("data"), arg("batch_sizes"), arg("sorted_indices").none(),
      arg("unsorted_indices").none());
}

}  // namespace

void bind_nn_utils(nb::module_& m) {
  bind_grad_utils(m);
  bind_packed_sequences(m);
}

}  // namespace kiln::python
