"""Attention and the Transformer family against torch: the same weights in
both (torch's module built first, its state_dict loaded into kiln's), then
outputs and the gradients of inputs and parameters compared.
scaled_dot_product_attention over masks, causal masking, scales, shapes and
grouped heads; MultiheadAttention over its arguments and masks; the encoder
and decoder layers and stacks, nn.Transformer, a small language model
trained three SGD steps in both; the traced encoder (kiln.jit.trace,
hybridize) and its ONNX export run in ONNX Runtime."""
import itertools

import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F

TOL = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-8, atol=1e-10)}
DTYPES = {"float32": (kiln.float32, torch.float32, np.float32),
          "float64": (kiln.float64, torch.float64, np.float64)}


def _pair_tensors(shape, dtype="float32", seed=0, grad=True):
    array = np.random.default_rng(seed).standard_normal(shape).astype(DTYPES[dtype][2])
    k, t = kiln.tensor(array), torch.tensor(array)
    if grad:
        k.requires_grad_()
        t.requires_grad_()
    return k, t


def _both(array):
    """A kiln and a torch tensor of one NumPy array (masks)."""
    return kiln.tensor(array), torch.tensor(array)


def _close(k, t, dtype="float32", what=""):
    assert tuple(k.shape) == tuple(t.shape), what
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), err_msg=what,
                               **TOL[dtype])


def _load(kmod, tmod):
    """torch's weights into kiln's module: the same state_dict keys, in order."""
    tstate = tmod.state_dict()
    assert list(kmod.state_dict()) == list(tstate)
    kmod.load_state_dict({k: v.detach().numpy().copy() for k, v in tstate.items()})


def _check_grads(kouts, touts, kinputs, tinputs, names, dtype="float32"):
    """Backward both with the same random upstream gradients; compare the
    gradient of each input (by name)."""
    rng = np.random.default_rng(7)
    seeds = [rng.standard_normal(tuple(t.shape)).astype(DTYPES[dtype][2]) for t in touts]
    kgrads = kiln.autograd.grad(list(kouts), list(kinputs), [kiln.tensor(s) for s in seeds],
                                allow_unused=True)
    tgrads = torch.autograd.grad(list(touts), list(tinputs), [torch.tensor(s) for s in seeds],
                                 allow_unused=True)
    for name, kg, tg in zip(names, kgrads, tgrads):
        if tg is None or kg is None:
            got = np.zeros(1) if kg is None else kg.numpy()
            want = np.zeros(1) if tg is None else tg.numpy()
            assert np.all(got == 0) and np.all(want == 0), name
            continue
        np.testing.assert_allclose(kg.numpy(), tg.numpy(), err_msg=name, **TOL[dtype])


def _check_module_grads(kmod, tmod, kouts, touts, kin=(), tin=(), dtype="float32"):
    knames, kparams = zip(*kmod.named_parameters())
    tnames, tparams = zip(*tmod.named_parameters())
    assert knames == tnames
    names = [f"input {i}" for i in range(len(kin))] + list(knames)
    _check_grads(kouts, touts, [*kin, *kparams], [*tin, *tparams], names, dtype)


# -- scaled_dot_product_attention -------------------------------------------

def _mask_arrays(kind, shape, seed=3):
    rng = np.random.default_rng(seed)
    if kind == "bool":
        keep = rng.random(shape) > 0.3
        keep[..., 0] = True  # every query keeps a key
        return keep
    if kind == "bool_full_row":  # a query with every key masked: zeros, no NaN
        keep = rng.random(shape) > 0.3
        keep[..., 0, :] = False
        keep[..., 1, 0] = True
        return keep
    if kind == "float":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "float_inf":
        add = rng.standard_normal(shape)
        add[..., 1, :2] = -np.inf
        add[..., 0, :] = -np.inf  # fully masked
        return add.astype(np.float32)
    raise AssertionError(kind)


SDPA_SHAPES = [  # query, key, value
    ((4, 3), (5, 3), (5, 2)),
    ((2, 4, 3), (2, 5, 3), (2, 5, 6)),
    ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8)),
    ((2, 3, 4, 8), (1, 3, 6, 8), (1, 3, 6, 8)),  # batch dims broadcast
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", SDPA_SHAPES, ids=lambda s: "x".join(map(str, s[0])))
@pytest.mark.parametrize("mask, mask_rank", [(None, 0), ("bool", 2), ("bool", -1),
                                             ("bool_full_row", 2), ("float", 2),
                                             ("float", -1), ("float_inf", 2)])
