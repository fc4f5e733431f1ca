"""kiln.nn.functional against torch.nn.functional in PyTorch's argument forms
(ints or pairs, defaults, keywords), forward and input gradient; and the
Module attribute bookkeeping the fast forward path relies on."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _both(array):
    return kiln.tensor(array).requires_grad_(), torch.tensor(array, requires_grad=True)


def _check(kiln_out, torch_out, kiln_inputs, torch_inputs, atol=1e-5):
    np.testing.assert_allclose(kiln_out.detach().numpy(), torch_out.detach().numpy(),
                               rtol=1e-4, atol=atol)
    w = _x(*torch_out.shape, seed=7)
    (kiln_out * kiln.tensor(w)).sum().backward()
    (torch_out * torch.tensor(w)).sum().backward()
    for k, t in zip(kiln_inputs, torch_inputs):
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=atol)


# (name, call as the same code for both libraries, input shapes)
CASES = [
    ("linear with bias", lambda f, x, w, b: f.linear(x, w, b), [(3, 5), (4, 5), (4,)]),
    ("linear without bias", lambda f, x, w: f.linear(x, w), [(3, 5), (4, 5)]),
    ("linear by keyword", lambda f, x, w: f.linear(input=x, weight=w, bias=None),
     [(3, 5), (4, 5)]),
    ("conv2d defaults", lambda f, x, w: f.conv2d(x, w), [(2, 3, 7, 7), (4, 3, 3, 3)]),
    ("conv2d ints", lambda f, x, w, b: f.conv2d(x, w, b, 2, 1, 1, 1),
     [(2, 3, 7, 7), (4, 3, 3, 3), (4,)]),
    ("conv2d pairs and groups",
     lambda f, x, w: f.conv2d(x, w, stride=(1, 2), padding=[2, 1], dilation=(2, 1), groups=2),
     [(1, 4, 9, 8), (6, 2, 3, 3)]),
    ("max_pool2d stride defaults to kernel", lambda f, x: f.max_pool2d(x, 2), [(2, 3, 8, 8)]),
    ("max_pool2d all", lambda f, x: f.max_pool2d(x, (3, 2), stride=(2, 1), padding=1,
                                                 dilation=1, ceil_mode=True), [(1, 2, 7, 6)]),
    ("avg_pool2d stride defaults to kernel", lambda f, x: f.avg_pool2d(x, 3), [(2, 3, 9, 9)]),
    ("avg_pool2d no pad count", lambda f, x: f.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
     [(2, 3, 8, 8)]),
    ("adaptive_avg_pool2d int", lambda f, x: f.adaptive_avg_pool2d(x, 1), [(2, 3, 8, 8)]),
    ("adaptive_avg_pool2d pair", lambda f, x: f.adaptive_avg_pool2d(x, (2, 4)), [(2, 3, 8, 8)]),
    ("relu", lambda f, x: f.relu(x), [(4, 5)]),
    ("sigmoid", lambda f, x: f.sigmoid(x), [(4, 5)]),
    ("tanh", lambda f, x: f.tanh(x), [(4, 5)]),
    ("leaky_relu", lambda f, x: f.leaky_relu(x, 0.2), [(4, 5)]),
    ("leaky_relu default", lambda f, x: f.leaky_relu(x), [(4, 5)]),
    ("gelu", lambda f, x: f.gelu(x), [(4, 5)]),
    ("gelu tanh", lambda f, x: f.gelu(x, approximate="tanh"), [(4, 5)]),
    ("softmax", lambda f, x: f.softmax(x, dim=1), [(4, 5)]),
    ("log_softmax", lambda f, x: f.log_softmax(x, -1), [(4, 5)]),
]


@pytest.mark.parametrize("name,call,shapes", CASES, ids=[c[0] for c in CASES])
def test_functional_matches_torch(name, call, shapes):
    pairs = [_both(_x(*shape, seed=i)) for i, shape in enumerate(shapes)]
    kiln_inputs, torch_inputs = [p[0] for p in pairs], [p[1] for p in pairs]
    _check(call(F, *kiln_inputs), call(torch.nn.functional, *torch_inputs), kiln_inputs,
           torch_inputs)


@pytest.mark.parametrize("args", [(), (1,), (0, 1), (1, -1), (2, 3), (-2,)])
def test_flatten_matches_torch(args):
    x = _x(2, 3, 4, 5)
    assert F.flatten(kiln.tensor(x), *args).shape == torch.flatten(torch.tensor(x), *args).shape
    assert nn.Flatten(*args)(kiln.tensor(x)).shape == torch.nn.Flatten(*args)(
        torch.tensor(x)).shape


def test_flatten_of_a_scalar_and_bad_dims():
    assert F.flatten(kiln.tensor(3.0)).shape == (1,)
    with pytest.raises(IndexError):
        F.flatten(kiln.ones(2, 3), 0, 5)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        F.flatten(kiln.ones(2, 3, 4), 2, 1)


def test_typed_op_bindings_raise_the_ops_errors():
    with pytest.raises(RuntimeError, match="linear"):
        F.linear(kiln.ones(2, 3), kiln.ones(4, 5))
    with pytest.raises(TypeError):
        F.linear(kiln.ones(2, 3), "weight")
    with pytest.raises(RuntimeError, match="conv2d"):
        F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(2, 4, 3, 3))


def test_dispatch_takes_an_op_from_the_table_or_its_name():
    add = kiln._C.op("add")
    assert add.name == "add" and repr(add) == "<kiln op add>"
    x = kiln.tensor([1.0, 2.0])
    assert kiln._C.dispatch(add, (x, x)).tolist() == [2.0, 4.0]
    assert kiln._C.dispatch("add", [x, 1]).tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match="nope"):
        kiln._C.op("nope")


def test_module_members_are_plain_attributes_kept_in_step_with_the_tables():
    m = nn.Module()
    w = nn.Parameter(kiln.ones(2))
    m.w = w
    assert m.w is w and vars(m)["w"] is w and m._parameters["w"] is w
    m.w = None  # a parameter slot set to None stays a parameter slot
    assert m.w is None and "w" in m._parameters and m._parameters["w"] is None
    m.w = nn.Linear(1, 1)  # now a child module, no longer a parameter
    assert isinstance(m.w, nn.Linear) and "w" not in m._parameters and "w" in m._modules
    m.register_buffer("stat", kiln.zeros(3))
    assert m.stat.shape == (3,) and [n for n, _ in m.named_buffers()] == ["stat"]
    m.stat = kiln.ones(3)
    assert m.stat.tolist() == [1.0, 1.0, 1.0] and m._buffers["stat"] is m.stat
    with pytest.raises(TypeError, match="as buffer 'stat'"):
        m.stat = 3
    m.register_parameter("p", nn.Parameter(kiln.ones(1)))
    m.add_module("child", nn.ReLU())
    assert isinstance(m.child, nn.ReLU) and m.p.shape == (1,)
    for name in ("w", "stat", "p", "child"):
        delattr(m, name)
        assert not hasattr(m, name)
    assert not m._parameters and not m._buffers and not m._modules
    assert list(m.parameters()) == []


def test_losses_are_the_cpp_functions_with_their_checks():
    """The losses are kiln/nn's C++ functions, bound (kiln._C.nn): Python gets
    every check the C++ API makes, which a second Python copy had lost
    (issue 23): these two, among others, as PyTorch words them."""
    x = kiln.randn(4, 3)
    probabilities = kiln.softmax(kiln.randn(4, 3), 1)
    with pytest.raises(ValueError, match="ignore_index is not supported for floating point"):
        F.cross_entropy(x, probabilities, ignore_index=1)
    with pytest.raises(ValueError, match="weight tensor should be defined either for all 3 "
                                         "classes or no classes but got weight tensor of shape"):
        nn.CrossEntropyLoss(weight=kiln.ones(4))(x, kiln.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="nll_loss: weight tensor should be defined"):
        F.nll_loss(x, kiln.tensor([0, 1, 2, 0]), weight=kiln.ones(2))
    with pytest.raises(ValueError, match="wrong is not a valid value for reduction"):
        F.mse_loss(x, x, reduction="wrong")
