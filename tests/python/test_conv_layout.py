"""Convolution chains carried in channels-last layout (issue 25,
jit/passes/carry_conv_layout.cpp): in a frozen trace, consecutive
convolutions of a ResNet (their fused relus and residual adds included)
become conv2d_fused {layout="nhwc"} reading each other's NHWC outputs, with
Winograd's kernels on the 3x3 stride-1 ones and the max pool between them
channels-last too; results stay within float32
tolerance of PyTorch; exact=True keeps NCHW and eager's bits; ONNX export
writes a chained graph as plain NCHW ops."""

import numpy as np
import pytest

import kiln
import kiln.jit

torch = pytest.importorskip("torch")
from nn_torch_helpers import eval_pair, onnx_runtime_output  # noqa: E402 (after the torch check)

pytest.importorskip("onnxruntime")


def resnet(nn, width=32):
    """A small ResNet: stem (3x3 stride 2) + batch norm + relu, max pool,
    a block of `width` channels, a downsampling block of 2 * width, global
    average pool, linear head."""
    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.relu = nn.ReLU()
            self.down = None
            if stride != 1 or c_in != c_out:
                self.down = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(c_out))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1),
                                      nn.BatchNorm2d(width), nn.ReLU())
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
            self.blocks = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2))
            self.head = nn.Linear(2 * width, 10)

        def forward(self, x):
            y = self.blocks(self.pool(self.stem(x)))
            return self.head(torch_like_flatten(y))

    def torch_like_flatten(y):
        return y.mean((2, 3))
    return Net()


def _models(width=32, shape=(1, 3, 32, 32)):
    tm, km = eval_pair(resnet, width)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return tm, km, x


def _chained(module):
    return [node for node in module.graph.nodes
            if node.op == "conv2d_fused" and node.attrs["layout"] == "nhwc"]


@pytest.mark.parametrize("width,batch", [(32, 1), (32, 2), (24, 1)])
def test_frozen_resnet_runs_one_chain_within_tolerance(width, batch):
    # 32 channels: Winograd on the 3x3 stride-1 layers; 24: oneDNN's direct
    # channels-last kernels only.
    tm, km, x = _models(width, (batch, 3, 32, 32))
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        frozen = kiln.jit.trace(km, kx, frozen=True)
        got = frozen(kx).numpy()
    # The stem, four 3x3 layers and the downsampling 1x1 (which joins the
    # chain its input is in): all channels-last, the max pool too.
    assert len(_chained(frozen)) == 6, frozen.graph
    assert "max_pool2d_nhwc" in [node.op for node in frozen.graph.nodes]
    assert "carry_conv_layout" in str(frozen.report())
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5)


def test_exact_keeps_nchw_and_eagers_bits():
    _, km, x = _models()
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        exact = kiln.jit.trace(km, kx, frozen=True, exact=True)
        np.testing.assert_array_equal(exact(kx).numpy(), eager)
    assert not _chained(exact)
    assert "permute" not in [node.op for node in exact.graph.nodes]


def test_max_pool_joins_and_the_mean_reads_a_copy_in_nchw():
    # The max pool after the stem pools channels-last; the mean at the end
    # reads a clone of the chain's NCHW view.
    _, km, x = _models()
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True)
    ops = [node.op for node in frozen.graph.nodes]
    assert "max_pool2d_nhwc" in ops and "max_pool2d" not in ops, frozen.graph
    assert ops.count("clone") == 1 and ops.index("clone") == ops.index("mean") - 1, frozen.graph


def test_onnx_export_of_a_chained_trace_matches_torch():
    tm, km, x = _models()
    kx = kiln.tensor(x)
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kx, frozen=True)
    assert _chained(frozen)
    got = onnx_runtime_output(frozen, kx, x)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
