"""Channels-last chains through MobileNet's blocks (issue 25,
jit/passes/carry_conv_layout.cpp): in a frozen trace the 1x1 expansion
starts a chain, the depthwise convolution joins it (oneDNN's channels-last
kernel), squeeze-excitation's global average pool becomes a mean over the
NHWC twin, its channel scale a mul on the twin, and the projection (with
its residual) reads the product; the FCs on 1x1 images run as
matrix-vector products. Results stay within float32 tolerance of PyTorch
for odd sizes, odd channel counts, batch 2, 1x1 images, a symbolic batch
and chain values read outside the chain (returned, twice); exact=True keeps
NCHW. Also the NCHW <-> NHWC copies at a chain's edges
(kernels/cpu/transpose_f32.cpp) against NumPy."""

import numpy as np
import pytest

import kiln
import kiln.jit
import kiln.nn as knn

torch = pytest.importorskip("torch")
from nn_torch_helpers import eval_pair, onnx_runtime_output  # noqa: E402 (after the torch check)


def mobilenet(nn, stem=16, expand=48, out=24):
    """Stem, an inverted residual block with a 5x5 stride-2 depthwise layer
    and squeeze-excitation, one with a 3x3 stride-1 depthwise layer, SE and
    a residual, a 1x1 head, global pool, linear."""
    def conv_bn(cin, cout, k, stride=1, groups=1, act=None):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)

    class SE(nn.Module):
        def __init__(self, c, squeeze):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(c, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, c, 1)
            self.relu = nn.ReLU()
            self.gate = nn.Hardsigmoid()

        def forward(self, x):
            return self.gate(self.fc2(self.relu(self.fc1(self.pool(x))))) * x

    class Block(nn.Module):
        def __init__(self, cin, mid, cout, k, stride, act):
            super().__init__()
            self.residual = stride == 1 and cin == cout
            self.body = nn.Sequential(conv_bn(cin, mid, 1, act=act),
                                      conv_bn(mid, mid, k, stride, groups=mid, act=act),
                                      SE(mid, max(8, mid // 4)), conv_bn(mid, cout, 1))

        def forward(self, x):
            y = self.body(x)
            return y + x if self.residual else y

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                conv_bn(3, stem, 3, 2, act=nn.Hardswish),
                Block(stem, expand, out, 5, 2, nn.Hardswish),
                Block(out, 3 * out, out, 3, 1, nn.ReLU),
                conv_bn(out, 4 * out, 1, act=nn.Hardswish))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Linear(4 * out, 10)

        def forward(self, x):
            return self.head(self.pool(self.features(x)).flatten(1))
    return Net()


def _models(shape, **widths):
    tm, km = eval_pair(lambda nn: mobilenet(nn, **widths))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return tm, km, x


def _run(shape, **widths):
    tm, km, x = _models(shape, **widths)
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        frozen = kiln.jit.trace(km, kx, frozen=True)
        got = frozen(kx).numpy()
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5)
    return frozen


def _nodes(frozen, op, layout=None):
    return [n for n in frozen.graph.nodes
            if n.op == op and (layout is None or n.attrs["layout"] == layout)]


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (2, 3, 33, 29), (1, 3, 19, 19)])
def test_blocks_run_channels_last_within_tolerance(shape):
    frozen = _run(shape)
    depthwise = [n for n in _nodes(frozen, "conv2d_fused", "nhwc") if n.attrs["groups"] > 1]
    assert len(depthwise) == 2, frozen.graph
    # Two SE pools and the head's: means over the NHWC twin; the SE scales
    # multiply the twin.
    assert not _nodes(frozen, "adaptive_avg_pool2d"), frozen.graph
    assert len(_nodes(frozen, "mean")) == 3, frozen.graph
    assert "channel scale in a channels-last chain" in str(frozen.report())


def test_odd_channel_counts_fall_back_where_they_must():
    # 13 and 11 channels: the stem and the 11-channel projections take
    # kiln's direct NCHW kernel; the rest chains; same results either way.
    frozen = _run((1, 3, 21, 21), stem=13, expand=39, out=11)
    assert _nodes(frozen, "conv2d_fused", "nhwc"), frozen.graph
    assert _nodes(frozen, "conv2d_fused", "nchw"), frozen.graph


