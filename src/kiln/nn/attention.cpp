// The attention functions of attention.h. The order of operations follows
// torch/nn/functional.py (multi_head_attention_forward) and torch's math
// reference of scaled_dot_product_attention, so results agree to rounding;
// error messages read as PyTorch's, with the shapes involved. Sizes that
// new shapes are built from come through sym_shape, so a trace with dynamic
// batch or sequence sizes records a graph that stays general.
#include "kiln/nn/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::nn::functional {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr const char* kSdpa = "scaled_dot_product_attention";

// Zeros of a shape that may hold symbolic sizes: a constant expanded by an
// op, so a trace records the expansion rather than a frozen tensor.
Tensor zeros_shaped(const DimList& shape, DType dtype) {
  return expand(zeros({1}, dtype), shape);
}

// [L, S] bool: true where key j may be seen by query i (j <= i), torch's
// tril(ones(L, S)). The sizes become integers here: a trace with a
// symbolic sequence length is specialized to it (and says so).
Tensor causal_keep_mask(const Tensor& scores) {
  const int64_t tgt = size_as_int(sym_size(scores, -2), "the causal mask's query length");
  const int64_t src = size_as_int(sym_size(scores, -1), "the causal mask's key length");
  return ge(unsqueeze(arange(tgt), 1), unsqueeze(arange(src), 0));
}

// Heads repeated along dim -3, each `times` times in a row (torch's
// repeat_interleave(times, -3)) for grouped-query attention.
Tensor repeat_heads(const Tensor& x, int64_t times) {
  if (times == 1) return x;
  DimList shape = sym_shape(x);
  const int64_t heads_dim = int64_t(shape.size()) - 3;
  DimList expanded = shape;
  expanded.insert(expanded.begin() + heads_dim + 1, Dim(times));
  DimList merged = shape;
  merged[size_t(heads_dim)] = shape[size_t(heads_dim)] * Dim(times);
  return reshape(expand(unsqueeze(x, heads_dim + 1), expanded), merged);
}

void check_sdpa_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                       const ScaledDotProductAttentionOptions& options) {
  KILN_CHECK(q.defined() && k.defined() && v.defined(), kSdpa,
             ": query, key and value must be defined");
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kSdpa,
             ": Expected query, key, and value to all be at least 2 dimensional, but got "
             "query.dim: ",
             q.dim(), " key.dim: ", k.dim(), " and value.dim: ", v.dim(), " instead.");
  KILN_CHECK_TYPE(q.dtype() == k.dtype() && q.dtype() == v.dtype(), kSdpa,
                  ": Expected query, key, and value to have the same dtype, but got "
                  "query.dtype: ",
                  q.dtype(), " key.dtype: ", k.dtype(), " and value.dtype: ", v.dtype(),
                  " instead.");
  KILN_CHECK_TYPE(is_floating(q.dtype()), kSdpa, ": expected floating query, key and value, got ",
                  q.dtype());
  KILN_CHECK(q.shape().back() == k.shape().back(), kSdpa,
             ": query's last dim must equal key's, got query of shape ", q.shape(),
             " and key of shape ", k.shape());
  KILN_CHECK(k.shape()[k.shape().size() - 2] == v.shape()[v.shape().size() - 2], kSdpa,
             ": key and value must have the same sequence length (dim -2), got key of shape ",
             k.shape(), " and value of shape ", v.shape());
  KILN_CHECK_VALUE(options.dropout_p >= 0.0 && options.dropout_p <= 1.0, kSdpa,
                   ": dropout_p must be in [0, 1], got ", options.dropout_p);
  const Tensor& mask = options.attn_mask;
  if (!mask.defined()) return;
  KILN_CHECK_TYPE(mask.dtype() == DType::Bool || is_floating(mask.dtype()), kSdpa,
                  ": Expected attn_mask dtype to be bool or float or to match query dtype, but "
                  "got attn_mask.dtype: ",
                  mask.dtype(), " and  query.dtype: ", q.dtype(), " instead.");
}

