"""kiln.nn against torch.nn: each layer gets torch's weights through
load_state_dict and must give torch's output and input gradient."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F


def _k(array, requires_grad=False):
    t = kiln.tensor(np.asarray(array))
    return t.requires_grad_() if requires_grad else t


def _state(torch_module):
    return {k: v.detach().numpy().copy() for k, v in torch_module.state_dict().items()}


def _compare(kmod, tmod, x, atol=1e-5, grad=True):
    kmod.load_state_dict(_state(tmod))
    xt = torch.tensor(x, requires_grad=grad)
    xk = _k(x, requires_grad=grad)
    yt, yk = tmod(xt), kmod(xk)
    np.testing.assert_allclose(yk.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=atol)
    if grad:
        w = np.random.default_rng(1).standard_normal(yt.shape).astype(np.float32)
        (yt * torch.tensor(w)).sum().backward()
        (yk * _k(w)).sum().backward()
        np.testing.assert_allclose(xk.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=atol)
        named = dict(kmod.named_parameters())
        for name, p in tmod.named_parameters():
            np.testing.assert_allclose(named[name].grad.numpy(), p.grad.numpy(), rtol=1e-4,
                                       atol=atol, err_msg=name)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("make", [
    lambda m: m.Linear(7, 4),
    lambda m: m.Linear(7, 4, bias=False),
    lambda m: m.Sequential(m.Linear(7, 5), m.ReLU(), m.Linear(5, 3), m.Sigmoid()),
    lambda m: m.Sequential(m.Linear(7, 5), m.Tanh(), m.Softmax(dim=1)),
    lambda m: m.Sequential(m.Linear(7, 5), m.LogSoftmax(dim=1)),
    lambda m: m.BatchNorm1d(7),
    lambda m: m.LayerNorm(7),
    lambda m: m.Dropout(0.0),
])
def test_layers_2d(make):
    _compare(make(nn), make(torch.nn), _x(6, 7))


@pytest.mark.parametrize("make", [
    lambda m: m.Conv2d(3, 4, 3),
    lambda m: m.Conv2d(3, 4, (3, 2), stride=2, padding=1, bias=False),
    lambda m: m.Sequential(m.Conv2d(3, 6, 5, padding=2), m.Sigmoid(), m.AvgPool2d(2, stride=2),
                           m.Flatten(), m.Linear(6 * 4 * 4, 5)),
    lambda m: m.MaxPool2d(2),
    lambda m: m.MaxPool2d(3, stride=2, padding=1),
    lambda m: m.BatchNorm2d(3),
])
def test_layers_4d(make):
    _compare(make(nn), make(torch.nn), _x(2, 3, 8, 8))


def test_batchnorm_running_stats_and_eval():
    kb, tb = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = _x(4, 3, 5, 5)
    for _ in range(2):
        kb(_k(x))
        tb(torch.tensor(x))
    for name, value in tb.state_dict().items():
        np.testing.assert_allclose(np.asarray(kb.state_dict()[name].numpy()), value.numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    kb.eval()
    tb.eval()
    _compare(kb, tb, _x(2, 3, 5, 5, seed=3), grad=False)


def test_embedding():
    ke, te = nn.Embedding(10, 4), torch.nn.Embedding(10, 4)
    ke.load_state_dict(_state(te))
    idx = np.array([[1, 2, 9], [0, 2, 2]])
    np.testing.assert_allclose(ke(_k(idx)).detach().numpy(),
                               te(torch.tensor(idx)).detach().numpy())
    assert nn.Embedding(5, 3, padding_idx=1).weight.tolist()[1] == [0.0, 0.0, 0.0]


def test_default_init_bounds():
    lin = nn.Linear(100, 50)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.09 and abs(w.mean()) < 0.01
    conv = nn.Conv2d(4, 8, 3)
    bound = 1 / np.sqrt(4 * 9)
    assert np.abs(conv.bias.detach().numpy()).max() <= bound
    assert conv.weight.shape == (8, 4, 3, 3)


# -- losses ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 2},
    {"label_smoothing": 0.2}, {"label_smoothing": 0.1, "ignore_index": 0},
    {"weight": [1.0, 2.0, 0.5, 1.5]},
])
def test_cross_entropy(kwargs):
    x = _x(6, 4)
    target = np.array([0, 2, 3, 1, 2, 0])
    tkw = dict(kwargs)
    kkw = dict(kwargs)
    if "weight" in kwargs:
        tkw["weight"] = torch.tensor(kwargs["weight"])
        kkw["weight"] = kiln.tensor(kwargs["weight"])
    xt, xk = torch.tensor(x, requires_grad=True), _k(x, True)
    lt = torch.nn.CrossEntropyLoss(**tkw)(xt, torch.tensor(target))
    lk = nn.CrossEntropyLoss(**kkw)(xk, _k(target))
    np.testing.assert_allclose(lk.detach().numpy(), lt.detach().numpy(), rtol=1e-5, atol=1e-6)
    lt.sum().backward()
    lk.sum().backward()
    np.testing.assert_allclose(xk.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_probabilities_and_nll():
    x, p = _x(5, 3), np.random.default_rng(2).dirichlet([1, 1, 1], 5).astype(np.float32)
    np.testing.assert_allclose(
        F.cross_entropy(_k(x), _k(p), label_smoothing=0.1).item(),
        torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(p),
                                          label_smoothing=0.1).item(), rtol=1e-5)
    target = np.array([0, 1, 2, 1, 0])
    np.testing.assert_allclose(F.nll_loss(_k(x), _k(target)).item(),
                               torch.nn.functional.nll_loss(torch.tensor(x),
                                                            torch.tensor(target)).item(),
                               rtol=1e-5)
    with pytest.raises(TypeError, match="int64"):
        F.nll_loss(_k(x), _k(target.astype(np.int32)))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(name, reduction):
    a, b = _x(3, 4), _x(3, 4, seed=5)
    at, ak = torch.tensor(a, requires_grad=True), _k(a, True)
    lt = getattr(torch.nn.functional, name)(at, torch.tensor(b), reduction=reduction)
    lk = getattr(F, name)(ak, _k(b), reduction=reduction)
    np.testing.assert_allclose(lk.detach().numpy(), lt.detach().numpy(), rtol=1e-5)
    lt.sum().backward()
    lk.sum().backward()
    np.testing.assert_allclose(ak.grad.numpy(), at.grad.numpy(), rtol=1e-5)
    assert isinstance(nn.MSELoss()(ak, _k(b)), kiln.Tensor)


def test_functional_dropout():
    x = kiln.ones(1000)
    y = F.dropout(x, 0.5)
    kept = y.numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and 300 < (kept > 0).sum() < 700
    assert F.dropout(x, 0.5, training=False) is x
    d = nn.Dropout(0.5).eval()
    assert d(x) is x


# -- Module ---------------------------------------------------------------------

def _net_class(m, lib):
    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = m.Linear(4, 3)
            self.scale = m.Parameter(lib.ones(3))
            self.block = m.Sequential(m.Linear(3, 3), m.BatchNorm1d(3))
            self.register_buffer("steps", lib.zeros(1))
            self.plain = 5

        def forward(self, x):
            return self.block(m.functional.relu(self.fc1(x)) * self.scale)
    return Net


Net = _net_class(nn, kiln)


def test_module_registration_and_names_match_torch():
    net, tnet = Net(), _net_class(torch.nn, torch)()
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    assert [n for n, _ in net.named_buffers()] == [n for n, _ in tnet.named_buffers()]
    assert list(net.state_dict()) == list(tnet.state_dict())
    assert [n for n, _ in net.named_children()] == ["fc1", "block"]
    assert [n for n, _ in net.named_modules()] == [n for n, _ in tnet.named_modules()]
    assert len(list(net.parameters())) == 7
    assert net.plain == 5 and "plain" not in dict(net.named_parameters())
    with pytest.raises(TypeError, match="as parameter 'scale'"):
        net.scale = kiln.ones(3)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = net.nope
    net.load_state_dict(_state(tnet))
    x = _x(5, 4)
    np.testing.assert_allclose(net(_k(x)).detach().numpy(),
                               tnet(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_module_train_eval_and_zero_grad():
    net = Net()
    assert net.training and net.block[1].training
    net.eval()
    assert not net.training and not net.block[1].training
    net.train()
    assert net.block[1].training
    net(kiln.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip_and_errors():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy(), err_msg=name)
    params_before = list(b.parameters())
    assert all(p1 is p2 for p1, p2 in zip(params_before, b.parameters()))  # copied in place
    state = a.state_dict()
    del state["fc1.bias"]
    state["extra.weight"] = kiln.zeros(1)
    with pytest.raises(RuntimeError, match='Unexpected key.*"extra.weight"') as err:
        b.load_state_dict(state)
    assert 'Missing key(s) in state_dict: "fc1.bias"' in str(err.value)
    missing, unexpected = b.load_state_dict(state, strict=False)
    assert missing == ["fc1.bias"] and unexpected == ["extra.weight"]
    state = a.state_dict()
    state["fc1.weight"] = kiln.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.weight.*\[2, 2\]"):
        b.load_state_dict(state)


def test_module_repr_matches_torch():
    make = lambda m: m.Sequential(m.Conv2d(1, 6, 5, padding=2), m.Sigmoid(), m.AvgPool2d(2),  # noqa
                                  m.Flatten(), m.Linear(10, 2), m.Dropout(0.5), m.ReLU(),
                                  m.BatchNorm1d(2), m.LayerNorm(2), m.Embedding(3, 2),
                                  m.Softmax(dim=1))
    assert repr(make(nn)) == repr(make(torch.nn))
    assert "Parameter containing:" in repr(nn.Parameter(kiln.ones(1)))


def test_module_without_forward_and_subclass_call():
    class NoForward(nn.Module):
        pass
    with pytest.raises(NotImplementedError, match="forward"):
        NoForward()(kiln.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(1, 1)
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