def test_sdpa_matches_torch_with_gradients(dtype, shapes, mask, mask_rank):
    (kq, tq), (kk, tk), (kv, tv) = (_pair_tensors(s, dtype, seed=i) for i, s in enumerate(shapes))
    kmask = tmask = None
    if mask is not None:
        L, S = shapes[0][-2], shapes[1][-2]
        # -1: the scores' full shape, 1 over the heads where there are any
        full = tuple(np.broadcast_shapes(shapes[0][:-2], shapes[1][:-2])) + (L, S)
        mshape = (L, S) if mask_rank == 2 else full[:-3] + (1,) * (len(full) > 2) + (L, S)
        array = _mask_arrays(mask, mshape)
        if mask.startswith("float"):
            array = array.astype(DTYPES[dtype][2])
        kmask, tmask = _both(array)
    kout = F.scaled_dot_product_attention(kq, kk, kv, attn_mask=kmask)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
    _close(kout, tout, dtype)
    assert not np.isnan(kout.detach().numpy()).any()
    _check_grads([kout], [tout], [kq, kk, kv], [tq, tk, tv], "qkv", dtype)


@pytest.mark.parametrize("L, S", [(4, 4), (3, 6), (6, 3)])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa_causal_and_scale_match_torch(L, S, scale):
    (kq, tq), (kk, tk), (kv, tv) = (_pair_tensors((2, 2, n, 4), "float64", seed=i)
                                    for i, n in enumerate((L, S, S)))
    kout = F.scaled_dot_product_attention(kq, kk, kv, is_causal=True, scale=scale)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True,
                                                            scale=scale)
    _close(kout, tout, "float64")
    _check_grads([kout], [tout], [kq, kk, kv], [tq, tk, tv], "qkv", "float64")


def test_sdpa_causal_replaces_the_mask_as_torch_does():
    (kq, tq), (kk, tk), (kv, tv) = (_pair_tensors((1, 2, 4, 4), seed=i) for i in range(3))
    kmask, tmask = _both(_mask_arrays("bool", (4, 4)))
    kout = F.scaled_dot_product_attention(kq, kk, kv, attn_mask=kmask, is_causal=True)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask,
                                                            is_causal=True)
    _close(kout, tout)


def test_sdpa_grouped_query_heads_match_torch():
    (kq, tq), (kk, tk), (kv, tv) = (_pair_tensors(s, "float64", seed=i) for i, s in
                                    enumerate([(2, 6, 3, 4), (2, 2, 5, 4), (2, 3, 5, 4)]))
    kout = F.scaled_dot_product_attention(kq, kk, kv, enable_gqa=True)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    _close(kout, tout, "float64")
    _check_grads([kout], [tout], [kq, kk, kv], [tq, tk, tv], "qkv", "float64")


def test_sdpa_dropout_drops_attention_weights():
    q, k, v = (kiln.randn(2, 3, 5, 4) for _ in range(3))
    kiln.manual_seed(11)
    got = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    kiln.manual_seed(11)
    weights = kiln.softmax(q @ k.transpose(-2, -1) * 0.5, dim=-1)
    want = F.dropout(weights, 0.4, training=True) @ v
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    undropped = F.scaled_dot_product_attention(q, k, v)
    assert not np.allclose(got.numpy(), undropped.numpy())
    zero = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    assert np.all(zero.numpy() == 0)


def _randn(*shapes, dtype=None):
    return tuple(kiln.randn(*shape, dtype=dtype or kiln.float32) for shape in shapes)


