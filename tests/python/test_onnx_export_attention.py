"""Frozen traces hold scaled_dot_product_attention (jit/passes/fuse_attention
puts it there); kiln.onnx.export writes it as the MatMul, Softmax and MatMul
it stands for, and ONNX Runtime gives kiln's outputs. Regression: the export
refused such traces ("op 'scaled_dot_product_attention' has no ONNX
translation")."""
import numpy as np
import onnxruntime as ort
import pytest

import kiln
import kiln.nn as nn


def run_onnx(path, *inputs):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    run = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(run.get_inputs(), inputs)}
    return run.run(None, feeds)


def graph_text(module):
    return str(module.graph)


class MaskedLayer(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, mask):
        return self.layer(x, src_mask=mask)


@pytest.mark.parametrize("masked", [False, True])
def test_frozen_transformer_layer_exports(tmp_path, masked):
    kiln.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, activation="gelu", batch_first=True).eval()
    x = kiln.randn(2, 8, 32)
    mask = kiln.triu(kiln.full((8, 8), float("-inf")), diagonal=1) if masked else None
    args = (x, mask) if masked else (x,)
    with kiln.no_grad():
        traced = kiln.jit.trace(MaskedLayer(layer) if masked else layer, args, frozen=True)
        # kiln.nn's masked attention guards rows that see no key with a
        # where() the fusion does not match (yet): only the unmasked one fuses
        assert ("scaled_dot_product_attention" in graph_text(traced)) == (not masked)
        path = tmp_path / "layer.onnx"
        kiln.onnx.export(traced, args, str(path))
        want = traced(*args).numpy()
    (got,) = run_onnx(path, *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


ATTENTION = """graph(%q : f32[2, 3, 5, 8], %k : f32[2, 3, 6, 8], %v : f32[2, 3, 6, 4],
      %m : {mask}) {{
  %0 = scaled_dot_product_attention(%q, %k, %v, %m) {{scale=0.35, is_causal={causal}}}
  return (%0)
}}
"""


@pytest.mark.parametrize("mask_kind, causal", [("bool", "false"), ("float", "false"),
                                                ("bool", "true")])
def test_attention_op_exports(tmp_path, mask_kind, causal):
    mask_type = "bool[5, 6]" if mask_kind == "bool" else "f32[2, 1, 5, 6]"
    text = ATTENTION.format(mask=mask_type, causal=causal)
    module = kiln.jit.from_graph(kiln.jit.parse_graph(text))
    kiln.manual_seed(1)
    q, k, v = kiln.randn(2, 3, 5, 8), kiln.randn(2, 3, 6, 8), kiln.randn(2, 3, 6, 4)
    if mask_kind == "bool":
        # every query sees at least one key (ONNX would give NaN for none)
        m = kiln.rand(5, 6) > 0.4
        m[:, 0] = True
    else:
        m = kiln.randn(2, 1, 5, 6)
    path = tmp_path / "attention.onnx"
    kiln.onnx.export(module, (q, k, v, m), str(path))
    want = module(q, k, v, m).numpy()
    (got,) = run_onnx(path, q, k, v, m)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_kind, causal", [("bool", "false"), ("float", "false"),
                                                ("float", "true")])
def test_rows_that_see_no_key_export_as_zeros(tmp_path, mask_kind, causal):
    """kiln's op gives zeros for a query whose keys are all masked (as
    torch's does); a bare Softmax over a row of -inf gives NaN. Regression:
    the export gave NaN there, for -inf (padding) float masks too."""
    mask_type = "bool[5, 6]" if mask_kind == "bool" else "f32[2, 1, 5, 6]"
    module = kiln.jit.from_graph(kiln.jit.parse_graph(ATTENTION.format(mask=mask_type,
                                                                       causal=causal)))
    kiln.manual_seed(2)
    q, k, v = kiln.randn(2, 3, 5, 8), kiln.randn(2, 3, 6, 8), kiln.randn(2, 3, 6, 4)
    if mask_kind == "bool":
        m = kiln.rand(5, 6) > 0.4
        m[:, 0] = True
        m[2] = False
    else:
        m = kiln.randn(2, 1, 5, 6)
        m[0, 0, 3] = float("-inf")
    path = tmp_path / "attention.onnx"
    kiln.onnx.export(module, (q, k, v, m), str(path))
    want = module(q, k, v, m).numpy()
    assert not np.isnan(want).any()
    (got,) = run_onnx(path, q, k, v, m)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_causal_attention_with_a_symbolic_batch_exports(tmp_path):
    """is_causal's mask needs the query and key lengths only. Regression:
    the export asked for every dim of q and k to be concrete, so a graph
    with a symbolic batch was refused."""
    text = """graph(%q : f32[n, 3, 5, 8], %k : f32[n, 3, 6, 8], %v : f32[n, 3, 6, 4]) {
  %0 = scaled_dot_product_attention(%q, %k, %v) {scale=0.35, is_causal=true}
  return (%0)
}
"""
    module = kiln.jit.from_graph(kiln.jit.parse_graph(text))
    kiln.manual_seed(3)
    path = tmp_path / "causal.onnx"
    kiln.onnx.export(module, (kiln.randn(2, 3, 5, 8), kiln.randn(2, 3, 6, 8),
                              kiln.randn(2, 3, 6, 4)), str(path))
    for batch in (1, 4):
        q, k, v = kiln.randn(batch, 3, 5, 8), kiln.randn(batch, 3, 6, 8), kiln.randn(batch, 3, 6, 4)
        (got,) = run_onnx(path, q, k, v)
        np.testing.assert_allclose(got, module(q, k, v).numpy(), rtol=1e-5, atol=1e-5)


def test_causal_attention_with_a_symbolic_length_is_refused_naming_it(tmp_path):
    text = """graph(%q : f32[2, 3, s, 8], %k : f32[2, 3, s, 8], %v : f32[2, 3, s, 4]) {
  %0 = scaled_dot_product_attention(%q, %k, %v) {scale=0.35, is_causal=true}
  return (%0)
}
"""
    module = kiln.jit.from_graph(kiln.jit.parse_graph(text))
    args = (kiln.randn(2, 3, 5, 8), kiln.randn(2, 3, 5, 8), kiln.randn(2, 3, 5, 4))
    with pytest.raises(RuntimeError, match=r"is_causal.*query and key lengths.*\[s, s\]"):
        kiln.onnx.export(module, args, str(tmp_path / "causal.onnx"))