// Masks the scores [..., L, S] and takes the softmax over the keys. With
// `safe`, a query whose every key is masked gets all-zero weights (and no
// gradient) instead of NaNs: its scores are replaced before the softmax,
// whose backward would otherwise turn the NaNs into NaN gradients.
Tensor masked_softmax(Tensor scores, const Tensor& mask, bool is_causal, bool safe) {
  Tensor fully_masked;  // bool [..., L, 1] where every key of a query is masked
  // is_causal with a mask applies both, as PyTorch does.
  if (is_causal) scores = where(causal_keep_mask(scores), scores, kNegInf);  // key 0 is kept
  if (mask.defined()) {
    IntList joint = broadcast_shapes(mask.shape(), scores.shape(), "scaled_dot_product_attention");
    KILN_CHECK(joint == scores.shape(), kSdpa, ": attn_mask of shape ", mask.shape(),
               " does not broadcast to the attention scores' shape ", scores.shape());
    if (mask.dtype() == DType::Bool) {
      scores = where(mask, scores, kNegInf);
      if (safe) fully_masked = eq(sum(mask, {-1}, true), int64_t(0));
    } else {
      scores = scores + to(mask, scores.dtype());
      if (safe) fully_masked = eq(amax(mask, {-1}, true), kNegInf);
    }
    // Causally, a query may lose to the mask the keys the causal mask kept.
    if (safe && is_causal) fully_masked = eq(amax(scores, {-1}, true), kNegInf);
  }
  if (!fully_masked.defined()) return softmax(scores, -1);
  Tensor weights = softmax(where(fully_masked, 0.0, scores), -1);
  return where(fully_masked, 0.0, weights);
}

// ---- multi-head attention ----

constexpr const char* kMha = "multi_head_attention_forward";

// torch's _mha_shape_check: whether the input is batched.
bool mha_is_batched(const Tensor& query, const Tensor& key, const Tensor& value,
                    const MultiheadAttentionOptions& o) {
  const Tensor &kpm = o.key_padding_mask, &mask = o.attn_mask;
  KILN_CHECK(query.dim() == 2 || query.dim() == 3,
             "query should be unbatched 2D or batched 3D tensor but received ", query.dim(),
             "-D query tensor");
  const bool batched = query.dim() == 3;
  const char* form = batched ? "batched (3-D)" : "unbatched (2-D)";
  KILN_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), "For ", form,
             " `query`, expected `key` and `value` to be ", query.dim(), "-D but found ", key.dim(),
             "-D and ", value.dim(), "-D tensors respectively");
  KILN_CHECK(!kpm.defined() || kpm.dim() == query.dim() - 1, "For ", form,
             " `query`, expected `key_padding_mask` to be `None` or ", query.dim() - 1,
             "-D but found ", kpm.defined() ? kpm.dim() : 0, "-D tensor instead");
  KILN_CHECK(!mask.defined() || mask.dim() == 2 || mask.dim() == 3, "For ", form,
             " `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found ",
             mask.defined() ? mask.dim() : 0, "-D tensor instead");
  if (!batched && mask.defined() && mask.dim() == 3) {
    IntList expected = {o.num_heads, query.shape()[0], key.shape()[0]};
    KILN_CHECK(mask.shape() == expected, "Expected `attn_mask` shape to be ", expected, " but got ",
               mask.shape());
  }
  return batched;
}

// torch's _canonical_mask: a bool mask (true = masked) as -inf/0 of
// `dtype`; a floating one as it is.
Tensor canonical_mask(const Tensor& mask, const char* name, DType dtype) {
  if (!mask.defined()) return mask;
  KILN_CHECK_TYPE(mask.dtype() == DType::Bool || is_floating(mask.dtype()),
                  "only bool and floating types of ", name, " are supported, got ", mask.dtype());
  if (mask.dtype() != DType::Bool) return to(mask, dtype);
  return where(mask, scalar_tensor(kNegInf, dtype), 0.0);
}

// The mask with one more key at the end that nobody masks (torch's
// pad(mask, (0, 1)) after a bias or zero key was appended).
Tensor pad_key(const Tensor& mask) {
  if (!mask.defined()) return mask;
  DimList shape = sym_shape(mask);
  shape.back() = Dim(1);
  return cat({mask, zeros_shaped(shape, mask.dtype())}, -1);
}