# Each case makes its tensors when it runs: tensors made at collection would
# live in pytest's items until the interpreter's end, after kiln's module
# is torn down (nanobind then reports them as leaked).
@pytest.mark.parametrize("make, message", [
    (lambda: (_randn((4,), (4,), (4,)), {}), "at least 2 dimensional"),
    (lambda: (_randn((3, 4), (5, 4)) + _randn((5, 4), dtype=kiln.float64), {}), "same dtype"),
    (lambda: (_randn((3, 4), (5, 3), (5, 4)), {}), r"\[5, 3\]"),
    (lambda: (_randn((3, 4), (5, 4), (6, 4)), {}), "sequence length"),
    (lambda: (_randn((3, 4), (5, 4), (5, 4)), {"attn_mask": kiln.ones(3, 5, dtype=kiln.int64)}),
     "bool or float"),
    (lambda: (_randn((3, 4), (5, 4), (5, 4)), {"attn_mask": kiln.zeros(4, 5)}), r"\[4, 5\]"),
    (lambda: (_randn((2, 3, 4), (2, 5, 4), (2, 5, 4)), {"attn_mask": kiln.zeros(2, 1, 3, 5)}),
     r"\[2, 1, 3, 5\]"),
])
def test_sdpa_errors_name_the_shapes(make, message):
    args, kwargs = make()
    with pytest.raises((RuntimeError, TypeError, ValueError), match=message):
        F.scaled_dot_product_attention(*args, **kwargs)


# -- MultiheadAttention --------------------------------------------------------

E, HEADS, L, S, N = 8, 2, 4, 5, 3


def _mha_pair(dtype="float32", **kwargs):
    torch.manual_seed(0)
    tmod = torch.nn.MultiheadAttention(E, HEADS, **kwargs).to(DTYPES[dtype][1])
    kmod = nn.MultiheadAttention(E, HEADS, **kwargs, dtype=DTYPES[dtype][0])
    with torch.no_grad():  # nonzero biases, so that wrong bias wiring shows
        for name, p in tmod.named_parameters():
            if "bias" in name:
                p.copy_(torch.randn_like(p) * 0.5)
    _load(kmod, tmod)
    return kmod, tmod


MHA_CASES = [dict(zip(("batch_first", "kvdim", "bias", "add_bias_kv", "add_zero_attn"), c))
             for c in itertools.product([False, True], [False, True], [True, False],
                                        [False, True], [False, True])]


@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: "-".join(k for k, v in c.items() if v)
                         or "plain")
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)])
def test_multihead_attention_matches_torch(case, need_weights, average):
    kdim, vdim = (6, 7) if case["kvdim"] else (None, None)
    kmod, tmod = _mha_pair(batch_first=case["batch_first"], kdim=kdim, vdim=vdim,
                           bias=case["bias"], add_bias_kv=case["add_bias_kv"],
                           add_zero_attn=case["add_zero_attn"])
    order = (lambda n, s, e: (n, s, e)) if case["batch_first"] else (lambda n, s, e: (s, n, e))
    kq, tq = _pair_tensors(order(N, L, E), seed=1)
    kk, tk = _pair_tensors(order(N, S, kdim or E), seed=2)
    kv, tv = _pair_tensors(order(N, S, vdim or E), seed=3)
    kout = kmod(kq, kk, kv, need_weights=need_weights, average_attn_weights=average)
    tout = tmod(tq, tk, tv, need_weights=need_weights, average_attn_weights=average)
    assert (kout[1] is None) == (tout[1] is None)
    kres = [r for r in kout if r is not None]
    tres = [r for r in tout if r is not None]
    for k, t in zip(kres, tres):
        _close(k, t)
    _check_module_grads(kmod, tmod, kres, tres, (kq, kk, kv), (tq, tk, tv))


MASK_CASES = ["kpm_bool", "kpm_float", "attn2_bool", "attn2_float", "attn3_bool",
              "attn3_float", "kpm_bool+attn2_bool", "kpm_float+attn3_float"]


def _mha_masks(case, batched=True):
    rng = np.random.default_rng(5)
    out = {}
    for part in case.split("+"):
        kind, dtype = part.split("_")
        shape = {"kpm": (N, S) if batched else (S,), "attn2": (L, S),
                 "attn3": (N * HEADS if batched else HEADS, L, S)}[kind]
        masked = rng.random(shape) < 0.3
        masked[..., 0] = False  # no query loses every key
        array = masked if dtype == "bool" else np.where(masked, -np.inf, rng.standard_normal(
            shape)).astype(np.float32)
        out["key_padding_mask" if kind == "kpm" else "attn_mask"] = _both(array)
    return out


