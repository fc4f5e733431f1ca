"""PyTorch's activation modules and parameter containers on kiln (issue 23):
outputs and float64 gradients equal torch's, eager == traced, inplace=True
writes into its input as in PyTorch, reprs match, and containers register
what they hold."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F

ACTIVATIONS = [
    ("SiLU", {}), ("Mish", {}), ("Hardsigmoid", {}), ("Hardswish", {}), ("ReLU6", {}),
    ("Hardtanh", {}), ("Hardtanh", {"min_val": -2.0, "max_val": 0.5}), ("ELU", {}),
    ("ELU", {"alpha": 0.3}), ("Softplus", {}), ("Softplus", {"beta": 2.0, "threshold": 3.0}),
    ("ReLU", {}), ("LeakyReLU", {"negative_slope": 0.2}),
]


def values(dtype=np.float64):
    # Spread across every piece of the piecewise ones, off their corners.
    return np.linspace(-7.3, 7.1, 41).astype(dtype).reshape(41, 1) * np.array([[1.0, 0.37]])


@pytest.mark.parametrize("name, kwargs", ACTIVATIONS)
def test_activation_matches_torch_forward_and_gradient(name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    x = values()
    kx = kiln.tensor(x, dtype=kiln.float64, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    ky, ty = ours(kx), theirs(tx)
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    seed = np.cos(np.arange(x.size)).reshape(x.shape)
    (ky * kiln.tensor(seed, dtype=kiln.float64)).sum().backward()
    (ty * torch.tensor(seed)).sum().backward()
    # torch's float64 hardsigmoid backward multiplies by a float32 1/6.
    rtol = 1e-7 if name == "Hardsigmoid" else 1e-12
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=1e-15)


@pytest.mark.parametrize("name, kwargs", ACTIVATIONS)
def test_activation_float32_bits_and_traced(name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    x = values(np.float32)
    got = ours(kiln.tensor(x)).numpy()
    np.testing.assert_allclose(got, theirs(torch.tensor(x)).numpy(), rtol=2e-6, atol=1e-7)
    traced = kiln.jit.trace(ours, kiln.tensor(x))
    assert traced(kiln.tensor(x)).numpy().tobytes() == got.tobytes()


@pytest.mark.parametrize("name, kwargs", [(n, k) for n, k in ACTIVATIONS if n != "Softplus"])
def test_inplace_writes_into_its_input_as_torch(name, kwargs):
    x = values()
    kx = kiln.tensor(x, dtype=kiln.float64, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    ky, ty = kx * 1.5, tx * 1.5
    kout = getattr(nn, name)(**kwargs, inplace=True)(ky)
    tout = getattr(torch.nn, name)(**kwargs, inplace=True)(ty)
    assert kout is ky
    np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    ky.sum().backward()
    tout.sum().backward()
    rtol = 1e-7 if name == "Hardsigmoid" else 1e-12
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=1e-15)
    assert "inplace=True" in repr(getattr(nn, name)(**kwargs, inplace=True))


def test_functional_forms_and_bad_bounds():
    x = kiln.tensor(values(np.float32))
    np.testing.assert_allclose(F.silu(x).numpy(),
                               torch.nn.functional.silu(torch.tensor(x.numpy())).numpy(),
                               rtol=2e-6)
    with pytest.raises(ValueError, match="min_val .* cannot be greater than max_val"):
        F.hardtanh(x, 1.0, -1.0)


def test_module_dict_and_parameter_containers_register_their_entries():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 1)})
            self.scales = nn.ParameterList([kiln.ones(2), nn.Parameter(kiln.zeros(1))])
            self.extra = nn.ParameterDict({"bias": kiln.zeros(3)})

        def forward(self, x):
            x = x + self.extra["bias"]
            return self.heads["a"](x) * self.scales[0], self.heads["b"](x) + self.scales[1]

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2),
                                              "b": torch.nn.Linear(3, 1)})
            self.scales = torch.nn.ParameterList([torch.ones(2), torch.zeros(1)])
            self.extra = torch.nn.ParameterDict({"bias": torch.zeros(3)})

    ours, theirs = Net(), TorchNet()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 7
    assert isinstance(ours.scales[0], nn.Parameter) and ours.scales[0].requires_grad
    assert list(ours.heads.keys()) == ["a", "b"] and "a" in ours.heads and len(ours.heads) == 2
    ours.heads["c"] = nn.Linear(3, 3)
    assert "heads.c.weight" in ours.state_dict()
    del ours.heads["c"]
    a, b = ours(kiln.ones(4, 3))
    (a.sum() + b.sum()).backward()
    assert ours.extra["bias"].grad is not None and ours.scales[1].grad is not None
    traced = kiln.jit.trace(ours, kiln.ones(4, 3))
    np.testing.assert_array_equal(traced(kiln.ones(4, 3))[0].detach().numpy(),
                                  a.detach().numpy())
    with pytest.raises(TypeError, match="cannot assign 'str' as a parameter"):
        ours.scales.append("nope")
