"""Convolutions down a column ([N, C, H, 1] images, kernels one tap wide:
1-D convolutions written as 2-D, as exported byte and audio CNNs hold them)
run as the same convolution along a row (kernels/cpu/conv.cpp). Checked
against PyTorch eagerly, in frozen traces (where the conv fuses with its
epilogue) and through ONNX import, with strides, dilation, padding along H,
groups and depthwise layers, and a residual."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

CASES = [  # (C, OC, H, kernel, stride, padding, dilation, groups)
    (8, 16, 40, 5, 1, 0, 1, 1),
    (8, 16, 41, 3, 2, 1, 1, 1),
    (6, 12, 33, 3, 1, 2, 2, 3),
    (16, 16, 30, 3, 1, 1, 1, 16),
    (256, 64, 70, 5, 1, 0, 1, 1),
]


@pytest.mark.parametrize("c, oc, h, k, stride, padding, dilation, groups", CASES)
def test_column_conv_matches_torch(c, oc, h, k, stride, padding, dilation, groups):
    rng = np.random.default_rng(c * h + k)
    x = rng.standard_normal((2, c, h, 1)).astype(np.float32)
    w = (rng.standard_normal((oc, c // groups, k, 1)) * 0.2).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    args = dict(stride=(stride, 1), padding=(padding, 0), dilation=(dilation, 1), groups=groups)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                      torch.from_numpy(b), **args).numpy()
    got = F.conv2d(kiln.from_numpy(x), kiln.from_numpy(w), kiln.from_numpy(b), **args).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


class ColumnBlock(nn.Module):
    """conv -> relu -> conv + identity -> relu, down a column."""

    def __init__(self, channels):
        super().__init__()
        self.a = nn.Conv2d(channels, channels, (3, 1), padding=(1, 0))
        self.b = nn.Conv2d(channels, channels, (5, 1), padding=(2, 0))

    def forward(self, x):
        return F.relu(self.b(F.relu(self.a(x))) + x)


def test_column_block_fused_in_a_frozen_trace():
    kiln.manual_seed(3)
    block = ColumnBlock(12).eval()
    x = kiln.randn(2, 12, 37, 1)
    with kiln.no_grad():
        want = block(x).numpy()
        traced = kiln.jit.trace(block, x, frozen=True)
        assert "conv2d_fused" in str(traced.graph)
        got = traced(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
