"""nn.Conv3d, nn.ConvTranspose3d, nn.MaxPool3d, nn.AvgPool3d and their
functional forms against torch: values and gradients, float64 and float32,
batched and unbatched; and F.max_pool2d's indices."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F


def pair_of_layers(kiln_layer, torch_layer):
    if list(torch_layer.state_dict()):
        kiln_layer.load_state_dict({k: v.detach().numpy()
                                    for k, v in torch_layer.state_dict().items()})
    return kiln_layer, torch_layer


def check_layer(layer, want_layer, shape, dtype=np.float64, rtol=1e-10, atol=1e-12):
    """Same output, and the same gradients for the input and the parameters."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    tx, kx = torch.tensor(x, requires_grad=True), kiln.tensor(x, requires_grad=True)
    want, got = want_layer(tx), layer(kx)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    want.pow(2).sum().backward()
    got.pow(2).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    for name, p in want_layer.named_parameters():
        np.testing.assert_allclose(getattr(layer, name).grad.numpy(), p.grad.numpy(),
                                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("kwargs", [
    {},
    {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1), "groups": 2},
    {"padding": "same", "dilation": (1, 2, 1)},
    {"padding": "valid", "bias": False},
])
@pytest.mark.parametrize("shape", [(2, 4, 6, 7, 5), (4, 5, 6, 5)])
def test_conv3d_matches_torch(kwargs, shape):
    torch.manual_seed(0)
    layer, want_layer = pair_of_layers(
        nn.Conv3d(4, 6, (3, 2, 3), dtype=kiln.float64, **kwargs),
        torch.nn.Conv3d(4, 6, (3, 2, 3), dtype=torch.float64, **kwargs))
    assert repr(layer) == repr(want_layer)
    check_layer(layer, want_layer, shape)


def test_conv3d_float32_goes_through_onednn_and_matches_torch():
    torch.manual_seed(1)
    layer, want_layer = pair_of_layers(nn.Conv3d(3, 8, 3, stride=2, padding=1),
                                       torch.nn.Conv3d(3, 8, 3, stride=2, padding=1))
    check_layer(layer, want_layer, (2, 3, 9, 10, 8), np.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs", [
    {},
    {"stride": (2, 1, 2), "padding": (1, 0, 1), "output_padding": (1, 0, 1), "groups": 2},
    {"stride": 1, "output_padding": (1, 0, 1), "dilation": (2, 1, 2), "bias": False},
])
@pytest.mark.parametrize("shape", [(2, 4, 3, 4, 3), (4, 3, 3, 4)])
def test_conv_transpose3d_matches_torch(kwargs, shape):
    torch.manual_seed(0)
    layer, want_layer = pair_of_layers(
        nn.ConvTranspose3d(4, 6, (2, 3, 2), dtype=kiln.float64, **kwargs),
        torch.nn.ConvTranspose3d(4, 6, (2, 3, 2), dtype=torch.float64, **kwargs))
    assert repr(layer) == repr(want_layer)
    check_layer(layer, want_layer, shape)


def test_conv_transpose3d_output_size():
    torch.manual_seed(0)
    layer, want_layer = pair_of_layers(
        nn.ConvTranspose3d(2, 3, 3, stride=2, dtype=kiln.float64),
        torch.nn.ConvTranspose3d(2, 3, 3, stride=2, dtype=torch.float64))
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4, 3))
    want = want_layer(torch.tensor(x), output_size=(8, 10, 7))
    got = layer(kiln.tensor(x), output_size=(8, 10, 7))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 2},
    {"kernel_size": (3, 2, 3), "stride": (2, 1, 2), "padding": (1, 1, 0), "dilation": (1, 2, 1),
     "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1},
])
@pytest.mark.parametrize("shape", [(2, 3, 6, 7, 5), (3, 5, 7, 6)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_pool3d_matches_torch(kwargs, shape, dtype):
    check_layer(nn.MaxPool3d(**kwargs), torch.nn.MaxPool3d(**kwargs), shape, dtype, 1e-6, 1e-6)


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 2},
    {"kernel_size": (3, 3, 2), "stride": (2, 2, 1), "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 3, 2), "stride": (2, 2, 1), "padding": 1, "ceil_mode": True,
     "count_include_pad": False},
])
@pytest.mark.parametrize("shape", [(2, 3, 6, 7, 5), (3, 5, 7, 6)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_avg_pool3d_matches_torch(kwargs, shape, dtype):
    check_layer(nn.AvgPool3d(**kwargs), torch.nn.AvgPool3d(**kwargs), shape, dtype, 1e-6, 1e-6)


def test_functional_forms_match_torch():
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 6, 7))
    w = np.random.default_rng(3).standard_normal((2, 3, 2, 2, 2))
    kx, tx = kiln.tensor(x), torch.tensor(x)
    pairs = [
        (F.conv_transpose3d(kx, kiln.tensor(w), stride=2),
         torch.nn.functional.conv_transpose3d(tx, torch.tensor(w), stride=2)),
        (F.max_pool3d(kx, 2, 1, 1), torch.nn.functional.max_pool3d(tx, 2, 1, 1)),
        (F.avg_pool3d(kx, 3, 2, 1, True, False),
         torch.nn.functional.avg_pool3d(tx, 3, 2, 1, True, False)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_refusals_name_the_op_and_shapes():
    with pytest.raises(RuntimeError, match="conv3d: expected 4-D .unbatched. or 5-D"):
        F.conv3d(kiln.randn(2, 3, 4), kiln.randn(2, 2, 1, 1, 1))
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
        F.max_pool3d(kiln.randn(1, 1, 4, 4, 4), 2, padding=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv3d(kiln.randn(1, 1, 4, 4, 4), kiln.randn(1, 1, 3, 3, 3), stride=2, padding="same")


@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 5, 5)])
def test_max_pool2d_return_indices_matches_torch(shape):
    x = np.round(np.random.default_rng(4).standard_normal(shape) * 2)  # ties
    kx, tx = kiln.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    values, indices = F.max_pool2d(kx, (3, 2), (2, 1), 1, (1, 2), True, return_indices=True)
    want_values, want_indices = torch.nn.functional.max_pool2d(tx, (3, 2), (2, 1), 1, (1, 2),
                                                               True, return_indices=True)
    np.testing.assert_array_equal(values.detach().numpy(), want_values.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    values.sum().backward()
    want_values.sum().backward()
    np.testing.assert_array_equal(kx.grad.numpy(), tx.grad.numpy())


def test_max_pool2d_layer_returns_indices_as_torch():
    x = np.random.default_rng(6).standard_normal((2, 3, 8, 7))
    values, indices = nn.MaxPool2d(3, 2, 1, return_indices=True)(kiln.tensor(x))
    want_values, want_indices = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
