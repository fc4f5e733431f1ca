"""kiln.optim's Optimizer as torch.optim's, for what programs do with it
beyond the built-in algorithms: a user's subclass written the way torch's
docs show, step(closure), the step and state-dict hooks, the errors bad
arguments raise (torch's exception types); and a compiled training step
(kiln.compile of zero_grad, forward, backward and step) with each built-in
optimizer, which must equal the same steps taken eagerly."""
import re
import warnings
from importlib import import_module

import numpy as np
import pytest
import torch

import kiln
from kiln import nn, optim
from test_optim_torch import LR, assert_same_params, assert_same_state, backward_both, make_pair


def momentum_sgd_class(lib):
    """SGD with momentum as torch's docs write an optimizer: defaults, a
    lazily made self.state[p], and a no_grad step taking a closure."""

    class MomentumSGD(lib.optim.Optimizer):
        def __init__(self, params, lr=0.01, momentum=0.9, weight_decay=0.0):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @lib.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with lib.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    if group["weight_decay"] != 0:
                        d_p = d_p.add(p, alpha=group["weight_decay"])
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        buf = state["momentum_buffer"] = lib.clone(d_p).detach()
                    else:
                        buf = state["momentum_buffer"]
                        buf.mul_(group["momentum"]).add_(d_p)
                    p.add_(buf, alpha=-group["lr"])
            return loss

    return MomentumSGD


def test_a_user_subclass_trains_as_torchs():
    k, t = make_pair()
    groups = lambda m: [{"params": m[0].parameters()},  # noqa: E731
                        {"params": m[2].parameters(), "lr": 0.05, "weight_decay": 0.1}]
    kopt = momentum_sgd_class(kiln)(groups(k), lr=0.1, momentum=0.8)
    topt = momentum_sgd_class(torch)(groups(t), lr=0.1, momentum=0.8)
    assert isinstance(kopt, optim.Optimizer)
    for step in range(6):
        kopt.zero_grad()
        topt.zero_grad()
        backward_both(k, t, step)
        kopt.step()
        topt.step()
        assert_same_params(k, t, f"step {step}")
        assert_same_state(kopt, topt, k, t)
    ksd, tsd = kopt.state_dict(), topt.state_dict()
    assert sorted(ksd["state"]) == sorted(tsd["state"])
    assert [sorted(g) for g in ksd["param_groups"]] == [sorted(g) for g in tsd["param_groups"]]
    resumed = momentum_sgd_class(kiln)(groups(k), lr=0.5)
    resumed.load_state_dict(ksd)
    assert resumed.param_groups[1]["lr"] == 0.05 and resumed.param_groups[0]["momentum"] == 0.8
    with pytest.raises(ValueError, match="Invalid learning rate"):
        momentum_sgd_class(kiln)(k.parameters(), lr=-1)


def closure_losses(lib, model, opt, steps):
    rng = np.random.default_rng(7)
    losses = []
    for _ in range(steps):
        x = lib.tensor(rng.standard_normal((8, 5)).astype(np.float32))
        target = lib.tensor(rng.integers(0, 3, 8))

        def closure(x=x, target=target):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(x), target)
            loss.backward()
            return loss
        losses.append(opt.step(closure).item())
    return losses


