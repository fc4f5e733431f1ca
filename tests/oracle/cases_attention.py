"""Rows for the fused attention op (scaled_dot_product_attention: one
kernel for softmax(q kᵀ · scale + mask) v) against PyTorch's
torch.nn.functional.scaled_dot_product_attention: odd sequence lengths
(tiles of 6 queries, panels of 16 keys, blocks of 256 keys), head dims 48,
64 and 80, bool and additive masks with rows that see no key (zeros, as
torch), is_causal with L != S, strided inputs (the reference path) and
float64."""
import math

import numpy as np
import torch.nn.functional as F

from oracle import Case, absent, randn, values

OP = "scaled_dot_product_attention"
INF = float("inf")


def sdpa(scale, is_causal=False):
    def run(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                              is_causal=is_causal)
    return run


def attrs(e, is_causal=False):
    return {"scale": 1.0 / math.sqrt(e), "is_causal": is_causal}


def row(batch, L, S, E, Ev=None, mask=None, is_causal=False, dtype="float32", fd=False,
        name="", q_layout="contiguous", grad=True):
    Ev = E if Ev is None else Ev
    inputs = [randn(*batch, L, E, dtype=dtype, layout=q_layout), randn(*batch, S, E, dtype=dtype),
              randn(*batch, S, Ev, dtype=dtype), mask if mask is not None else absent()]
    a = attrs(E, is_causal)
    return Case(OP, inputs, sdpa(a["scale"], is_causal), attrs=a, name=name,
                reduce_len=max(E, S), fd=fd, grad=grad)


def bool_mask_with_empty_row(L, S):
    keep = np.random.RandomState(L * 31 + S).rand(L, S) > 0.4
    keep[:, 0] = True
    keep[L // 2] = False  # this query sees no key: zeros
    return values(keep.tolist(), dtype="bool")


def additive_mask_with_empty_row(batch, S):
    m = np.random.RandomState(S).randn(batch, 1, 1, S)
    m[0, 0, 0, S // 3] = -INF
    return values(m.tolist())


def additive_mask_empty_rows(L, S):
    m = np.random.RandomState(L + S).randn(L, S)
    m[1] = -INF  # every key of query 1 masked: zeros
    return values(m.tolist())


ATTENTION = [
    row((2, 3), 5, 7, 8, 6, fd=True, dtype="float64", name="f64_small"),
    row((1, 2), 5, 7, 8, 6, name="small"),
    row((1, 1), 1, 1, 8, name="seq_1"),
    row((2,), 1, 9, 16, name="one_query"),
    row((1, 2), 129, 129, 48, name="seq_129_head_48"),
    row((1, 6), 128, 128, 64, name="w5_head_64"),
    row((2, 1), 129, 129, 80, name="seq_129_head_80"),
    row((1, 1), 7, 300, 16, 24, name="keys_past_one_block"),
    row((2, 2), 5, 7, 8, 6, q_layout="transposed", name="strided_query"),
    row((1, 2), 9, 11, 8, mask=bool_mask_with_empty_row(9, 11), name="bool_mask_empty_row"),
    row((2, 2), 6, 13, 16, mask=additive_mask_with_empty_row(2, 13), name="additive_mask"),
    row((1,), 4, 6, 8, mask=additive_mask_empty_rows(4, 6), name="additive_mask_empty_row",
        grad=False),
    row((1, 2), 5, 7, 8, is_causal=True, name="causal_l_lt_s"),
    row((1, 2), 7, 5, 8, is_causal=True, name="causal_l_gt_s"),
    row((1, 1), 9, 11, 8, mask=bool_mask_with_empty_row(9, 11), is_causal=True,
        name="causal_and_mask"),
    row((1, 1), 3, 4, 5, mask=bool_mask_with_empty_row(3, 4), dtype="float64", fd=True,
        name="f64_bool_mask_fd"),
    Case(OP, [randn(1, 2, 3, 4), randn(1, 2, 5, 6), randn(1, 2, 5, 4), absent()], name="shapes",
         error="scaled_dot_product_attention: query's last dim must equal key's"),
    Case(OP, [randn(1, 3, 4), randn(2, 5, 4), randn(2, 5, 4), absent()], name="batch",
         error="scaled_dot_product_attention: query, key and value must have the same leading "
               "dims"),
]

CASES = ATTENTION