@pytest.mark.parametrize("masks", MASK_CASES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batched", [True, False])
def test_multihead_attention_masks_match_torch(masks, need_weights, batched):
    kmod, tmod = _mha_pair()
    shape = (lambda s: (s, N, E)) if batched else (lambda s: (s, E))
    kq, tq = _pair_tensors(shape(L), seed=1)
    kk, tk = _pair_tensors(shape(S), seed=2)
    kwargs = _mha_masks(masks, batched)
    kout = kmod(kq, kk, kk, need_weights=need_weights,
                **{name: pair[0] for name, pair in kwargs.items()})
    tout = tmod(tq, tk, tk, need_weights=need_weights,
                **{name: pair[1] for name, pair in kwargs.items()})
    kres = [r for r in kout if r is not None]
    tres = [r for r in tout if r is not None]
    assert len(kres) == len(tres)
    for k, t in zip(kres, tres):
        _close(k, t)
    _check_module_grads(kmod, tmod, kres, tres, (kq, kk), (tq, tk))


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_self_attention_causal_hint_and_eval_match_torch(need_weights):
    kmod, tmod = _mha_pair(batch_first=True)
    kx, tx = _pair_tensors((N, L, E), seed=4)
    kmask = nn.Transformer.generate_square_subsequent_mask(L)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    _close(kmask, tmask)
    kout = kmod(kx, kx, kx, attn_mask=kmask, is_causal=True, need_weights=need_weights)
    tout = tmod(tx, tx, tx, attn_mask=tmask, is_causal=True, need_weights=need_weights)
    _close(kout[0], tout[0])
    _check_module_grads(kmod, tmod, [kout[0]], [tout[0]], (kx,), (tx,))
    kmod.eval(), tmod.eval()
    with kiln.no_grad(), torch.no_grad():  # torch's fused fast path
        _close(kmod(kx, kx, kx, attn_mask=kmask)[0], tmod(tx, tx, tx, attn_mask=tmask)[0])


def test_multihead_attention_parameters_and_init_follow_torch():
    kmod = nn.MultiheadAttention(8, 2, kdim=6, vdim=7, add_bias_kv=True)
    tmod = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=7, add_bias_kv=True)
    assert [(n, tuple(p.shape)) for n, p in kmod.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tmod.named_parameters()]
    assert kmod.in_proj_weight is None and kmod.head_dim == 4
    assert np.all(kmod.in_proj_bias.detach().numpy() == 0)
    assert np.all(kmod.out_proj.bias.detach().numpy() == 0)
    bound = np.sqrt(6.0 / (8 + 6))  # xavier_uniform of k_proj_weight [8, 6]
    assert np.abs(kmod.k_proj_weight.detach().numpy()).max() <= bound
    plain = nn.MultiheadAttention(8, 2, bias=False)
    assert plain.in_proj_bias is None and plain.bias_k is None
    assert list(plain.state_dict()) == list(torch.nn.MultiheadAttention(8, 2, bias=False)
                                            .state_dict())


def test_multihead_attention_errors():
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="greater than 0"):
        nn.MultiheadAttention(0, 2)
    mha = nn.MultiheadAttention(8, 2)
    x = kiln.randn(4, 3, 8)
    with pytest.raises(RuntimeError, match="expecting embedding dimension of 8, but got 6"):
        mha(kiln.randn(4, 3, 6), kiln.randn(4, 3, 6), kiln.randn(4, 3, 6))
    with pytest.raises(RuntimeError, match=r"2D attn_mask is \[4, 3\], but should be \[4, 4\]"):
        mha(x, x, x, attn_mask=kiln.zeros(4, 3))
    with pytest.raises(RuntimeError, match=r"3D attn_mask is \[2, 4, 4\], but should be "
                                           r"\[6, 4, 4\]"):
        mha(x, x, x, attn_mask=kiln.zeros(2, 4, 4))
    with pytest.raises(RuntimeError, match="key_padded_mask.shape\\[1\\] to be 4, but got 5"):
        mha(x, x, x, key_padding_mask=kiln.zeros(3, 5))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="expected `key` and `value` to be 3-D"):
        mha(x, kiln.randn(4, 8), kiln.randn(4, 8))
    with pytest.raises(TypeError, match="only bool and floating types of key_padding_mask"):
        mha(x, x, x, key_padding_mask=kiln.zeros(3, 4, dtype=kiln.int64))


