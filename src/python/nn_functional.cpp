// kiln._C.nn: the functional math of kiln/nn (losses, composed
// activations), bound once, so kiln.nn.functional and the Python modules
// run the same C++ the C++ API runs: one definition, one set of checks and
// messages.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "convert.h"
#include "kiln/nn/functional.h"

namespace kiln::python {
namespace {

namespace F = kiln::nn::functional;
using nb::arg;

}  // namespace

void bind_nn_functional(nb::module_& m) {
  m.def("silu", &F::silu, arg("input"));
  m.def("mish", &F::mish, arg("input"));
  m.def("hardtanh", &F::hardtanh, arg("input"), arg("min_val") = -1.0, arg("max_val") = 1.0);
  m.def("relu6", &F::relu6, arg("input"));
  m.def("hardsigmoid", &F::hardsigmoid, arg("input"));
  m.def("hardswish", &F::hardswish, arg("input"));
  m.def(
      "nll_loss",
      [](const Tensor& input, const Tensor& target, const OptTensor& weight, int64_t ignore_index,
         const std::string& reduction) {
        return F::nll_loss(
            input, target,
            {.weight = or_undefined(weight), .ignore_index = ignore_index, .reduction = reduction});
      },
      arg("input"), arg("target"), arg("weight").none() = nb::none(), arg("ignore_index") = -100,
      arg("reduction") = "mean");
  m.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, const OptTensor& weight, int64_t ignore_index,
         const std::string& reduction, double label_smoothing) {
        return F::cross_entropy(input, target,
                                {.weight = or_undefined(weight),
                                 .ignore_index = ignore_index,
                                 .reduction = reduction,
                                 .label_smoothing = label_smoothing});
      },
      arg("input"), arg("target"), arg("weight").none() = nb::none(), arg("ignore_index") = -100,
      arg("reduction") = "mean", arg("label_smoothing") = 0.0);
  m.def("mse_loss", &F::mse_loss, arg("input"), arg("target"), arg("reduction") = "mean");
  m.def("l1_loss", &F::l1_loss, arg("input"), arg("target"), arg("reduction") = "mean");
  m.def(
      "binary_cross_entropy_with_logits",
      [](const Tensor& input, const Tensor& target, const OptTensor& weight,
         const std::string& reduction, const OptTensor& pos_weight) {
        return F::binary_cross_entropy_with_logits(input, target,
                                                   {.weight = or_undefined(weight),
                                                    .pos_weight = or_undefined(pos_weight),
                                                    .reduction = reduction});
      },
      arg("input"), arg("target"), arg("weight").none() = nb::none(), arg("reduction") = "mean",
      arg("pos_weight").none() = nb::none());
  m.def(
      "binary_cross_entropy",
      [](const Tensor& input, const Tensor& target, const OptTensor& weight,
         const std::string& reduction) {
        return F::binary_cross_entropy(input, target, or_undefined(weight), reduction);
      },
      arg("input"), arg("target"), arg("weight").none() = nb::none(), arg("reduction") = "mean");
  m.def("smooth_l1_loss", &F::smooth_l1_loss, arg("input"), arg("target"),
        arg("reduction") = "mean", arg("beta") = 1.0);
  m.def(
      "huber_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction, double delta,
         const OptTensor& weight) {
        return F::huber_loss(input, target, reduction, delta, or_undefined(weight));
      },
      arg("input"), arg("target"), arg("reduction") = "mean", arg("delta") = 1.0,
      arg("weight").none() = nb::none());
  m.def("kl_div", &F::kl_div, arg("input"), arg("target"), arg("reduction") = "mean",
        arg("log_target") = false);
  m.def("cosine_embedding_loss", &F::cosine_embedding_loss, arg("input1"), arg("input2"),
        arg("target"), arg("margin") = 0.0, arg("reduction") = "mean");
  m.def("cosine_similarity", &F::cosine_similarity, arg("x1"), arg("x2"), arg("dim") = 1,
        arg("eps") = 1e-8);
  m.def("normalize", &F::normalize, arg("input"), arg("p") = 2.0, arg("dim") = 1,
        arg("eps") = 1e-12);
}

}  // namespace kiln::python
