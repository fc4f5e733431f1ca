"""kiln.nn.functional's attention: scaled_dot_product_attention and
multi_head_attention_forward with torch's signatures. Both are kiln/nn's
C++ functions (kiln/nn/attention.h), bound once (kiln._C.nn); the layers of
kiln.nn.transformer call the same functions."""
from __future__ import annotations

from kiln import _C
from kiln._C import Tensor

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query keyᵀ · scale + mask) value over [..., L, E], [..., S, E]
    and [..., S, Ev]. A bool attn_mask marks with True the keys a query may
    attend to; a floating one is added to the scores. is_causal lets query i
    see keys 0..i. dropout_p applies whenever positive (pass 0.0 in eval, as
    with torch). A query with every key masked gets zeros."""
    return _C.nn.scaled_dot_product_attention(
        query, key, value, attn_mask, float(dropout_p), bool(is_causal),
        None if scale is None else float(scale), bool(enable_gqa))


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """torch.nn.functional.multi_head_attention_forward: query [L, N, E]
    (or [L, E]), key and value [S, N, kdim/vdim]; returns (attn_output,
    attn_weights or None). Bool masks here mark with True what is masked
    out (the opposite of scaled_dot_product_attention's)."""
    return _C.nn.multi_head_attention_forward(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
        bias_v, add_zero_attn, float(dropout_p), out_proj_weight, out_proj_bias, training,
        key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
        k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, bool(is_causal))
