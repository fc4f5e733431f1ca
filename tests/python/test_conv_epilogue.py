"""Convolution epilogues fused for inference (issue 25): conv2d + residual
add + activation (relu, relu6, hardswish, hardsigmoid, sigmoid, silu) become
one conv2d_fused in frozen traces and ONNX imports (fuse_conv_epilogue), on
every convolution path (oneDNN's blocked and plain layouts, kiln's depthwise
and direct kernels), within float32 tolerance of PyTorch; exact=True keeps
them apart; a residual that broadcasts is not fused; ONNX export writes the
ops the fused op stands for."""
import io

import numpy as np
import pytest

import kiln
import kiln.jit
import kiln.nn as knn

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

ACTIVATIONS = {
    "relu": lambda nn: nn.ReLU(),
    "relu6": lambda nn: nn.ReLU6(),
    "hardswish": lambda nn: nn.Hardswish(),
    "hardsigmoid": lambda nn: nn.Hardsigmoid(),
    "sigmoid": lambda nn: nn.Sigmoid(),
    "silu": lambda nn: nn.SiLU(),
}


def conv_act(nn, c_in, c_out, kernel, activation, stride=1, padding=0, groups=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding,
                                   groups=groups),
                         ACTIVATIONS[activation](nn))


def residual(nn, body, activation=None, broadcast=False):
    """activation(body(x) + x), or + the mean of x over its pixels
    (a [N, C, 1, 1] residual that broadcasts) with broadcast."""
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body
            self.act = ACTIVATIONS[activation](nn) if activation else None

        def forward(self, x):
            skip = x.mean((2, 3), keepdim=True) if broadcast else x
            y = self.body(x) + skip
            return self.act(y) if self.act is not None else y
    return Residual()


def leaky_floor(nn, c_in, c_out, floor=None):
    """openwakeword's convolutions: conv, leaky_relu(0.2), then maximum with
    a constant (the floor; none: no maximum)."""
    class LeakyFloor(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, 3, padding=(0, 1))
            self.act = nn.LeakyReLU(0.2)

        def forward(self, x):
            y = self.act(self.conv(x))
            if floor is None:
                return y
            lib = torch if isinstance(y, torch.Tensor) else kiln
            return lib.maximum(y, lib.full((), floor))
    return LeakyFloor()


# (input shape, model, conv2d_fused nodes expected in the frozen trace).
CASES = {
    # ResNet's block end on oneDNN's blocked layout (3x3, >= 64 pixels).
    "resnet_relu_residual": ((1, 8, 10, 10), lambda nn: residual(
        nn, nn.Conv2d(8, 8, 3, padding=1), "relu"), 1),
    # Odd channels, the direct kernel (<= 16 output channels).
    "hardswish_odd_channels": ((2, 3, 9, 11), lambda nn: conv_act(nn, 3, 7, 3, "hardswish",
                                                                  padding=1), 1),
    "hardsigmoid_one_by_one_image": ((1, 5, 1, 1), lambda nn: conv_act(
        nn, 5, 24, 1, "hardsigmoid"), 1),
    "relu6_depthwise_stride2": ((1, 9, 15, 15), lambda nn: conv_act(
        nn, 9, 9, 5, "relu6", stride=2, padding=2, groups=9), 1),
    "silu_stride_over_kernel": ((1, 4, 23, 23), lambda nn: conv_act(nn, 4, 20, 2, "silu",
                                                                    stride=5), 1),
    "sigmoid_plain_1x1": ((1, 24, 6, 6), lambda nn: conv_act(nn, 24, 32, 1, "sigmoid"), 1),
    # MobileNet's inverted residual: expand + hardswish, depthwise +
    # hardswish, then the linear projection + identity (three fused ops).
    "mobilenet_inverted_residual": ((1, 16, 12, 12), lambda nn: residual(nn, nn.Sequential(
        conv_act(nn, 16, 48, 1, "hardswish"),
        conv_act(nn, 48, 48, 3, "hardswish", padding=1, groups=48),
        nn.Conv2d(48, 16, 1))), 3),
    # openwakeword's: leaky_relu then a floor, on oneDNN's blocked layout
    # and in kiln's direct kernel; a leaky_relu alone.
    "leaky_floor_blocked": ((1, 24, 20, 8), lambda nn: leaky_floor(nn, 24, 48, -0.4), 1),
    "leaky_floor_direct": ((1, 1, 19, 8), lambda nn: leaky_floor(nn, 1, 12, -0.1), 1),
    "leaky_no_floor": ((1, 24, 12, 8), lambda nn: leaky_floor(nn, 24, 32), 1),
    # A residual that broadcasts stays an add (then relu): only the
    # conv stays unfused, nothing else changes.
    "broadcast_residual_stays": ((1, 8, 10, 10), lambda nn: residual(
        nn, nn.Conv2d(8, 8, 3, padding=1), "relu", broadcast=True), 0),
}