def test_functional_multi_head_attention_forward_matches_torch():
    kmod, tmod = _mha_pair()
    (kq, tq), (kk, tk) = _pair_tensors((L, N, E), seed=1), _pair_tensors((S, N, E), seed=2)
    kargs = (kq, kk, kk, E, HEADS, kmod.in_proj_weight, kmod.in_proj_bias, None, None, False,
             0.0, kmod.out_proj.weight, kmod.out_proj.bias)
    targs = (tq, tk, tk, E, HEADS, tmod.in_proj_weight, tmod.in_proj_bias, None, None, False,
             0.0, tmod.out_proj.weight, tmod.out_proj.bias)
    for k, t in zip(F.multi_head_attention_forward(*kargs, average_attn_weights=False),
                    torch.nn.functional.multi_head_attention_forward(
                        *targs, average_attn_weights=False)):
        _close(k, t)


# -- encoder and decoder layers, stacks, Transformer ------------------------

D, FF = 8, 16
LAYER_CASES = list(itertools.product([False, True], ["relu", "gelu"], [False, True]))


def _layer_pair(kind, norm_first, activation, batch_first, dtype="float32", **extra):
    torch.manual_seed(1)
    tact = {"relu": "relu", "gelu": "gelu", "tanh": torch.tanh}[activation]
    kact = {"relu": "relu", "gelu": "gelu", "tanh": kiln.tanh}[activation]
    tmod = getattr(torch.nn, kind)(D, 2, FF, dropout=0.0, activation=tact,
                                   batch_first=batch_first, norm_first=norm_first,
                                   **extra).to(DTYPES[dtype][1])
    kmod = getattr(nn, kind)(D, 2, FF, dropout=0.0, activation=kact, batch_first=batch_first,
                             norm_first=norm_first, dtype=DTYPES[dtype][0], **extra)
    with torch.no_grad():
        for name, p in tmod.named_parameters():
            if "bias" in name or "norm" in name:
                p.copy_(p + torch.randn_like(p) * 0.3)
    _load(kmod, tmod)
    return kmod, tmod


def _seq(batch_first, n, s, seed, dtype="float32"):
    return _pair_tensors((n, s, D) if batch_first else (s, n, D), dtype, seed=seed)


@pytest.mark.parametrize("norm_first, activation, batch_first", LAYER_CASES)
def test_encoder_layer_matches_torch_train_and_eval(norm_first, activation, batch_first):
    kmod, tmod = _layer_pair("TransformerEncoderLayer", norm_first, activation, batch_first)
    kx, tx = _seq(batch_first, N, L, seed=2)
    kpm = np.zeros((N, L), dtype=bool)
    kpm[0, -1] = True
    kkpm, tkpm = _both(kpm)
    kmask = nn.Transformer.generate_square_subsequent_mask(L)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    for kw in ({}, {"src_key_padding_mask": (kkpm, tkpm)}, {"src_mask": (kmask, tmask)},
               {"src_mask": (kmask, tmask), "is_causal": (True, True)}):
        kout = kmod(kx, **{k: v[0] for k, v in kw.items()})
        tout = tmod(tx, **{k: v[1] for k, v in kw.items()})
        _close(kout, tout, what=str(list(kw)))
    _check_module_grads(kmod, tmod, [kout], [tout], (kx,), (tx,))
    kmod.eval(), tmod.eval()
    with kiln.no_grad(), torch.no_grad():  # torch takes its fused path here
        _close(kmod(kx, src_key_padding_mask=kkpm), tmod(tx, src_key_padding_mask=tkpm))
        _close(kmod(kx), tmod(tx))


def test_encoder_layer_with_a_callable_activation_and_unbatched_input_in_float64():
    kmod, tmod = _layer_pair("TransformerEncoderLayer", False, "tanh", False, "float64",
                             bias=False)
    kx, tx = _pair_tensors((L, D), "float64", seed=3)
    kout, tout = kmod(kx), tmod(tx)
    _close(kout, tout, "float64")
    _check_module_grads(kmod, tmod, [kout], [tout], (kx,), (tx,), "float64")


