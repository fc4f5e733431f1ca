// Attention as functions over kiln ops: scaled dot-product attention and the
// whole forward of multi-head attention, with PyTorch's semantics, masks and
// weight layout. Every step is an op of the table (matmul, softmax, where,
// linear, ...), so gradients, tracing and ONNX export come from the
// composition; the Python layers (kiln.nn.MultiheadAttention, the
// Transformer family) call these.
//
//   namespace F = kiln::nn::functional;
//   Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//   auto [out, weights] = F::multi_head_attention_forward(x, x, x, params, {.num_heads = 4});
#pragma once

#include <optional>
#include <utility>

#include "kiln/core/tensor.h"

namespace kiln::nn::functional {

struct ScaledDotProductAttentionOptions {
  // Broadcast to [..., L, S]. Bool: true marks the keys a query may attend
  // to. Floating: added to the scores (-inf removes a key).
  Tensor attn_mask = {};
  // Applied to the attention weights whenever positive: the functional
  // form has no training flag, as in PyTorch.
  double dropout_p = 0.0;
  // Query i attends to keys 0..i (the mask is aligned at the top left when
  // L != S, as torch's tril(ones(L, S))). It replaces attn_mask, as in
  // torch 2.13.
  bool is_causal = false;
  std::optional<double> scale = std::nullopt;  // default 1/sqrt(E)
  // Grouped-query attention: key and value may have fewer heads (dim -3)
  // than query, a divisor of its head count; each is repeated to match.
  bool enable_gqa = false;
};

// softmax(q kᵀ · scale + mask) v for query [..., L, E], key [..., S, E] and
// value [..., S, Ev] (at least 2-D; batch dims broadcast): [..., L, Ev].
// A query whose keys are all masked gets zeros (torch's safe softmax), and
// no gradient.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options = {});

// The parameters of nn.MultiheadAttention, as torch names them. Packed:
// in_proj_weight [3E, E]. Separate (kdim or vdim differs from E):
// q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim].
// in_proj_bias [3E] in either case; bias_k and bias_v [1, 1, E]; undefined
// where absent.
struct MultiheadAttentionParams {
  Tensor in_proj_weight, in_proj_bias;
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;
  Tensor bias_k, bias_v;
  Tensor out_proj_weight, out_proj_bias;
  // torch's use_separate_proj_weight: q/k/v_proj_weight instead of in_proj_weight.
  bool separate_proj_weight() const { return !in_proj_weight.defined(); }
};

struct MultiheadAttentionOptions {
  int64_t embed_dim_to_check = 0;  // E; 0 takes query's last dim
  int64_t num_heads = 1;
  bool add_zero_attn = false;
  double dropout_p = 0.0;
  bool training = true;  // dropout only while training
  // [N, S] ([S] unbatched). Bool: true marks padding (ignored keys);
  // floating: added to the scores.
  Tensor key_padding_mask = {};
  bool need_weights = true;
  // [L, S] or [N * num_heads, L, S]. Bool: true marks positions NOT
  // allowed to attend (the opposite of scaled_dot_product_attention's);
  // floating: added.
  Tensor attn_mask = {};
  bool average_attn_weights = true;
  // A hint that attn_mask is the causal mask (which must then be given).
  bool is_causal = false;
  // Inputs and output as [N, L, E] instead of [L, N, E].
  bool batch_first = false;
  // Precomputed keys and values [N * num_heads, S, E / num_heads].
  Tensor static_k = {}, static_v = {};
};

// (attn_output, attn_weights): attn_output [L, N, E] ([N, L, E] with
// batch_first, [L, E] unbatched); attn_weights, when need_weights, [N, L, S]
// averaged over heads or [N, num_heads, L, S] (without N unbatched), else
// undefined. query [L, N, E], key [S, N, kdim], value [S, N, vdim].
std::pair<Tensor, Tensor> multi_head_attention_forward(const Tensor& query, const Tensor& key,
                                                       const Tensor& value,
                                                       const MultiheadAttentionParams& params,
                                                       const MultiheadAttentionOptions& options);

// [sz, sz] of `dtype`: -inf above the diagonal, 0 elsewhere (torch's
// Transformer.generate_square_subsequent_mask).
Tensor generate_square_subsequent_mask(int64_t sz, DType dtype = kDefaultFloat);

}  // namespace kiln::nn::functional
