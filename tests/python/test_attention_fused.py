"""The transformer encoder's fusions against torch and against kiln's own
unfused ops: the fused attention op (one kernel for softmax(q kᵀ · scale +
mask) v) over odd shapes and masks, with gradients; the fuse_attention
pass on frozen traces of kiln.nn layers and on ONNX-imported attention
(MatMul -> Div -> Add -> Softmax -> MatMul, checked against ONNX Runtime);
linear + gelu as one linear_act; the vectorized float32 gelu and softmax
against float64 torch."""
import math

import numpy as np
import pytest
import torch

import kiln
import kiln.jit
from kiln import _C, nn

ATOL, RTOL = 2e-5, 1e-4


def _attention(q, k, v, mask=None, scale=None, is_causal=False):
    """The fused op itself, through the op table."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return _C.dispatch("scaled_dot_product_attention", [q, k, v, mask],
                       {"scale": scale, "is_causal": is_causal})


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("L,S,E", [(1, 1, 64), (1, 129, 48), (129, 129, 48), (128, 128, 64),
                                   (129, 7, 80), (5, 300, 16)])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive", "causal"])
def test_fused_attention_matches_torch(L, S, E, mask_kind):
    q, k, v = _rand(2, 3, L, E, seed=1), _rand(2, 3, S, E, seed=2), _rand(2, 3, S, E, seed=3)
    mask, is_causal = None, mask_kind == "causal"
    if mask_kind == "bool":
        mask = np.random.default_rng(4).random((L, S)) > 0.3
        mask[L // 2] = False  # a query that sees no key: zeros, as torch
    elif mask_kind == "additive":
        mask = _rand(2, 1, 1, S, seed=5)
        mask[0, 0, 0, : S // 2] = -np.inf
    kq, kk, kv = (kiln.tensor(a) for a in (q, k, v))
    got = _attention(kq, kk, kv, None if mask is None else kiln.tensor(mask),
                     is_causal=is_causal)
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v),
        attn_mask=None if mask is None else torch.tensor(mask), is_causal=is_causal)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=ATOL, rtol=RTOL)
    if mask_kind == "bool":
        assert not np.any(got.numpy()[:, :, L // 2])


def test_fused_attention_gradients_match_torch():
    arrays = [_rand(1, 2, 9, 8, seed=s, dtype=np.float64) for s in range(3)]
    mask = _rand(9, 9, seed=7, dtype=np.float64)
    mask[3] = -np.inf  # no key for query 3: zero gradients there
    kin = [kiln.tensor(a).requires_grad_() for a in arrays]
    tin = [torch.tensor(a, requires_grad=True) for a in arrays]
    grad = _rand(1, 2, 9, 8, seed=9, dtype=np.float64)
    _attention(*kin, kiln.tensor(mask)).backward(kiln.tensor(grad))
    torch.nn.functional.scaled_dot_product_attention(
        *tin, attn_mask=torch.tensor(mask)).backward(torch.tensor(grad))
    for k, t in zip(kin, tin):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), atol=1e-10, rtol=1e-8)


def _encoder_layer(d_model, nhead, activation="gelu"):
    torch.manual_seed(0)
    tlayer = torch.nn.TransformerEncoderLayer(d_model, nhead, 3 * d_model, dropout=0.0,
                                              activation=activation, batch_first=True).eval()
    klayer = nn.TransformerEncoderLayer(d_model, nhead, 3 * d_model, dropout=0.0,
                                        activation=activation, batch_first=True).eval()
    klayer.load_state_dict({k: v.detach().numpy().copy() for k, v in tlayer.state_dict().items()})
    return klayer, tlayer


def _ops(traced):
    return [n.op for n in traced.graph.nodes]


@pytest.mark.parametrize("seq", [1, 129])
@pytest.mark.parametrize("head_dim", [48, 64, 80])
def test_frozen_encoder_layer_fuses_and_matches_eager(seq, head_dim):
    klayer, tlayer = _encoder_layer(2 * head_dim, 2)
    x = _rand(2, seq, 2 * head_dim, seed=seq)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = klayer(kx).numpy()
        frozen = kiln.jit.trace(klayer, kx, frozen=True)
        exact = kiln.jit.trace(klayer, kx, frozen=True, exact=True)
        ops = _ops(frozen)
        assert "scaled_dot_product_attention" in ops and "softmax" not in ops, ops
        assert "linear_act" in ops and "gelu" not in ops, ops
        assert "scaled_dot_product_attention" not in _ops(exact)
        np.testing.assert_allclose(frozen(kx).numpy(), eager, atol=ATOL, rtol=RTOL)
        np.testing.assert_array_equal(exact(kx).numpy(), eager)
    with torch.no_grad():
        np.testing.assert_allclose(eager, tlayer(torch.tensor(x)).numpy(), atol=1e-4, rtol=1e-4)


def test_default_trace_fuses_gelu_and_keeps_eager_bits():
    """linear_act's gelu runs gelu's own kernel over the product: the same
    bits; attention stays unfused where rounding must not change."""
    klayer, _ = _encoder_layer(96, 2)
    kx = kiln.tensor(_rand(3, 17, 96))
    with kiln.no_grad():
        traced = kiln.jit.trace(klayer, kx)
        assert "linear_act" in _ops(traced) and "gelu" not in _ops(traced)
        assert "scaled_dot_product_attention" not in _ops(traced)
        np.testing.assert_array_equal(traced(kx).numpy(), klayer(kx).numpy())


def test_linear_gelu_fusion_trains_like_torch():
    """The fused op's backward computes the linear again: the gradients of
    a traced linear + gelu equal torch's."""
    torch.manual_seed(1)
    tlin = torch.nn.Linear(12, 20)
    klin = nn.Linear(12, 20)
    klin.load_state_dict({k: v.detach().numpy().copy() for k, v in tlin.state_dict().items()})
    x = _rand(5, 12, seed=3)
    traced = kiln.jit.trace(nn.Sequential(klin, nn.GELU()), kiln.tensor(x))
    assert "linear_act" in _ops(traced)
    kx = kiln.tensor(x).requires_grad_()
    traced(kx).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(tlin(tx)).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(klin.weight.grad.numpy(), tlin.weight.grad.numpy(), atol=1e-5,
                               rtol=1e-5)


