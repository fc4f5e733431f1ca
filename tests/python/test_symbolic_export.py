"""Graphs with symbolic sizes (issue 21) leave kiln whole: exported to ONNX
with dim_params and in-graph size arithmetic, run in ONNX Runtime at sizes
never seen, and checked against kiln's own outputs. The graphs are built
from IR text, as a trace with dynamic shapes records them."""
import os
import pathlib
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
KILN_TOOL = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build" / "release")) / "kiln"

# A transformer-style block over [batch, seq, 16]: a projection, a view into
# 2 heads of 8 named by the symbols, attention per head, back to
# [batch, seq, 16]; a second output keeps the first half of the sequence.
ATTENTION = """graph(%x : f32[batch, seq, 16]) {
  %w : f32[16, 16] = param
  %b : f32[16] = param
  %0 = linear(%x, %w, %b)
  %1 = view(%0) {shape=[batch, seq, 2, 8]}
  %2 = transpose(%1) {dim0=1, dim1=2}
  %3 = transpose(%2) {dim0=2, dim1=3}
  %4 = matmul(%2, %3)
  %5 = softmax(%4) {dim=-1}
  %6 = matmul(%5, %2)
  %7 = transpose(%6) {dim0=1, dim1=2}
  %8 = reshape(%7) {shape=[batch, seq, -1]}
  %9 : f32[batch, seq // 2, 16] = narrow(%8) {dim=1, start=0, length=seq // 2}
  return (%8, %9)
}
"""

# Sizes as attributes of other ops: expand to [batch, 4], a narrow of
# symbolic length, a select from the end of a symbolic dim, a split into
# symbolic halves, a reshape flattening two symbols, a slice ending at a
# symbol, and a variance over a symbolic count. (A graph from text carries
# no guards: these ops' checks hold for every size, so none is needed.)
SIZE_OPS = """graph(%a : f32[batch, 4], %t : f32[batch, n]) {
  %c0 : f32[4] = const [1, 2, 3, 4]
  %0 : f32[batch, 4] = expand(%c0) {size=[batch, 4]}
  %1 : f32[batch, 4] = mul(%a, %0)
  %2 : f32[batch, n - 1] = narrow(%t) {dim=1, start=1, length=n - 1}
  %3 : f32[batch] = select(%t) {dim=1, index=-1}
  %4, %5 = split(%t) {dim=1, sizes=[n // 2, n - n // 2]}
  %6 : f32[batch*n] = reshape(%t) {shape=[batch*n]}
  %7 : f32[batch] = var(%t) {dims=[1], correction=1, keepdim=false}
  %8 : f32[batch, (n + 1) // 2] = slice(%t) {dim=1, end=n, step=2}
  return (%1, %2, %3, %4, %5, %6, %7, %8)
}
"""


def module_from_text(text, **weights):
    """A TracedModule running the parsed graph, its parameters bound to `weights`."""
    graph = kiln.jit.parse_graph(text)
    for name, data in weights.items():
        param = graph.find_param(name)
        param.replace_all_uses_with(graph.constant(data))
        graph.remove_unused(param)
    return kiln.jit.from_graph(graph)


