"""Convolution networks compiled for inference (issue 25): batch norm folded
into the convolution or linear before it in frozen traces and ONNX imports
(reported, and off with exact=True), the depthwise kernel and oneDNN's
blocked layouts. Each against PyTorch or ONNX Runtime, and compiled against
eager, on odd shapes: odd channel counts, 1x1 images, strides larger than
the kernel."""
import io

import numpy as np
import pytest

import kiln
import kiln.jit
import kiln.nn as knn

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


def _conv_bn(nn, c_in, c_out, kernel, stride, padding, groups=1, act=None):
    layers = [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, groups=groups,
                        bias=False),
              nn.BatchNorm2d(c_out)]
    if act is not None:
        layers.append(act(nn))
    return layers


# (input shape, layers): odd channels, a 1x1 image, stride > kernel, a
# depthwise layer (groups == channels), a linear + BatchNorm1d head.
CASES = {
    "odd_channels": ((2, 3, 9, 11), lambda nn: _conv_bn(nn, 3, 7, 3, 1, 1, act=lambda n: n.ReLU())
                     + _conv_bn(nn, 7, 5, 1, 1, 0)),
    "one_by_one_image": ((1, 5, 1, 1), lambda nn: _conv_bn(nn, 5, 9, 3, 1, 1,
                                                           act=lambda n: n.Hardswish())),
    "stride_over_kernel": ((1, 4, 13, 13), lambda nn: _conv_bn(nn, 4, 6, 2, 3, 0,
                                                               act=lambda n: n.Sigmoid())),
    "depthwise": ((1, 9, 15, 15), lambda nn: _conv_bn(nn, 9, 9, 5, 2, 2, groups=9,
                                                      act=lambda n: n.ReLU6())
                  + _conv_bn(nn, 9, 9, 3, 1, 1, groups=9)),
    "blocked_layout": ((1, 8, 12, 12), lambda nn: _conv_bn(nn, 8, 16, 3, 1, 1,
                                                           act=lambda n: n.ReLU())),
    "linear_head": ((3, 6, 4, 4), lambda nn: _conv_bn(nn, 6, 4, 3, 1, 0)
                    + [nn.Flatten(), nn.Linear(16, 5), nn.BatchNorm1d(5)]),
}


def _models(case):
    shape, layers = CASES[case]
    torch.manual_seed(0)
    tm = torch.nn.Sequential(*layers(torch.nn))
    with torch.no_grad():  # statistics and affine parameters far from 0 and 1
        for m in tm.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.3)
                m.running_mean.normal_(0, 0.5)
                m.running_var.uniform_(0.3, 2.0)
    tm.eval()
    km = knn.Sequential(*layers(knn))
    km.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    km.eval()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return tm, km, x


def _torch_out(tm, x):
    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


def _num_batch_norms(traced):
    return sum(node.op == "batch_norm" for node in traced.graph.nodes)


@pytest.mark.parametrize("case", sorted(CASES))
def test_frozen_trace_folds_batch_norm_within_tolerance(case):
    tm, km, x = _models(case)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        frozen = kiln.jit.trace(km, kx, frozen=True)
        got = frozen(kx).numpy()
    assert _num_batch_norms(frozen) == 0, frozen.graph
    report = str(frozen.report())
    assert "fold batch_norm into" in report
    assert "rounding may differ from eager" in report
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, _torch_out(tm, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_frozen_trace_keeps_eager_bits(case):
    _, km, x = _models(case)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        exact = kiln.jit.trace(km, kx, frozen=True, exact=True)
        got = exact(kx).numpy()
    assert _num_batch_norms(exact) > 0
    assert "fold batch_norm" not in str(exact.report())
    np.testing.assert_array_equal(got, eager)


def test_fold_report_names_the_weights():
    _, km, x = _models("odd_channels")
    with kiln.no_grad():
        report = str(kiln.jit.trace(km, kiln.tensor(x), frozen=True).report())
    assert "batch_norm (weight '1.weight') folded into conv2d (weight '0.weight')" in report


def test_not_frozen_trace_keeps_batch_norm():
    _, km, x = _models("odd_channels")
    with kiln.no_grad():
        traced = kiln.jit.trace(km, kiln.tensor(x))
    assert _num_batch_norms(traced) == 2


def _onnx_bytes(tm, x):
    buffer = io.BytesIO()
    # No constant folding: the file keeps its BatchNormalization nodes, as
    # many exporters write them.
    torch.onnx.export(tm, (torch.from_numpy(x),), buffer, opset_version=17,
                      do_constant_folding=False, dynamo=False)
    return buffer.getvalue()


@pytest.mark.parametrize("case", ["odd_channels", "depthwise", "one_by_one_image"])
def test_onnx_import_folds_batch_norm(case, tmp_path):
    tm, _, x = _models(case)
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(_onnx_bytes(tm, x))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    folded = kiln.onnx.load(path)
    assert _num_batch_norms(folded) == 0, folded.graph
    assert "fold batch_norm into conv2d" in str(folded.report())
    np.testing.assert_allclose(folded(kiln.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    exact = kiln.onnx.load(path, exact=True)
    assert _num_batch_norms(exact) > 0
    np.testing.assert_allclose(exact(kiln.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)


# Convolutions on the kernels chosen by geometry (the depthwise kernel;
# oneDNN's blocked layouts for spatial kernels over >= 64 output pixels;
# NCHW below): eager against PyTorch, compiled (weights packed once)
# against eager to the bit.
CONVS = [
    # (x shape, out channels, kernel, stride, padding, groups)
    ((1, 13, 14, 14), 13, 5, 1, 2, 13),    # depthwise 5x5
    ((2, 7, 9, 10), 7, 3, 2, 1, 7),        # depthwise, odd sizes, stride 2
    ((1, 5, 1, 1), 5, 3, 1, 1, 5),         # depthwise on a 1x1 image
    ((1, 3, 17, 17), 11, 4, 5, 0, 1),      # stride > kernel, 4x4 pixels: NCHW
    ((1, 6, 20, 20), 9, 3, 1, 1, 1),       # 400 pixels: blocked
    ((1, 6, 7, 7), 9, 3, 1, 1, 1),         # 49 pixels: NCHW
    ((2, 3, 30, 30), 5, 7, 2, 3, 1),       # the 7x7 stem shape, shrunk
]


@pytest.mark.parametrize("shape,out,kernel,stride,padding,groups", CONVS)
def test_conv_kernels_match_torch_and_compiled_matches_eager(shape, out, kernel, stride,
                                                             padding, groups):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out, shape[1] // groups, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                      torch.from_numpy(b), stride, padding, 1, groups).numpy()
    conv = knn.Conv2d(shape[1], out, kernel, stride=stride, padding=padding, groups=groups)
    conv.load_state_dict({"weight": w, "bias": b})
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = conv(kx).numpy()
        traced = kiln.jit.trace(conv, kx)
        compiled = [traced(kx).numpy() for _ in range(2)]  # packs, then reuses
    np.testing.assert_allclose(eager, want, rtol=1e-4, atol=1e-4)
    for got in compiled:
        np.testing.assert_array_equal(got, eager)
