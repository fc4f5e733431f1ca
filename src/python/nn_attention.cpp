// kiln._C.nn's attention (kiln/nn/attention.h), for
// kiln.nn.functional.scaled_dot_product_attention, multi_head_attention_forward
// and the layers of kiln.nn.transformer: arguments converted, the C++
// function called.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "convert.h"
#include "kiln/nn/attention.h"

namespace kiln::python {
namespace {

namespace F = kiln::nn::functional;
using nb::arg;

// One keyword-rich call from Python: torch's multi_head_attention_forward
// arguments, plus batch_first (the module's transposes, done in C++).
nb::tuple mha_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim_to_check,
    int64_t num_heads, const OptTensor& in_proj_weight, const OptTensor& in_proj_bias,
    const OptTensor& bias_k, const OptTensor& bias_v, bool add_zero_attn, double dropout_p,
    const Tensor& out_proj_weight, const OptTensor& out_proj_bias, bool training,
    const OptTensor& key_padding_mask, bool need_weights, const OptTensor& attn_mask,
    bool use_separate_proj_weight, const OptTensor& q_proj_weight, const OptTensor& k_proj_weight,
    const OptTensor& v_proj_weight, const OptTensor& static_k, const OptTensor& static_v,
    bool average_attn_weights, bool is_causal, bool batch_first) {
  F::MultiheadAttentionParams params{
      .in_proj_weight = use_separate_proj_weight ? Tensor() : or_undefined(in_proj_weight),
      .in_proj_bias = or_undefined(in_proj_bias),
      .q_proj_weight = or_undefined(q_proj_weight),
      .k_proj_weight = or_undefined(k_proj_weight),
      .v_proj_weight = or_undefined(v_proj_weight),
      .bias_k = or_undefined(bias_k),
      .bias_v = or_undefined(bias_v),
      .out_proj_weight = out_proj_weight,
      .out_proj_bias = or_undefined(out_proj_bias)};
  auto [output, weights] =
      F::multi_head_attention_forward(query, key, value, params,
                                      {.embed_dim_to_check = embed_dim_to_check,
                                       .num_heads = num_heads,
                                       .add_zero_attn = add_zero_attn,
                                       .dropout_p = dropout_p,
                                       .training = training,
                                       .key_padding_mask = or_undefined(key_padding_mask),
                                       .need_weights = need_weights,
                                       .attn_mask = or_undefined(attn_mask),
                                       .average_attn_weights = average_attn_weights,
                                       .is_causal = is_causal,
                                       .batch_first = batch_first,
                                       .static_k = or_undefined(static_k),
                                       .static_v = or_undefined(static_v)});
  return nb::make_tuple(output, or_none(weights));
}

}  // namespace

void bind_nn_attention(nb::module_& m) {
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& query, const Tensor& key, const Tensor& value, const OptTensor& attn_mask,
         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
        return F::scaled_dot_product_attention(query, key, value,
                                               {.attn_mask = or_undefined(attn_mask),
                                                .dropout_p = dropout_p,
                                                .is_causal = is_causal,
                                                .scale = scale,
                                                .enable_gqa = enable_gqa});
      },
      arg("query"), arg("key"), arg("value"), arg("attn_mask").none() = nb::none(),
      arg("dropout_p") = 0.0, arg("is_causal") = false, arg("scale").none() = nb::none(),
      arg("enable_gqa") = false);
  m.def("multi_head_attention_forward", &mha_forward, arg("query"), arg("key"), arg("value"),
        arg("embed_dim_to_check"), arg("num_heads"), arg("in_proj_weight").none(),
        arg("in_proj_bias").none(), arg("bias_k").none(), arg("bias_v").none(),
        arg("add_zero_attn"), arg("dropout_p"), arg("out_proj_weight"), arg("out_proj_bias").none(),
        arg("training") = true, arg("key_padding_mask").none() = nb::none(),
        arg("need_weights") = true, arg("attn_mask").none() = nb::none(),
        arg("use_separate_proj_weight") = false, arg("q_proj_weight").none() = nb::none(),
        arg("k_proj_weight").none() = nb::none(), arg("v_proj_weight").none() = nb::none(),
        arg("static_k").none() = nb::none(), arg("static_v").none() = nb::none(),
        arg("average_attn_weights") = true, arg("is_causal") = false, arg("batch_first") = false,
        "functional::multi_head_attention_forward: (attn_output, attn_weights or None).");
  m.def("generate_square_subsequent_mask", &F::generate_square_subsequent_mask, arg("sz"),
        arg("dtype") = DType::Float32);
}

}  // namespace kiln::python