struct Projected {
  Tensor q, k, v;
};

// The input projections, packed ([3E, E] split in q, k, v order) or
// separate. Self-attention takes one product for all three, and
// encoder-decoder attention one for key and value, as torch does.
Projected in_projection(const Tensor& query, const Tensor& key, const Tensor& value,
                        const MultiheadAttentionParams& p, int64_t embed_dim, bool same_qkv,
                        bool same_kv) {
  std::vector<Tensor> b(3);
  if (p.in_proj_bias.defined()) {
    KILN_CHECK(p.in_proj_bias.dim() == 1 && p.in_proj_bias.shape()[0] == 3 * embed_dim, kMha,
               ": in_proj_bias must have shape [", 3 * embed_dim, "] (3 * embed_dim), got ",
               p.in_proj_bias.shape());
    b = chunk(p.in_proj_bias, 3, 0);
  }
  if (p.separate_proj_weight()) {
    KILN_CHECK(p.q_proj_weight.defined() && p.k_proj_weight.defined() && p.v_proj_weight.defined(),
               kMha,
               ": without in_proj_weight, q_proj_weight, k_proj_weight and v_proj_weight "
               "must all be given");
    return {linear(query, p.q_proj_weight, b[0]), linear(key, p.k_proj_weight, b[1]),
            linear(value, p.v_proj_weight, b[2])};
  }
  const Tensor& w = p.in_proj_weight;
  KILN_CHECK(w.dim() == 2 && w.shape()[0] == 3 * embed_dim, kMha,
             ": in_proj_weight must have shape [", 3 * embed_dim, ", ", embed_dim,
             "] (3 * embed_dim, embed_dim), got ", w.shape());
  if (same_qkv) {
    std::vector<Tensor> qkv = chunk(linear(query, w, p.in_proj_bias), 3, -1);
    return {qkv[0], qkv[1], qkv[2]};
  }
  std::vector<Tensor> ws = chunk(w, 3, 0);
  Tensor q = linear(query, ws[0], b[0]);
  if (same_kv) {
    Tensor w_kv = narrow(w, 0, embed_dim, 2 * embed_dim);
    Tensor b_kv =
        p.in_proj_bias.defined() ? narrow(p.in_proj_bias, 0, embed_dim, 2 * embed_dim) : Tensor();
    std::vector<Tensor> kv = chunk(linear(key, w_kv, b_kv), 2, -1);
    return {q, kv[0], kv[1]};
  }
  return {q, linear(key, ws[1], b[1]), linear(value, ws[2], b[2])};
}

// Self-attention over batch-first input [N, L, E]: the packed projection
// of the rows as they lie (one stride from row to row, so kiln's GEMM runs
// it; the transposed [L, N, E] input goes to oneDNN at batch > 1), then
// the product transposed to [L, N, 3E] and split in q, k, v, as
// in_projection gives them. W5 at batch 8: this product 9.9 -> 8.6 ms a
// layer at one thread.
Projected batch_first_self_projection(const Tensor& query, const MultiheadAttentionParams& p,
                                      int64_t embed_dim) {
  const Tensor& w = p.in_proj_weight;
  KILN_CHECK(w.dim() == 2 && w.shape()[0] == 3 * embed_dim, kMha,
             ": in_proj_weight must have shape [", 3 * embed_dim, ", ", embed_dim,
             "] (3 * embed_dim, embed_dim), got ", w.shape());
  KILN_CHECK(!p.in_proj_bias.defined() ||
                 (p.in_proj_bias.dim() == 1 && p.in_proj_bias.shape()[0] == 3 * embed_dim),
             kMha, ": in_proj_bias must have shape [", 3 * embed_dim, "] (3 * embed_dim), got ",
             p.in_proj_bias.shape());
  std::vector<Tensor> qkv = chunk(transpose(linear(query, w, p.in_proj_bias), 0, 1), 3, -1);
  return {qkv[0], qkv[1], qkv[2]};
}

