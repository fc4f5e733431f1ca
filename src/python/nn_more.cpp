// kiln._C.nn's functions of kiln/nn/layers_more.h and loss_more.h (the
// activations, pools, dropouts, norms and losses that ported PyTorch
// programs reach for), for kiln.nn._functional_more and the modules of
// kiln.nn.layers_more: arguments converted, the C++ function called.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/nn/layers_more.h"
#include "kiln/nn/loss_more.h"

namespace kiln::python {
namespace {

namespace F = kiln::nn::functional;
using nb::arg;

void bind_activations(nb::module_& m) {
  m.def("prelu", &F::prelu, arg("input"), arg("weight"));
  m.def("selu", &F::selu, arg("input"));
  m.def("celu", &F::celu, arg("input"), arg("alpha"));
  m.def("glu", &F::glu, arg("input"), arg("dim"));
  m.def("logsigmoid", &F::logsigmoid, arg("input"));
  m.def("softsign", &F::softsign, arg("input"));
  m.def("tanhshrink", &F::tanhshrink, arg("input"));
  m.def("hardshrink", &F::hardshrink, arg("input"), arg("lambd"));
  m.def("softshrink", &F::softshrink, arg("input"), arg("lambd"));
  m.def("threshold", &F::threshold, arg("input"), arg("threshold"), arg("value"));
  m.def("softmin", &F::softmin, arg("input"), arg("dim"));
  m.def("softmax2d", &F::softmax2d, arg("input"));
}

void bind_pools(nb::module_& m) {
  m.def("max_pool1d", &F::max_pool1d, arg("input"), arg("kernel_size"), arg("stride"),
        arg("padding"), arg("dilation"), arg("ceil_mode"));
  m.def("avg_pool1d", &F::avg_pool1d, arg("input"), arg("kernel_size"), arg("stride"),
        arg("padding"), arg("ceil_mode"), arg("count_include_pad"));
  m.def("adaptive_avg_pool1d", &F::adaptive_avg_pool1d, arg("input"), arg("output_size"));
  m.def("adaptive_max_pool1d_with_indices", &F::adaptive_max_pool1d_with_indices, arg("input"),
        arg("output_size"));
  m.def("adaptive_max_pool2d_with_indices", &F::adaptive_max_pool2d_with_indices, arg("input"),
        arg("output_size"));
  m.def("lp_pool1d", &F::lp_pool1d, arg("input"), arg("norm_type"), arg("kernel_size"),
        arg("stride"), arg("ceil_mode"));
  m.def("lp_pool2d", &F::lp_pool2d, arg("input"), arg("norm_type"), arg("kernel_size"),
        arg("stride"), arg("ceil_mode"));
  m.def("unfold", &F::unfold, arg("input"), arg("kernel_size"), arg("dilation"), arg("padding"),
        arg("stride"));
  m.def("fold", &F::fold, arg("input"), arg("output_size"), arg("kernel_size"), arg("dilation"),
        arg("padding"), arg("stride"));
  m.def("affine_grid", &F::affine_grid, arg("theta"), arg("size"), arg("align_corners"));
}

void bind_dropouts_norms_shapes(nb::module_& m) {
  m.def("feature_dropout", &F::feature_dropout, arg("input"), arg("p"), arg("train"));
  m.def("dropout1d", &F::dropout1d, arg("input"), arg("p"), arg("train"));
  m.def("dropout3d", &F::dropout3d, arg("input"), arg("p"), arg("train"));
  m.def("alpha_dropout", &F::alpha_dropout, arg("input"), arg("p"), arg("train"));
  m.def("feature_alpha_dropout", &F::feature_alpha_dropout, arg("input"), arg("p"), arg("train"));
  m.def(
      "rms_norm",
      [](const Tensor& x, const IntList& normalized_shape, const OptTensor& weight,
         std::optional<double> eps) {
        return F::rms_norm(x, normalized_shape, or_undefined(weight), eps);
      },
      arg("input"), arg("normalized_shape"), arg("weight").none(), arg("eps").none());
  m.def("local_response_norm", &F::local_response_norm, arg("input"), arg("size"), arg("alpha"),
        arg("beta"), arg("k"));
  m.def("unflatten", &F::unflatten, arg("input"), arg("dim"), arg("sizes"));
  m.def("channel_shuffle", &F::channel_shuffle, arg("input"), arg("groups"));
  m.def(
      "embedding_bag",
      [](const Tensor& input, const Tensor& weight, const OptTensor& offsets,
         const std::string& mode, const OptTensor& per_sample_weights, bool include_last_offset,
         std::optional<int64_t> padding_idx) {
        return F::embedding_bag(input, weight,
                                {.offsets = or_undefined(offsets),
                                 .mode = mode,
                                 .per_sample_weights = or_undefined(per_sample_weights),
                                 .include_last_offset = include_last_offset,
                                 .padding_idx = padding_idx});
      },
      arg("input"), arg("weight"), arg("offsets").none(), arg("mode"),
      arg("per_sample_weights").none(), arg("include_last_offset"), arg("padding_idx").none());
  m.def("embedding_renorm_", &F::embedding_renorm_, arg("weight"), arg("indices"), arg("max_norm"),
        arg("norm_type"));
}

void bind_losses(nb::module_& m) {
  m.def("pairwise_distance", &F::pairwise_distance, arg("x1"), arg("x2"), arg("p"), arg("eps"),
        arg("keepdim"));
  m.def(
      "multilabel_soft_margin_loss",
      [](const Tensor& input, const Tensor& target, const OptTensor& weight,
         const std::string& reduction) {
        return F::multilabel_soft_margin_loss(input, target, or_undefined(weight), reduction);
      },
      arg("input"), arg("target"), arg("weight").none(), arg("reduction"));
  m.def("margin_ranking_loss", &F::margin_ranking_loss, arg("input1"), arg("input2"), arg("target"),
        arg("margin"), arg("reduction"));
  m.def("triplet_margin_loss", &F::triplet_margin_loss, arg("anchor"), arg("positive"),
        arg("negative"), arg("margin"), arg("p"), arg("eps"), arg("swap"), arg("reduction"));
  // var: a tensor, or one number for every element.
  m.def("gaussian_nll_loss",
        nb::overload_cast<const Tensor&, const Tensor&, const Tensor&, bool, double,
                          const std::string&>(&F::gaussian_nll_loss),
        arg("input"), arg("target"), arg("var"), arg("full"), arg("eps"), arg("reduction"));
  m.def("gaussian_nll_loss",
        nb::overload_cast<const Tensor&, const Tensor&, double, bool, double, const std::string&>(
            &F::gaussian_nll_loss),
        arg("input"), arg("target"), arg("var"), arg("full"), arg("eps"), arg("reduction"));
  m.def("poisson_nll_loss", &F::poisson_nll_loss, arg("input"), arg("target"), arg("log_input"),
        arg("full"), arg("eps"), arg("reduction"));
  m.def("soft_margin_loss", &F::soft_margin_loss, arg("input"), arg("target"), arg("reduction"));
  m.def("hinge_embedding_loss", &F::hinge_embedding_loss, arg("input"), arg("target"),
        arg("margin"), arg("reduction"));
  m.def(
      "multi_margin_loss",
      [](const Tensor& input, const Tensor& target, int64_t p, double margin,
         const OptTensor& weight, const std::string& reduction) {
        return F::multi_margin_loss(input, target, p, margin, or_undefined(weight), reduction);
      },
      arg("input"), arg("target"), arg("p"), arg("margin"), arg("weight").none(), arg("reduction"));
}

}  // namespace

void bind_nn_more(nb::module_& m) {
  bind_activations(m);
  bind_pools(m);
  bind_dropouts_norms_shapes(m);
  bind_losses(m);
}

}  // namespace kiln::python
