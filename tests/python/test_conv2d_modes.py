"""nn.Conv2d's padding modes and padding strings against torch."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (2, 1), "same", "valid"])
def test_conv2d_padding_matches_torch(padding_mode, padding):
    torch.manual_seed(0)
    want_layer = torch.nn.Conv2d(3, 4, (3, 2), padding=padding, padding_mode=padding_mode,
                                 dilation=(1, 2), dtype=torch.float64)
    layer = nn.Conv2d(3, 4, (3, 2), padding=padding, padding_mode=padding_mode,
                      dilation=(1, 2), dtype=kiln.float64)
    layer.load_state_dict({k: v.detach().numpy() for k, v in want_layer.state_dict().items()})
    assert repr(layer) == repr(want_layer)
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 7))
    tx, kx = torch.tensor(x, requires_grad=True), kiln.tensor(x, requires_grad=True)
    want, got = want_layer(tx), layer(kx)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    want.pow(2).sum().backward()
    got.pow(2).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.weight.grad.numpy(), want_layer.weight.grad.numpy(),
                               rtol=1e-10, atol=1e-12)


def test_conv2d_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