@pytest.mark.parametrize("norm_first, activation, batch_first", LAYER_CASES)
def test_decoder_layer_matches_torch(norm_first, activation, batch_first):
    kmod, tmod = _layer_pair("TransformerDecoderLayer", norm_first, activation, batch_first)
    kx, tx = _seq(batch_first, N, L, seed=2)
    km, tm = _seq(batch_first, N, S, seed=3)
    kmask = nn.Transformer.generate_square_subsequent_mask(L)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    mpm = np.zeros((N, S), dtype=bool)
    mpm[1, :2] = True
    kmpm, tmpm = _both(mpm)
    kout = kmod(kx, km, tgt_mask=kmask, memory_key_padding_mask=kmpm, tgt_is_causal=True)
    tout = tmod(tx, tm, tgt_mask=tmask, memory_key_padding_mask=tmpm, tgt_is_causal=True)
    _close(kout, tout)
    _check_module_grads(kmod, tmod, [kout], [tout], (kx, km), (tx, tm))
    kmod.eval(), tmod.eval()
    with kiln.no_grad(), torch.no_grad():
        _close(kmod(kx, km, tgt_mask=kmask), tmod(tx, tm, tgt_mask=tmask))


def test_encoder_clones_start_equal_and_stay_independent():
    layer = nn.TransformerEncoderLayer(D, 2, FF)
    encoder = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(D), enable_nested_tensor=False)
    first, second = encoder.layers[0], encoder.layers[2]
    assert first is not layer and first.linear1.weight is not second.linear1.weight
    np.testing.assert_array_equal(first.linear1.weight.detach().numpy(),
                                  layer.linear1.weight.detach().numpy())
    np.testing.assert_array_equal(first.self_attn.in_proj_weight.detach().numpy(),
                                  second.self_attn.in_proj_weight.detach().numpy())
    with kiln.no_grad():
        first.linear1.weight.add_(1.0)
    assert not np.allclose(first.linear1.weight.detach().numpy(),
                           second.linear1.weight.detach().numpy())
    torch_keys = list(torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(D, 2, FF), 3, norm=torch.nn.LayerNorm(D),
        enable_nested_tensor=False).state_dict())
    assert list(encoder.state_dict()) == torch_keys


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(norm_first, batch_first):
    torch.manual_seed(2)
    kwargs = dict(d_model=D, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                  dim_feedforward=FF, dropout=0.0, batch_first=batch_first,
                  norm_first=norm_first)
    tmod = torch.nn.Transformer(**kwargs)
    kmod = nn.Transformer(**kwargs)
    _load(kmod, tmod)
    ks, ts = _seq(batch_first, N, S, seed=1)
    kt, tt = _seq(batch_first, N, L, seed=2)
    kmask = nn.Transformer.generate_square_subsequent_mask(L)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    spm = np.zeros((N, S), dtype=bool)
    spm[2, -2:] = True
    kspm, tspm = _both(spm)
    kout = kmod(ks, kt, tgt_mask=kmask, src_key_padding_mask=kspm,
                memory_key_padding_mask=kspm)
    tout = tmod(ts, tt, tgt_mask=tmask, src_key_padding_mask=tspm,
                memory_key_padding_mask=tspm)
    _close(kout, tout)
    _check_module_grads(kmod, tmod, [kout], [tout], (ks, kt), (ts, tt))
    wide_src = kiln.randn(N, S, D + 1) if batch_first else kiln.randn(S, N, D + 1)
    with pytest.raises(RuntimeError, match="feature number"):
        kmod(wide_src, kt)
    with pytest.raises(RuntimeError, match="batch number"):
        kmod(kiln.randn(N + 1, S, D) if batch_first else kiln.randn(S, N + 1, D), kt)


def test_transformer_init_and_square_subsequent_mask():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=16)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()  # [16, 8]: xavier-uniform
    assert np.abs(w).max() <= np.sqrt(6.0 / 24) and w.std() > 0.1
    for sz, dtype, tdtype in [(1, None, None), (5, kiln.float64, torch.float64)]:
        got = nn.Transformer.generate_square_subsequent_mask(sz, dtype=dtype)
        want = torch.nn.Transformer.generate_square_subsequent_mask(sz, dtype=tdtype)
        assert got.dtype == (dtype or kiln.float32)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# -- a small language model, trained in both --------------------------------