// attn_mask as [1 or N * heads, L, S], checked against the sizes.
Tensor batched_attn_mask(const Tensor& mask, int64_t tgt_len, int64_t bsz, int64_t src_len,
                         int64_t num_heads) {
  if (!mask.defined()) return mask;
  if (mask.dim() == 2) {
    IntList expected = {tgt_len, src_len};
    KILN_CHECK(mask.shape() == expected, "The shape of the 2D attn_mask is ", mask.shape(),
               ", but should be ", expected, ".");
    return unsqueeze(mask, 0);
  }
  IntList expected = {bsz * num_heads, tgt_len, src_len};
  KILN_CHECK(mask.dim() == 3 && mask.shape() == expected, "The shape of the 3D attn_mask is ",
             mask.shape(), ", but should be ", expected, ".");
  return mask;
}

// [S', N * heads, head_dim] from [S', N, E], heads first: [N * heads, S', head_dim].
Tensor split_heads(const Tensor& x, const Dim& batch_heads, int64_t head_dim) {
  const Dim shape[] = {sym_size(x, 0), batch_heads, Dim(head_dim)};
  return transpose(reshape(x, shape), 0, 1);
}

Tensor static_kv(const Tensor& given, const char* name, int64_t batch_heads, int64_t head_dim) {
  KILN_CHECK(given.dim() == 3 && given.shape()[0] == batch_heads, "expecting ", name,
             ".size(0) of ", batch_heads, ", but got shape ", given.shape());
  KILN_CHECK(given.shape()[2] == head_dim, "expecting ", name, ".size(2) of ", head_dim,
             ", but got shape ", given.shape());
  return given;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options) {
  profiler::Range range(profiler::EventKind::Op, kSdpa);  // a composite: its ops nest
  check_sdpa_inputs(query, key, value, options);
  Tensor k = key, v = value;
  if (options.enable_gqa && query.dim() >= 3) {
    const int64_t q_heads = query.shape()[size_t(query.dim() - 3)];
    const int64_t k_heads = k.dim() >= 3 ? k.shape()[size_t(k.dim() - 3)] : 1;
    const int64_t v_heads = v.dim() >= 3 ? v.shape()[size_t(v.dim() - 3)] : 1;
    KILN_CHECK(
        k.dim() >= 3 && v.dim() >= 3 && q_heads % k_heads == 0 && q_heads % v_heads == 0, kSdpa,
        ": with enable_gqa, the heads of key and value (dim -3) must divide "
        "query's, got query of shape ",
        query.shape(), ", key of shape ", key.shape(), " and value of shape ", value.shape());
    k = repeat_heads(k, q_heads / k_heads);
    v = repeat_heads(v, q_heads / v_heads);
  }
  const double scale = options.scale.value_or(1.0 / std::sqrt(double(query.shape().back())));
  Tensor scores = matmul(query, transpose(k, -2, -1)) * scale;
  Tensor weights = masked_softmax(scores, options.attn_mask, options.is_causal, /*safe=*/true);
  if (options.dropout_p > 0.0) weights = dropout(weights, options.dropout_p, /*train=*/true);
  return matmul(weights, v);
}