def _models(case):
    shape, build, _ = CASES[case]
    torch.manual_seed(0)
    tm = build(torch.nn).eval()
    km = build(knn)
    km.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    km.eval()
    # Values around hardswish's and hardsigmoid's bends (-3 and 3).
    x = (3 * np.random.default_rng(1).standard_normal(shape)).astype(np.float32)
    return tm, km, x


def _torch_out(tm, x):
    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


def _fused(module):
    return [node for node in module.graph.nodes if node.op == "conv2d_fused"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_frozen_trace_fuses_within_tolerance(case):
    tm, km, x = _models(case)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        frozen = kiln.jit.trace(km, kx, frozen=True)
        got = frozen(kx).numpy()
    assert len(_fused(frozen)) == CASES[case][2], frozen.graph
    if CASES[case][2]:
        assert "conv2d_fused: activations and residual adds run in the convolution's epilogue" \
            in str(frozen.report())
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _torch_out(tm, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["resnet_relu_residual", "mobilenet_inverted_residual",
                                  "hardswish_odd_channels"])
def test_exact_and_not_frozen_traces_keep_the_ops_apart(case):
    _, km, x = _models(case)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        exact = kiln.jit.trace(km, kx, frozen=True, exact=True)
        traced = kiln.jit.trace(km, kx)
        np.testing.assert_array_equal(exact(kx).numpy(), eager)
    assert not _fused(exact) and not _fused(traced)


def test_broadcast_residual_keeps_its_add():
    _, km, x = _models("broadcast_residual_stays")
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True)
    ops = [node.op for node in frozen.graph.nodes]
    assert "conv2d" in ops and "conv2d_fused" not in ops, frozen.graph


def test_residual_is_the_fused_ops_fourth_input():
    _, km, x = _models("resnet_relu_residual")
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True)
    (node,) = _fused(frozen)
    assert len(node.inputs) == 4 and node.attrs["activation"] == "relu"


def _onnx_path(tm, x, tmp_path, name):
    buffer = io.BytesIO()
    torch.onnx.export(tm, (torch.from_numpy(x),), buffer, opset_version=17, dynamo=False)
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(buffer.getvalue())
    return path


@pytest.mark.parametrize("case", ["resnet_relu_residual", "mobilenet_inverted_residual",
                                  "hardsigmoid_one_by_one_image", "relu6_depthwise_stride2",
                                  "leaky_floor_blocked", "leaky_no_floor"])
def test_onnx_import_fuses_and_matches_onnxruntime(case, tmp_path):
    tm, _, x = _models(case)
    path = _onnx_path(tm, x, tmp_path, case)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    model = kiln.onnx.load(path)
    assert len(_fused(model)) == CASES[case][2], model.graph
    np.testing.assert_allclose(model(kiln.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    exact = kiln.onnx.load(path, exact=True)
    assert not _fused(exact)


@pytest.mark.parametrize("case", ["mobilenet_inverted_residual", "silu_stride_over_kernel",
                                  "hardsigmoid_one_by_one_image", "leaky_floor_direct",
                                  "leaky_no_floor"])
def test_onnx_export_unfuses(case, tmp_path):
    tm, km, x = _models(case)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kx, frozen=True)
    assert _fused(frozen)
    path = tmp_path / f"{case}.onnx"
    kiln.onnx.export(frozen, None, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, _torch_out(tm, x), rtol=1e-4, atol=1e-5)


def test_fused_op_has_no_gradient():
    x = kiln.randn(1, 2, 5, 5, requires_grad=True)
    w = kiln.randn(3, 2, 3, 3)
    y = kiln._C.dispatch("conv2d_fused", [x, w, None, None],
                         {"activation": "relu", "padding": [1, 1]})
    with pytest.raises(RuntimeError, match="the derivative for 'conv2d_fused' is not implemented"):
        y.sum().backward()


@pytest.mark.parametrize("case", ["resnet_relu_residual", "mobilenet_inverted_residual"])
def test_symbolic_batch_fuses_and_runs_at_other_sizes(case):
    tm, km, x = _models(case)
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True,
                                dynamic_shapes=[{0: "batch"}])
        assert "batch" in str(frozen.graph)
        assert len(_fused(frozen)) == CASES[case][2], frozen.graph
        for batch in (1, 3):
            xb = np.concatenate([x] * batch) + np.float32(0.5) * np.arange(batch, dtype=np.float32)[
                :, None, None, None]
            np.testing.assert_allclose(frozen(kiln.tensor(xb)).numpy(), _torch_out(tm, xb),
                                       rtol=1e-4, atol=1e-5)