@pytest.mark.parametrize("make", [
    lambda lib, p: lib.optim.SGD(p, lr=0.1, momentum=0.9),
    lambda lib, p: lib.optim.Adam(p, lr=0.01, amsgrad=True),
    lambda lib, p: lib.optim.RMSprop(p, lr=0.01, centered=True),
    lambda lib, p: momentum_sgd_class(lib)(p, lr=0.1),
], ids=["SGD", "Adam", "RMSprop", "subclass"])
def test_step_with_a_closure_returns_its_loss(make):
    k, t = make_pair()
    got = closure_losses(kiln, k, make(kiln, k.parameters()), 5)
    want = closure_losses(torch, t, make(torch, t.parameters()), 5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert_same_params(k, t, rtol=1e-5, atol=1e-6)


def hook_log(lib, opt):
    """Registers a hook of every kind on `opt` (and global step hooks),
    each appending what it saw to the returned log."""
    log = []
    module = import_module(f"{lib.__name__}.optim.optimizer")
    handles = [
        module.register_optimizer_step_pre_hook(lambda o, a, kw: log.append("global pre")),
        module.register_optimizer_step_post_hook(lambda o, a, kw: log.append("global post")),
        opt.register_step_pre_hook(lambda o, a, kw: log.append(f"pre {len(a)} {sorted(kw)}")),
        opt.register_step_post_hook(lambda o, a, kw: log.append("post")),
        opt.register_state_dict_pre_hook(lambda o: log.append("sd pre")),
        opt.register_state_dict_post_hook(lambda o, sd: log.append(f"sd post {sorted(sd)}")),
        opt.register_load_state_dict_pre_hook(lambda o, sd: log.append("load pre")),
        opt.register_load_state_dict_post_hook(lambda o: log.append("load post")),
    ]
    return log, handles


@pytest.mark.parametrize("subclass", [False, True], ids=["SGD", "subclass"])
def test_hooks_run_as_torchs(subclass):
    logs = []
    for lib in (kiln, torch):
        model, _ = make_pair()
        model = model if lib is kiln else make_pair()[1]
        cls = momentum_sgd_class(lib) if subclass else lib.optim.SGD
        opt = cls(model.parameters(), lr=0.1)
        log, handles = hook_log(lib, opt)
        try:
            opt.step()
            opt.step(closure=None)
            opt.load_state_dict(opt.state_dict())
            for handle in handles[2:4]:
                handle.remove()
            opt.step()
        finally:
            for handle in handles[:2]:
                handle.remove()
        opt.step()
        logs.append(log)
    assert logs[0] == logs[1]


def test_a_step_pre_hook_may_replace_the_arguments():
    for lib in (kiln, torch):
        model = make_pair()[0] if lib is kiln else make_pair()[1]
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        calls = []

        def add_closure(o, args, kwargs, calls=calls):
            assert args == (o,)  # the optimizer is the first argument
            return args, {"closure": lambda: calls.append(1)}
        opt.register_step_pre_hook(add_closure)
        opt.step()
        assert calls == [1]
        opt.register_step_pre_hook(lambda o, a, kw: "nonsense")
        with pytest.raises(RuntimeError, match="must return None or a tuple"):
            opt.step()


# ---------------------------------------------------------------- errors

def params(lib):
    return [lib.nn.Parameter(lib.zeros(3))]


BAD_ARGUMENTS = [
    ("SGD", dict(lr=-1.0)), ("SGD", dict(lr=0.1, momentum=-0.5)),
    ("SGD", dict(lr=0.1, weight_decay=-1.0)), ("SGD", dict(lr=0.1, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)),
    ("SGD", dict(lr=0.1, fused=True, foreach=True)),
    ("SGD", dict(lr=0.1, fused=True, differentiable=True)),
    ("SGD", dict(lr=0.1, bogus=1)),
    ("Adam", dict(lr=-1.0)), ("Adam", dict(eps=-1.0)), ("Adam", dict(betas=(1.0, 0.999))),
    ("Adam", dict(betas=(0.9, -0.1))), ("Adam", dict(betas=(0, 0.9))),
    ("Adam", dict(weight_decay=-1.0)), ("Adam", dict(fused=True, foreach=True)),
    ("Adam", dict(fused=True, differentiable=True)),
    ("Adam", dict(lr=np.float32(0.1), foreach=True)),  # stands for a tensor lr, see below
    ("Adam", dict(lr=np.array([0.1, 0.2], np.float32))),
    ("AdamW", dict(betas=(0.9, 1.0))), ("AdamW", dict(weight_decay=-1.0)),
    ("AdamW", dict(fused=True, foreach=True)),
    ("RMSprop", dict(alpha=-0.1)), ("RMSprop", dict(momentum=-0.1)), ("RMSprop", dict(eps=-1.0)),
    ("RMSprop", dict(lr=-1.0)), ("RMSprop", dict(weight_decay=-1.0)),
    ("Adagrad", dict(lr_decay=-1.0)), ("Adagrad", dict(initial_accumulator_value=-1.0)),
    ("Adagrad", dict(eps=-1.0)), ("Adagrad", dict(fused=True, foreach=True)),
    ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(rho=-0.5)), ("Adadelta", dict(lr=-1.0)),
    ("Adadelta", dict(eps=-1.0)),
    ("Adamax", dict(betas=(1.5, 0.9))), ("Adamax", dict(eps=-1.0)),
    ("Adamax", dict(weight_decay=-1.0)),
    ("NAdam", dict(momentum_decay=-1.0)), ("NAdam", dict(betas=(0.9, 1.0))),
    ("NAdam", dict(lr=-1.0)),
    ("RAdam", dict(betas=(-0.1, 0.9))), ("RAdam", dict(weight_decay=-1.0)),
    ("RAdam", dict(eps=-1.0)),
]


