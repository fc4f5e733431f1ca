// Attention (kiln/nn/attention.h): scaled dot-product attention on cases
// worked by hand, masks and causal masking, fully masked queries (zeros, no
// NaN gradients), and multi-head attention against the same computation
// written out head by head with kiln ops; then the errors bad shapes give.
// tests/python/test_transformer.py compares all of it with PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/random.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = nn::functional;

void expect_near_all(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], w[i], tol) << "at " << i;
}

TEST(Attention, OneQueryTwoKeysByHand) {
  Tensor q = tensor({{1.f, 0.f}});
  Tensor k = tensor({{1.f, 0.f}, {0.f, 1.f}});
  Tensor v = tensor({{1.f, 2.f}, {3.f, 4.f}});
  // scores [1/sqrt(2), 0]: the first key weighs e^a / (e^a + 1).
  const double w0 = 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0)));
  Tensor want = tensor({{float(w0 * 1 + (1 - w0) * 3), float(w0 * 2 + (1 - w0) * 4)}});
  expect_near_all(F::scaled_dot_product_attention(q, k, v), want);
  // scale = 0: equal weights, the mean of the values.
  expect_near_all(F::scaled_dot_product_attention(q, k, v, {.scale = 0.0}), tensor({{2.f, 3.f}}));
}

TEST(Attention, CausalMaskIsAlignedTopLeftWhenLengthsDiffer) {
  Tensor q = randn({2, 4}), k = randn({3, 4}), v = randn({3, 5});
  Tensor out = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  // Query 0 sees key 0 only; query 1 sees keys 0 and 1.
  expect_near_all(select(out, 0, 0), select(v, 0, 0));
  Tensor two =
      F::scaled_dot_product_attention(narrow(q, 0, 1, 1), narrow(k, 0, 0, 2), narrow(v, 0, 0, 2));
  expect_near_all(select(out, 0, 1), select(two, 0, 0));
}

TEST(Attention, BoolAndAdditiveMasksAgree) {
  Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
  Tensor keep = tensor({{true, true, false, true, false},
                        {true, false, false, false, false},
                        {true, true, true, true, true}});
  Tensor additive = where(keep, 0.0, scalar_tensor(-INFINITY, DType::Float32));
  Tensor by_bool = F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep});
  expect_near_all(by_bool, F::scaled_dot_product_attention(q, k, v, {.attn_mask = additive}));
  // Query 1 keeps key 0 only: its output is value 0.
  expect_near_all(select(select(by_bool, 0, 1), 0, 1), select(select(v, 0, 1), 0, 0));
}

TEST(Attention, FullyMaskedQueryGivesZerosAndZeroGradients) {
  Tensor q = requires_grad_(randn({3, 4})), k = requires_grad_(randn({5, 4}));
  Tensor v = requires_grad_(randn({5, 2}));
  Tensor keep = tensor({{true, true, true, true, true},
                        {false, false, false, false, false},
                        {true, false, true, false, true}});
  Tensor out = F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep});
  expect_near_all(select(out, 0, 1), zeros({2}), 0.0);
  backward(sum(out));
  std::vector<float> gq = grad(q).to_vector<float>();
  for (size_t i = 0; i < gq.size(); ++i) {
    EXPECT_FALSE(std::isnan(gq[i])) << i;
    if (i / 4 == 1) {
      EXPECT_EQ(gq[i], 0.f) << i;  // the masked query's row
    }
  }
  for (float g : grad(k).to_vector<float>())
    EXPECT_FALSE(std::isnan(g));
}

TEST(Attention, GroupedQueryHeadsRepeatKeysAndValues) {
  Tensor q = randn({1, 4, 3, 2}), k = randn({1, 2, 5, 2}), v = randn({1, 2, 5, 2});
  Tensor out = F::scaled_dot_product_attention(q, k, v, {.enable_gqa = true});
  // Query heads 0 and 1 share key head 0; heads 2 and 3 key head 1.
  for (int64_t head = 0; head < 4; ++head) {
    Tensor one = F::scaled_dot_product_attention(select(q, 1, head), select(k, 1, head / 2),
                                                 select(v, 1, head / 2));
    expect_near_all(select(out, 1, head), one);
  }
}

// Multi-head attention written out: project, split the heads, attend each,
// join them, project out. [L, N, E] inputs.
Tensor mha_by_hand(const Tensor& x, const Tensor& mem, const F::MultiheadAttentionParams& p,
                   int64_t heads) {
  const int64_t e = x.shape()[2], hd = e / heads;
  std::vector<Tensor> w = chunk(p.in_proj_weight, 3), b = chunk(p.in_proj_bias, 3);
  Tensor q = linear(x, w[0], b[0]), k = linear(mem, w[1], b[1]), v = linear(mem, w[2], b[2]);
  std::vector<Tensor> outs;
  for (int64_t h = 0; h < heads; ++h) {
    auto head = [&](const Tensor& t) { return transpose(narrow(t, 2, h * hd, hd), 0, 1); };
    outs.push_back(transpose(F::scaled_dot_product_attention(head(q), head(k), head(v)), 0, 1));
  }
  return linear(cat(outs, 2), p.out_proj_weight, p.out_proj_bias);
}

F::MultiheadAttentionParams random_params(int64_t e) {
  return {.in_proj_weight = randn({3 * e, e}),
          .in_proj_bias = randn({3 * e}),
          .out_proj_weight = randn({e, e}),
          .out_proj_bias = randn({e})};
}

