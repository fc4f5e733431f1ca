"""kiln.optim against torch.optim: the same model, the same gradients, a few
steps; the parameters must agree."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn, optim


def _pair():
    t = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    k = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    k.load_state_dict({n: v.detach().numpy().copy() for n, v in t.state_dict().items()})
    return k, t


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, eps=1e-6)),
]


@pytest.mark.parametrize("name,kwargs", CASES)
def test_optimizer_matches_torch(name, kwargs):
    k, t = _pair()
    kopt = getattr(optim, name)(k.parameters(), **kwargs)
    topt = getattr(torch.optim, name)(t.parameters(), **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.standard_normal((8, 5)).astype(np.float32)
        target = rng.integers(0, 3, 8)
        kopt.zero_grad()
        topt.zero_grad()
        nn.functional.cross_entropy(k(kiln.tensor(x)), kiln.tensor(target)).backward()
        torch.nn.functional.cross_entropy(t(torch.tensor(x)), torch.tensor(target)).backward()
        kopt.step()
        topt.step()
    for (n, pk), pt in zip(k.named_parameters(), t.parameters()):
        np.testing.assert_allclose(pk.detach().numpy(), pt.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)


def test_zero_grad_param_groups_and_schedulers():
    k, _ = _pair()
    opt = optim.SGD(k.parameters(), lr=0.1, momentum=0.9)
    k(kiln.randn(2, 5)).sum().backward()
    opt.zero_grad()
    assert all(p.grad is None for p in k.parameters())
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.9)
    assert len(opt.param_groups[0]["params"]) == 4
    opt.param_groups[0]["lr"] = 0.5
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(2):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [pytest.approx(0.05)]
    cos = optim.lr_scheduler.CosineAnnealingLR(optim.Adam(k.parameters(), lr=1.0), T_max=2)
    cos.step()
    assert cos.get_last_lr() == [pytest.approx(0.5)]
    assert "SGD (" in repr(opt)


def test_optimizer_errors():
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError):
        optim.SGD(nn.Linear(2, 2).parameters(), lr=-1.0)


def test_training_frees_all_tensor_memory():
    import gc
    gc.collect()  # what earlier tests left in reference cycles is not this test's
    before = kiln._C._allocator_live_bytes()

    def train():
        m = nn.Sequential(nn.Linear(10, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))
        opt = optim.Adam(m.parameters(), lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, 1)
        for _ in range(3):
            loss = nn.functional.cross_entropy(m(kiln.randn(4, 10)), kiln.randint(0, 2, (4,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    train()
    gc.collect()
    assert kiln._C._allocator_live_bytes() == before