def _onnx_attention_model(path, batch, heads, seq, head_dim):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    shape = [batch, heads, seq, head_dim]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "root"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "v"], ["out"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 1, seq]))
    root = helper.make_tensor("root", TensorProto.FLOAT, [], [math.sqrt(head_dim)])
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)],
                              initializer=[root])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


def test_onnx_imported_attention_is_fused_and_matches_onnx_runtime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "attention.onnx"
    _onnx_attention_model(path, 2, 4, 33, 64)
    feeds = {n: _rand(2, 4, 33, 64, seed=i) for i, n in enumerate("qkv")}
    mask = np.zeros((2, 1, 1, 33), np.float32)
    mask[1, 0, 0, 20:] = -10000.0  # BERT's padding mask
    feeds["mask"] = mask
    model = kiln.onnx.load(str(path))
    assert "scaled_dot_product_attention" in _ops(model)
    got = model(*(kiln.tensor(feeds[n]) for n in ("q", "k", "v", "mask")))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got.numpy(), want[0], atol=ATOL, rtol=RTOL)


def test_gelu_float32_is_accurate_in_its_tails():
    """x Φ(x) relative to itself far into the negative tail, against an
    exact erfc (float64 torch loses those digits to 1 + erf cancelling;
    torch's float32 kernel is 17% off at x = -5)."""
    x = np.concatenate([np.linspace(-12, 12, 20001), [0.0, -0.0]]).astype(np.float32)
    got = nn.functional.gelu(kiln.tensor(x)).numpy()
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    near = x >= -6  # beyond, the rounding of x²/2 in the exponent shows: 3e-5
    np.testing.assert_allclose(got[near], want[near], rtol=5e-6, atol=1e-37)
    np.testing.assert_allclose(got[~near], want[~near], rtol=3e-5, atol=1e-37)
    tanh_form = nn.functional.gelu(kiln.tensor(x), approximate="tanh").numpy()
    want_tanh = torch.nn.functional.gelu(torch.tensor(x, dtype=torch.float64),
                                         approximate="tanh").numpy()
    np.testing.assert_allclose(tanh_form, want_tanh, rtol=2e-6, atol=1e-7)


def test_softmax_float32_rows_match_float64():
    x = _rand(7, 300, seed=11) * 10
    x[2, 5] = np.inf
    x[3] = -np.inf
    x[4, 7] = np.nan
    got = nn.functional.softmax(kiln.tensor(x), dim=-1).numpy()
    want = torch.softmax(torch.tensor(x, dtype=torch.float64), -1).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-8)