TEST(Attention, MultiHeadEqualsTheHeadsWrittenOut) {
  const int64_t e = 6, heads = 3;
  F::MultiheadAttentionParams p = random_params(e);
  Tensor x = randn({4, 2, e}), mem = randn({5, 2, e});
  for (bool need_weights : {true, false}) {
    auto [self_out, self_w] = F::multi_head_attention_forward(
        x, x, x, p, {.num_heads = heads, .need_weights = need_weights});
    expect_near_all(self_out, mha_by_hand(x, x, p, heads), 1e-4);
    EXPECT_EQ(self_w.defined(), need_weights);
    auto [cross, cross_w] = F::multi_head_attention_forward(
        x, mem, mem, p, {.num_heads = heads, .need_weights = need_weights});
    expect_near_all(cross, mha_by_hand(x, mem, p, heads), 1e-4);
    if (need_weights) {
      EXPECT_EQ(cross_w.shape(), (IntList{2, 4, 5}));  // averaged over the heads
      expect_near_all(sum(cross_w, {-1}), ones({2, 4}));
    }
  }
  // batch_first: the same numbers, batch first.
  auto [bf, unused] = F::multi_head_attention_forward(
      transpose(x, 0, 1), transpose(mem, 0, 1), transpose(mem, 0, 1), p,
      {.num_heads = heads, .need_weights = false, .batch_first = true});
  expect_near_all(bf, transpose(mha_by_hand(x, mem, p, heads), 0, 1), 1e-4);
}

TEST(Attention, KeyPaddingMaskRemovesKeys) {
  const int64_t e = 4;
  F::MultiheadAttentionParams p = random_params(e);
  Tensor x = randn({3, 1, e}), mem = randn({5, 1, e});
  Tensor padding = tensor({{false, false, true, true, true}});
  auto [masked, w] = F::multi_head_attention_forward(x, mem, mem, p,
                                                     {.num_heads = 2, .key_padding_mask = padding});
  auto [shorter, w2] = F::multi_head_attention_forward(x, narrow(mem, 0, 0, 2),
                                                       narrow(mem, 0, 0, 2), p, {.num_heads = 2});
  expect_near_all(masked, shorter);
  expect_near_all(narrow(w, 2, 2, 3), zeros({1, 3, 3}), 0.0);
}

TEST(Attention, SquareSubsequentMask) {
  Tensor m = F::generate_square_subsequent_mask(3, DType::Float64);
  EXPECT_EQ(m.dtype(), DType::Float64);
  const double inf = INFINITY;
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
}

TEST(Attention, ErrorsNameTheShapes) {
  Tensor q = randn({3, 4}), k = randn({5, 4}), v = randn({5, 4});
  EXPECT_THROW_WITH(F::scaled_dot_product_attention(randn({4}), k, v), "at least 2 dimensional");
  EXPECT_THROW_WITH(F::scaled_dot_product_attention(q, randn({5, 3}), v), "[5, 3]");
  EXPECT_THROW_WITH(F::scaled_dot_product_attention(q, k, randn({6, 4})), "[6, 4]");
  EXPECT_THROW_WITH(F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({4, 5})}),
                    "[4, 5]");
  EXPECT_THROW_WITH(
      F::scaled_dot_product_attention(q, k, v, {.attn_mask = ones({3, 5}, DType::Int64)}),
      "bool or float");

  F::MultiheadAttentionParams p = random_params(6);
  Tensor x = randn({4, 2, 6});
  EXPECT_THROW_WITH(F::multi_head_attention_forward(x, x, x, p, {.num_heads = 4}),
                    "embed_dim 6 not divisible by num_heads 4");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(x, x, x, p, {.embed_dim_to_check = 8, .num_heads = 2}),
      "was expecting embedding dimension of 8, but got 6");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(x, x, x, p, {.num_heads = 2, .attn_mask = zeros({4, 5})}),
      "The shape of the 2D attn_mask is [4, 5], but should be [4, 4].");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(x, x, x, p, {.num_heads = 2, .attn_mask = zeros({2, 4, 4})}),
      "The shape of the 3D attn_mask is [2, 4, 4], but should be [4, 4, 4].");
  EXPECT_THROW_WITH(F::multi_head_attention_forward(
                        x, x, x, p, {.num_heads = 2, .key_padding_mask = zeros({2, 3})}),
                    "Expected key_padded_mask.shape[1] to be 4, but got 3");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(x, randn({4, 8}), randn({4, 8}), p, {.num_heads = 2}),
      "expected `key` and `value` to be 3-D but found 2-D and 2-D");
  EXPECT_THROW_WITH(F::multi_head_attention_forward(x, x, randn({5, 2, 6}), p, {.num_heads = 2}),
                    "key shape [4, 2, 6] does not match value shape [5, 2, 6]");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(
          x, x, x, {.in_proj_weight = randn({12, 6}), .out_proj_weight = randn({6, 6})},
          {.num_heads = 2}),
      "in_proj_weight must have shape [18, 6]");
  EXPECT_THROW_WITH(
      F::multi_head_attention_forward(x, x, x, p, {.num_heads = 2, .is_causal = true}),
      "Need attn_mask if specifying the is_causal hint");
}

}  // namespace
}  // namespace kiln