std::pair<Tensor, Tensor> multi_head_attention_forward(const Tensor& query_in, const Tensor& key_in,
                                                       const Tensor& value_in,
                                                       const MultiheadAttentionParams& params,
                                                       const MultiheadAttentionOptions& o) {
  KILN_CHECK(query_in.defined() && key_in.defined() && value_in.defined(), kMha,
             ": query, key and value must be defined");
  KILN_CHECK_VALUE(o.num_heads > 0, kMha, ": num_heads must be positive, got ", o.num_heads);
  const bool same_kv = key_in.is_same(value_in), same_qkv = same_kv && query_in.is_same(key_in);
  const bool batched = mha_is_batched(query_in, key_in, value_in, o);
  Tensor query = query_in, key = key_in, value = value_in, kpm = o.key_padding_mask;
  if (batched && o.batch_first) {
    query = transpose(query, 0, 1), key = transpose(key, 0, 1), value = transpose(value, 0, 1);
  }
  if (!batched) {
    query = unsqueeze(query, 1), key = unsqueeze(key, 1), value = unsqueeze(value, 1);
    if (kpm.defined()) kpm = unsqueeze(kpm, 0);
  }
  const int64_t tgt_len = query.shape()[0], bsz = query.shape()[1], embed_dim = query.shape()[2];
  const int64_t num_heads = o.num_heads, head_dim = embed_dim / num_heads;
  const DType dtype = query.dtype();
  kpm = canonical_mask(kpm, "key_padding_mask", dtype);

  KILN_CHECK(!o.is_causal || o.attn_mask.defined(),
             "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
             "module method `generate_square_subsequent_mask` to create this mask.");
  // The hint replaces the mask only on the fused path (no weights wanted, no
  // padding to merge), as in torch.
  const bool is_causal = o.is_causal && !kpm.defined() && !o.need_weights;
  Tensor attn_mask = is_causal ? Tensor() : canonical_mask(o.attn_mask, "attn_mask", dtype);

  KILN_CHECK(o.embed_dim_to_check <= 0 || embed_dim == o.embed_dim_to_check,
             "was expecting embedding dimension of ", o.embed_dim_to_check, ", but got ", embed_dim,
             " (query of shape ", query_in.shape(), ")");
  KILN_CHECK(head_dim * num_heads == embed_dim, "embed_dim ", embed_dim,
             " not divisible by num_heads ", num_heads);
  if (params.separate_proj_weight()) {
    KILN_CHECK(IntList(key.shape().begin(), key.shape().begin() + 2) ==
                   IntList(value.shape().begin(), value.shape().begin() + 2),
               "key's sequence and batch dims of key shape ", key_in.shape(),
               " do not match value's of shape ", value_in.shape());
  } else {
    KILN_CHECK(key.shape() == value.shape(), "key shape ", key_in.shape(),
               " does not match value shape ", value_in.shape());
  }

  const bool batch_first_rows = batched && o.batch_first;
  auto [q, k, v] = batch_first_rows && same_qkv && !params.separate_proj_weight()
                       ? batch_first_self_projection(query_in, params, embed_dim)
                       : in_projection(query, key, value, params, embed_dim, same_qkv, same_kv);
  const int64_t src_len0 = key.shape()[0];
  attn_mask = batched_attn_mask(attn_mask, tgt_len, bsz, src_len0, num_heads);

  KILN_CHECK(params.bias_k.defined() == params.bias_v.defined(), kMha,
             ": bias_k and bias_v must be given together");
  const Dim sym_bsz = sym_size(query, 1), batch_heads = sym_bsz * Dim(num_heads);
  if (params.bias_k.defined()) {
    KILN_CHECK(!o.static_k.defined() && !o.static_v.defined(),
               "bias cannot be added to static key or value.");
    const Dim bias_shape[] = {Dim(1), sym_bsz, Dim(embed_dim)};
    k = cat({k, expand(params.bias_k, bias_shape)}, 0);
    v = cat({v, expand(params.bias_v, bias_shape)}, 0);
    attn_mask = pad_key(attn_mask), kpm = pad_key(kpm);
  }

  q = split_heads(q, batch_heads, head_dim);
  k = o.static_k.defined() ? static_kv(o.static_k, "static_k", bsz * num_heads, head_dim)
                           : split_heads(k, batch_heads, head_dim);
  v = o.static_v.defined() ? static_kv(o.static_v, "static_v", bsz * num_heads, head_dim)
                           : split_heads(v, batch_heads, head_dim);
  if (o.add_zero_attn) {
    const DimList zero_shape = {batch_heads, Dim(1), Dim(head_dim)};
    k = cat({k, zeros_shaped(zero_shape, k.dtype())}, 1);
    v = cat({v, zeros_shaped(zero_shape, v.dtype())}, 1);
    attn_mask = pad_key(attn_mask), kpm = pad_key(kpm);
  }
  const int64_t src_len = k.shape()[1];
  const Dim sym_src_len = sym_size(k, 1);

  if (kpm.defined()) {
    KILN_CHECK(kpm.shape()[0] == bsz, "Expected key_padded_mask.shape[0] to be ", bsz, ", but got ",
               kpm.shape()[0]);
    KILN_CHECK(kpm.shape()[1] == src_len, "Expected key_padded_mask.shape[1] to be ", src_len,
               ", but got ", kpm.shape()[1]);
    const Dim spread[] = {sym_bsz, Dim(num_heads), Dim(1), sym_src_len};
    const Dim merged[] = {batch_heads, Dim(1), sym_src_len};
    const Dim as_4d[] = {sym_bsz, Dim(1), Dim(1), sym_src_len};
    kpm = reshape(expand(reshape(kpm, as_4d), spread), merged);
    attn_mask = attn_mask.defined() ? attn_mask + kpm : kpm;
  }
  const double dropout_p = o.training ? o.dropout_p : 0.0;
  const Dim out_shape[] = {sym_size(query, 0), sym_bsz, Dim(embed_dim)};

  Tensor attn_output, attn_weights;
  bool output_batch_first = false;  // attn_output already [N, L, E]
  if (o.need_weights) {
    // torch's explicit path: q scaled first, the mask added to the scores,
    // a plain softmax (a fully masked query gives NaNs there too).
    Tensor q_scaled = q * std::sqrt(1.0 / double(head_dim));
    Tensor scores = matmul(q_scaled, transpose(k, -2, -1));
    if (attn_mask.defined()) scores = attn_mask + scores;
    attn_weights = softmax(scores, -1);
    if (dropout_p > 0.0) attn_weights = dropout(attn_weights, dropout_p, true);
    attn_output = reshape(transpose(matmul(attn_weights, v), 0, 1), out_shape);
    const Dim per_head[] = {sym_bsz, Dim(num_heads), sym_size(query, 0), sym_src_len};
    attn_weights = reshape(attn_weights, per_head);
    if (o.average_attn_weights) attn_weights = mean(attn_weights, {1});
  } else {
    if (attn_mask.defined()) {
      if (attn_mask.shape()[0] == 1) {
        attn_mask = unsqueeze(attn_mask, 0);
      } else {
        const Dim heads_mask[] = {sym_bsz, Dim(num_heads), sym_size(attn_mask, 1), sym_src_len};
        attn_mask = reshape(attn_mask, heads_mask);
      }
    }
    const Dim q_heads[] = {sym_bsz, Dim(num_heads), sym_size(q, 1), Dim(head_dim)};
    const Dim kv_heads[] = {sym_bsz, Dim(num_heads), sym_src_len, Dim(head_dim)};
    Tensor heads = scaled_dot_product_attention(
        reshape(q, q_heads), reshape(k, kv_heads), reshape(v, kv_heads),
        {.attn_mask = attn_mask, .dropout_p = dropout_p, .is_causal = is_causal});
    if (batch_first_rows) {  // [N, H, L, hd] -> [N, L, E]: the output projection's rows as they lie
      const Dim batch_first_shape[] = {sym_bsz, sym_size(query, 0), Dim(embed_dim)};
      attn_output = reshape(permute(heads, {0, 2, 1, 3}), batch_first_shape);
      output_batch_first = true;
    } else {
      attn_output = reshape(permute(heads, {2, 0, 1, 3}), out_shape);
    }
  }
  attn_output = linear(attn_output, params.out_proj_weight, params.out_proj_bias);
  if (!batched) {
    attn_output = squeeze(attn_output, 1);
    if (attn_weights.defined()) attn_weights = squeeze(attn_weights, 0);
  } else if (o.batch_first && !output_batch_first) {
    attn_output = transpose(attn_output, 0, 1);
  }
  return {attn_output, attn_weights};
}

Tensor generate_square_subsequent_mask(int64_t sz, DType dtype) {
  KILN_CHECK_VALUE(sz >= 0, "generate_square_subsequent_mask: sz must be non-negative, got ", sz);
  KILN_CHECK_TYPE(is_floating(dtype),
                  "generate_square_subsequent_mask: dtype must be floating, "
                  "got ",
                  dtype);
  Tensor above_diagonal = lt(unsqueeze(arange(sz), 1), unsqueeze(arange(sz), 0));
  return where(above_diagonal, scalar_tensor(kNegInf, dtype), 0.0);
}

}  // namespace kiln::nn::functional