@pytest.mark.parametrize("shape", [(1, 3, 2, 2), (2, 3, 3, 3)])
def test_one_pixel_images(shape):
    # The stem leaves a 1x1 image: every depthwise layer sees one pixel.
    _run(shape)


def test_exact_keeps_nchw_and_eagers_bits():
    _, km, x = _models((1, 3, 32, 32))
    kx = kiln.tensor(x)
    with kiln.no_grad():
        eager = km(kx).numpy()
        exact = kiln.jit.trace(km, kx, frozen=True, exact=True)
        np.testing.assert_array_equal(exact(kx).numpy(), eager)
    assert not _nodes(exact, "conv2d_fused", "nhwc")
    assert "permute" not in [node.op for node in exact.graph.nodes]


@pytest.mark.parametrize("shape", [(1, 16, 112, 112), (2, 3, 9, 7), (1, 72, 5, 3),
                                   (3, 8, 8, 8), (1, 1, 4, 4), (2, 576, 1, 1), (1, 20, 1, 13)])
def test_nchw_nhwc_copies_match_numpy(shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    kx = kiln.tensor(x)
    nhwc = kx.permute(0, 2, 3, 1).contiguous()
    np.testing.assert_array_equal(nhwc.numpy(), x.transpose(0, 2, 3, 1))
    back = nhwc.permute(0, 3, 1, 2).contiguous()
    np.testing.assert_array_equal(back.numpy(), x)
    # Every other image of a batch (a batch stride that is not the image's
    # size) takes the general copy: the same elements.
    wide = kiln.tensor(np.concatenate([x, x + 1]))
    np.testing.assert_array_equal(wide[::2].permute(0, 2, 3, 1).contiguous().numpy(),
                                  np.concatenate([x, x + 1])[::2].transpose(0, 2, 3, 1))


def test_onnx_export_of_a_chained_trace_matches_torch():
    pytest.importorskip("onnxruntime")
    tm, km, x = _models((1, 3, 32, 32))
    kx = kiln.tensor(x)
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kx, frozen=True)
    assert _nodes(frozen, "mean")
    got = onnx_runtime_output(frozen, kx, x)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_symbolic_batch_runs_every_size():
    # Traced at batch 1 with the batch symbolic: each size gets its own
    # plan (the FCs' matrix-vector path at batch 1 only), same results.
    tm, km, x = _models((1, 3, 32, 32))
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True, dynamic_shapes=[{0: "batch"}])
        assert _nodes(frozen, "mean"), frozen.graph
        for batch in [3, 1, 2]:
            xb = np.random.default_rng(batch).standard_normal((batch, 3, 32, 32))
            xb = xb.astype(np.float32)
            got = frozen(kiln.tensor(xb)).numpy()
            with torch.no_grad():
                want = tm(torch.from_numpy(xb)).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _se_block(nn, scale_rank):
    """A depthwise layer's output read by its SE scale (as [N, C, 1, 1] or
    [C, 1, 1]), returned itself, and returned twice through the scaled
    product: values of the chain read outside it."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = nn.Conv2d(8, 32, 1)
            self.depthwise = nn.Conv2d(32, 32, 3, (2, 1), 1, groups=32)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Conv2d(32, 32, 1)
            self.project = nn.Conv2d(32, 8, 1)

        def forward(self, x):
            z = self.depthwise(self.expand(x).relu())
            s = self.fc(self.pool(z)).sigmoid()
            if scale_rank == 3:
                s = s.reshape(32, 1, 1)
            t = z * s
            return self.project(t), z, t, t
    return Block()


# A [C, 1, 1] scale is one image's: batch 1 only.
@pytest.mark.parametrize("scale_rank,shape", [(4, (1, 8, 14, 14)), (4, (2, 8, 9, 7)),
                                              (3, (1, 8, 14, 14))])
def test_chain_values_read_outside_the_chain(scale_rank, shape):
    torch.manual_seed(0)
    tm = _se_block(torch.nn, scale_rank).eval()
    km = _se_block(knn, scale_rank)
    km.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    km.eval()
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    with kiln.no_grad():
        frozen = kiln.jit.trace(km, kiln.tensor(x), frozen=True)
        got = frozen(kiln.tensor(x))
    with torch.no_grad():
        want = tm(torch.from_numpy(x))
    assert _nodes(frozen, "conv2d_fused", "nhwc"), frozen.graph
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