def raised(make):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make()
    except Exception as error:  # noqa: BLE001 - the test compares what each raises
        return error
    pytest.fail("no error raised")


def assert_same_error(make_torch, make_kiln):
    want, got = raised(make_torch), raised(make_kiln)
    assert type(got) is type(want), (got, want)
    # torch's sentence, without the value it ends with (kiln prints -1, not
    # -1.0, and its own type names)
    sentence = re.sub(r"(, but got .*|:? *[-+\d.e()]*)$", "", str(want).split("\n")[0]).lower()
    assert sentence in str(got).lower(), (got, want)


def lib_value(lib, value):
    if isinstance(value, (np.ndarray, np.floating)):  # a tensor learning rate
        return lib.tensor(np.asarray(value))
    return value


@pytest.mark.parametrize("name,kwargs", BAD_ARGUMENTS,
                         ids=[f"{n}-{'-'.join(k)}" for n, k in BAD_ARGUMENTS])
def test_bad_arguments_raise_torchs_errors(name, kwargs):
    def make(lib):
        return lambda: getattr(lib.optim, name)(
            params(lib), **{k: lib_value(lib, v) for k, v in kwargs.items()})
    assert_same_error(make(torch), make(kiln))


@pytest.mark.parametrize("case", [
    "tensor", "empty", "set", "non-leaf", "not-a-tensor", "shared", "group-not-dict",
    "missing-required"])
def test_bad_params_raise_torchs_errors(case):
    def make(lib):
        p = lib.nn.Parameter(lib.zeros(3))
        q = lib.nn.Parameter(lib.zeros(2))
        return {
            "tensor": lambda: lib.optim.SGD(p, lr=0.1),
            "empty": lambda: lib.optim.Adam([], lr=0.1),
            "set": lambda: lib.optim.SGD([{"params": {p, q}}], lr=0.1),
            "non-leaf": lambda: lib.optim.SGD([p * 2], lr=0.1),
            "not-a-tensor": lambda: lib.optim.SGD([p, 1.0], lr=0.1),
            "shared": lambda: lib.optim.SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1),
            "group-not-dict": lambda: lib.optim.SGD([p], lr=0.1).add_param_group([q]),
            "missing-required": lambda: lib.optim.Optimizer(
                [p], {"lr": import_module(f"{lib.__name__}.optim.optimizer").required}),
        }[case]
    assert_same_error(make(torch), make(kiln))


# ---------------------------------------------------------------- compiled steps

def train(make_optimizer, compiled, steps=6, lr_change=3):
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2))
    opt = make_optimizer(model.parameters())

    def step(x, target):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = kiln.compile(step)
    kiln.manual_seed(1)
    losses = []
    for i in range(steps):
        if i == lr_change:
            opt.param_groups[0]["lr"] = opt.param_groups[0]["lr"] / 2
        losses.append(step(kiln.randn(10, 10), kiln.randint(0, 2, (10,))).item())
    return model, opt, losses, step


COMPILED = [
    ("SGD", dict(momentum=0.9, weight_decay=0.01, maximize=True)),
    ("Adam", dict(amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("AdamW", dict(amsgrad=True)),
    ("RMSprop", {}), ("RMSprop", dict(centered=True, momentum=0.9, weight_decay=0.1)),
    ("Adagrad", dict(lr_decay=0.1, initial_accumulator_value=0.1)),
    ("Adadelta", {}), ("Adadelta", dict(rho=0.5, weight_decay=0.1, maximize=True)),
    ("Adamax", {}), ("Adamax", dict(weight_decay=0.1)),
    ("NAdam", {}), ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", {}), ("RAdam", dict(betas=(0.5, 0.6), weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
]


@pytest.mark.parametrize("name,kwargs", COMPILED,
                         ids=[n + "".join(f"-{k}" for k in kw) for n, kw in COMPILED])
def test_a_compiled_training_step_equals_eager_steps(name, kwargs):
    def make(p):
        return getattr(optim, name)(p, lr=LR[name], **kwargs)
    eager_model, eager_opt, eager_losses, _ = train(make, compiled=False, steps=8)
    model, opt, losses, step = train(make, compiled=True, steps=8)
    info = step.cache_info()
    assert len(info.entries) == 1 and info.hits == 7  # the lr change records nothing again
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6, atol=1e-7)
    for got, want in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)
        got_state, want_state = opt.state[got], eager_opt.state[want]
        assert list(got_state) == list(want_state)
        for key, value in want_state.items():
            np.testing.assert_allclose(got_state[key].numpy(), value.numpy(), rtol=1e-6,
                                       atol=1e-7, err_msg=key)