VOCAB, CTX = 11, 6


def _language_models():
    class TorchLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, D)
            layer = torch.nn.TransformerEncoderLayer(D, 2, FF, dropout=0.0, batch_first=True,
                                                     norm_first=True, activation="gelu")
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = torch.nn.Linear(D, VOCAB)

        def forward(self, tokens):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
            return self.head(self.encoder(self.embed(tokens), mask=mask, is_causal=True))

    class KilnLM(nn.Module):  # the same program, torch replaced by kiln
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D)
            layer = nn.TransformerEncoderLayer(D, 2, FF, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(D, VOCAB)

        def forward(self, tokens):
            mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
            return self.head(self.encoder(self.embed(tokens), mask=mask, is_causal=True))

    torch.manual_seed(3)
    tmodel = TorchLM()
    kmodel = KilnLM()
    _load(kmodel, tmodel)
    return kmodel, tmodel


def test_small_language_model_trains_like_torch():
    kmodel, tmodel = _language_models()
    tokens = np.random.default_rng(0).integers(0, VOCAB, (4, CTX + 1))
    kx, ky = kiln.tensor(tokens[:, :-1]), kiln.tensor(tokens[:, 1:])
    tx, ty = torch.tensor(tokens[:, :-1]), torch.tensor(tokens[:, 1:])
    kopt = kiln.optim.SGD(kmodel.parameters(), lr=0.5)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.5)
    klosses, tlosses = [], []
    for _ in range(3):
        for model, opt, x, y, losses, cross_entropy in (
                (kmodel, kopt, kx, ky, klosses, F.cross_entropy),
                (tmodel, topt, tx, ty, tlosses, torch.nn.functional.cross_entropy)):
            opt.zero_grad()
            loss = cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    np.testing.assert_allclose(klosses, tlosses, rtol=1e-5)
    assert klosses[2] < klosses[0]


# -- compiled and exported ------------------------------------------------------

def _encoder(batch_first=True):
    torch.manual_seed(4)
    layer = torch.nn.TransformerEncoderLayer(D, 2, FF, dropout=0.0, batch_first=batch_first)
    tmod = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(D),
                                       enable_nested_tensor=False).eval()
    klayer = nn.TransformerEncoderLayer(D, 2, FF, dropout=0.0, batch_first=batch_first)
    kmod = nn.TransformerEncoder(klayer, 2, norm=nn.LayerNorm(D)).eval()
    _load(kmod, tmod)
    return kmod, tmod


def test_traced_and_hybridized_encoder_give_eager_outputs():
    kmod, tmod = _encoder()
    kx, tx = _pair_tensors((N, L, D), seed=5, grad=False)
    with kiln.no_grad():
        eager = kmod(kx)
        traced = kiln.jit.trace(kmod, kx)
        np.testing.assert_array_equal(traced(kx).numpy(), eager.numpy())
        other = kiln.randn(N, L, D)
        np.testing.assert_array_equal(traced(other).numpy(), kmod(other).numpy())
        kmod.hybridize()
        np.testing.assert_array_equal(kmod(kx).numpy(), eager.numpy())
        np.testing.assert_array_equal(kmod(kx).numpy(), eager.numpy())
        kmod.hybridize(active=False)
    with torch.no_grad():
        _close(eager, tmod(tx))


def test_traced_encoder_with_masks_gives_eager_outputs():
    kmod, _ = _encoder(batch_first=False)
    x = kiln.randn(L, N, D)
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    kpm = kiln.tensor(np.array([[False] * L, [False] * (L - 1) + [True], [False] * L]))

    def run(x, mask, kpm):
        return kmod(x, mask=mask, src_key_padding_mask=kpm)

    with kiln.no_grad():
        traced = kiln.jit.trace(run, (x, mask, kpm))
        np.testing.assert_array_equal(traced(x, mask, kpm).numpy(), run(x, mask, kpm).numpy())


def test_onnx_export_of_the_traced_encoder_runs_in_onnx_runtime(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    kmod, _ = _encoder()
    x = kiln.randn(N, L, D)
    path = tmp_path / "encoder.onnx"
    with kiln.no_grad():
        traced = kiln.jit.trace(kmod, x)
        kiln.onnx.export(traced, None, path)
        want = kmod(x).numpy()
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