def attention_module():
    kiln.manual_seed(0)
    return module_from_text(ATTENTION, w=kiln.randn(16, 16) * 0.3, b=kiln.randn(16))


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def check_runs_as_kiln(run, module, *inputs):
    feeds = {i.name: x.numpy() for i, x in zip(run.get_inputs(), inputs)}
    got = run.run(None, feeds)
    want = as_tuple(module(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_attention_exports_with_symbolic_dims_and_runs_at_every_size(tmp_path):
    module = attention_module()
    path = tmp_path / "attention.onnx"
    kiln.onnx.export(module, None, path, output_names=["y", "half"])
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    run = session(path)
    assert run.get_inputs()[0].shape == ["batch", "seq", 16]
    assert run.get_outputs()[0].shape == ["batch", "seq", 16]
    assert run.get_outputs()[1].shape == ["batch", "seq // 2", 16]
    # Sizes come from the input's shape at run time (the narrow's seq // 2).
    ops = {node.op_type for node in model.graph.node}
    assert {"Shape", "Gather"} <= ops
    for batch in (1, 3, 8):
        for seq in (5, 12):
            check_runs_as_kiln(run, module, kiln.randn(batch, seq, 16))


def test_size_attributes_of_other_ops_are_computed_in_the_graph(tmp_path):
    module = module_from_text(SIZE_OPS)
    path = tmp_path / "sizes.onnx"
    kiln.onnx.export(module, None, path)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    run = session(path)
    for batch, n in ((1, 2), (4, 7), (6, 10)):
        check_runs_as_kiln(run, module, kiln.randn(batch, 4), kiln.randn(batch, n))


def test_dynamic_axes_is_optional_and_may_only_repeat_the_graphs_symbols(tmp_path):
    module = attention_module()
    kiln.onnx.export(module, None, tmp_path / "a.onnx", dynamic_axes={"x": {0: "batch"}})
    assert session(tmp_path / "a.onnx").get_inputs()[0].shape == ["batch", "seq", 16]
    with pytest.raises(ValueError, match=r"dynamic_axes\['x'\] asks for dims \[2\]"):
        kiln.onnx.export(module, None, tmp_path / "b.onnx", dynamic_axes={"x": [0, 2]})


def test_a_symbolic_attribute_onnx_cannot_compute_is_an_error_naming_it(tmp_path):
    module = module_from_text("""graph(%x : f32[batch, seq]) {
  %0, %1, %2 = layer_norm(%x, none, none) {normalized_shape=[seq]}
  return (%0)
}
""")
    with pytest.raises(RuntimeError, match=r"attribute 'normalized_shape' of layer_norm .* is "
                       r"the symbolic size \[seq\]"):
        kiln.onnx.export(module, None, tmp_path / "ln.onnx")


def test_save_load_round_trip_runs_at_three_sizes(tmp_path):
    module = attention_module()
    path = tmp_path / "attention.kiln"
    kiln.jit.save(module, path, kiln.randn(2, 4, 16))
    loaded = kiln.jit.load(path, verify=True)
    assert "f32[batch, seq, 16]" in str(loaded.graph)
    for shape in ((1, 3, 16), (5, 9, 16), (7, 1, 16)):
        x = kiln.randn(*shape)
        for got, want in zip(loaded(x), module(x)):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match=r"input 0 \('x'\) dim 2: expected 16, got 8"):
        loaded(kiln.randn(2, 3, 8))


def tool(*args):
    return subprocess.run([str(KILN_TOOL), *map(str, args)], capture_output=True, text=True)


def test_kiln_tool_runs_a_symbolic_model_at_any_size(tmp_path):
    assert KILN_TOOL.exists(), f"no kiln tool at {KILN_TOOL}"
    module = attention_module()
    path = tmp_path / "attention.kiln"
    module.save(path, kiln.randn(2, 4, 16))
    info = tool("info", path)
    assert info.returncode == 0, info.stderr
    assert "format       2" in info.stdout and "float32[batch, seq, 16]" in info.stdout
    assert "sizes        batch, seq" in info.stdout and "at the example's sizes" in info.stdout
    for shape in ((1, 3, 16), (6, 11, 16)):  # no re-batching: the graph is symbolic
        x = kiln.randn(*shape)
        np.save(tmp_path / "x.npy", x.numpy())
        result = tool("run", path, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy",
                      "-o", tmp_path / "half.npy")
        assert result.returncode == 0, result.stderr
        y, half = module(x)
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y.numpy())
        np.testing.assert_array_equal(np.load(tmp_path / "half.npy"), half.numpy())
    np.save(tmp_path / "bad.npy", kiln.randn(2, 3, 8).numpy())
    bad = tool("run", path, "-i", tmp_path / "bad.npy")
    assert bad.returncode == 1 and "input 0 ('x') dim 2: expected 16, got 8" in bad.stderr
    bench = tool("bench", path, "--batch", "8", "--size", "seq=32", "--iterations", "5",
                 "--warmup", "1")
    assert bench.returncode == 0 and "(batch 8, batch=8, seq=32," in bench.stdout, bench.stderr
    module.save(tmp_path / "bare.kiln", ())
    no_sizes = tool("bench", tmp_path / "bare.kiln", "--iterations", "5")
    assert no_sizes.returncode == 1 and "give --size for batch, seq" in no_sizes.stderr


class Heads(kiln.nn.Module):
    """Attention heads as PyTorch users write them: sizes from x.shape."""

    def __init__(self):
        super().__init__()
        self.qkv = kiln.nn.Linear(16, 48)

    def forward(self, x):
        b, s, c = x.shape
        q, k, v = (t.view(b, s, 2, c // 2).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        return (att @ v).transpose(1, 2).reshape(b, s, c)


def test_dynamic_axes_of_a_module_keep_any_dim_symbolic(tmp_path):
    # Not only the batch: the model is traced with the dims asked for as
    # symbols, so the sequence length stays general too.
    module = Heads().eval()
    path = tmp_path / "heads.onnx"
    kiln.onnx.export(module, kiln.randn(2, 7, 16), path,
                     dynamic_axes={"x": {0: "batch", 1: "seq"}, "output": {0: "batch"}})
    run = session(path)
    assert run.get_inputs()[0].shape == ["batch", "seq", 16]
    with kiln.no_grad():
        for batch, seq in ((1, 1), (3, 5), (2, 33)):
            check_runs_as_kiln(run, module, kiln.randn(batch, seq, 16))
