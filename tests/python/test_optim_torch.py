"""kiln.optim's built-in optimizers against torch.optim 2.13, option by
option: the same small model (kiln's weights copied from torch's), the same
gradients, several steps; after each step the parameters and every state
tensor must equal torch's. Then param groups, add_param_group, parameters
without a gradient, zero_grad, and state dicts (their layout, a round trip
through kiln.save/kiln.load, and a torch optimizer's state loaded into
kiln).

Each step backpropagates through both models and checks that the gradients
agree, then hands torch's gradient bits to kiln, so that what is compared
is the optimizers' arithmetic, not two backward passes' rounding."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn, optim

STEPS = 8  # RAdam's rectified branch starts at its 6th step (beta2 = 0.999)
KINDS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]
LR = {"SGD": 0.1, "Adam": 0.01, "AdamW": 0.01, "RMSprop": 0.01, "Adagrad": 0.1,
      "Adadelta": 1.0, "Adamax": 0.02, "NAdam": 0.02, "RAdam": 0.01}


# ---------------------------------------------------------------- helpers

def make_pair(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    k = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    k.load_state_dict({n: kiln.tensor(v.detach().numpy().copy())
                       for n, v in t.state_dict().items()})
    return k, t


def to_kiln(value):
    """A torch value as kiln holds it: tensors copied, containers walked."""
    if isinstance(value, torch.Tensor):
        return kiln.tensor(value.detach().numpy().copy())
    if isinstance(value, dict):
        return {k: to_kiln(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_kiln(v) for v in value)
    return value


def numpy(value):
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def backward_both(k, t, step, skip=()):
    """Backpropagates one batch through both models; kiln's gradients must
    agree with torch's and are then replaced by torch's. Parameters whose
    index is in `skip` are left without a gradient in both."""
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    target = rng.integers(0, 3, 8)
    t_loss = torch.nn.functional.cross_entropy(t(torch.tensor(x)), torch.tensor(target))
    t_loss.backward()
    k_loss = nn.functional.cross_entropy(k(kiln.tensor(x)), kiln.tensor(target))
    k_loss.backward()
    np.testing.assert_allclose(k_loss.item(), t_loss.item(), rtol=1e-5)
    for i, (kp, tp) in enumerate(zip(k.parameters(), t.parameters())):
        np.testing.assert_allclose(numpy(kp.grad), numpy(tp.grad), rtol=1e-4, atol=1e-6)
        if i in skip:
            kp.grad, tp.grad = None, None
        else:
            kp.grad = to_kiln(tp.grad)
    return k_loss.item(), t_loss.item()


def assert_close(got, want, what, rtol=1e-6, atol=1e-7):
    """Equal to float32 rounding: elementwise rtol, and an atol of rtol
    times the tensor's largest magnitude. torch's CPU sqrt is 1 ulp away
    from the correctly rounded one (kiln's) for a fifth of the inputs, and a
    sum with cancellation (a momentum buffer) carries the ulps of its
    larger terms."""
    want = numpy(want)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(numpy(got), want, rtol=rtol, atol=max(atol, rtol * scale),
                               err_msg=what)


def assert_same_params(k, t, what="", **tol):
    for (name, kp), tp in zip(k.named_parameters(), t.parameters()):
        assert_close(kp, tp, f"{what} {name}", **tol)


def assert_same_state(kopt, topt, k, t, **tol):
    for (name, kp), tp in zip(k.named_parameters(), t.parameters()):
        ks, ts = kopt.state.get(kp, {}), topt.state.get(tp, {})
        assert sorted(ks) == sorted(ts), name
        for key, want in ts.items():
            got = ks[key]
            assert isinstance(got, kiln.Tensor) == isinstance(want, torch.Tensor), (name, key)
            if isinstance(want, torch.Tensor):
                assert tuple(got.shape) == tuple(want.shape), (name, key)
                assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], key
            assert_close(got, want, f"state[{name}][{key}]", **tol)


def train_both(kopt, topt, k, t, steps=STEPS, first=0, skip=(), **tol):
    for step in range(first, first + steps):
        kopt.zero_grad()
        topt.zero_grad()
        backward_both(k, t, step, skip)
        kopt.step()
        topt.step()
        assert_same_params(k, t, f"step {step}", **tol)
        assert_same_state(kopt, topt, k, t, **tol)


# ---------------------------------------------------------------- every option

CASES = [
    ("SGD", {}), ("SGD", dict(momentum=0.9)), ("SGD", dict(momentum=0.9, dampening=0.3)),
    ("SGD", dict(momentum=0.9, nesterov=True)), ("SGD", dict(weight_decay=0.1)),
    ("SGD", dict(maximize=True)),
    ("SGD", dict(momentum=0.8, nesterov=True, weight_decay=0.05, maximize=True)),
    ("SGD", dict(momentum=0.5, foreach=True)), ("SGD", dict(momentum=0.5, fused=True)),
    ("Adam", {}), ("Adam", dict(amsgrad=True)), ("Adam", dict(maximize=True)),
    ("Adam", dict(weight_decay=0.1)),
    ("Adam", dict(betas=(0.8, 0.9), eps=1e-6, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adam", dict(foreach=True)), ("Adam", dict(fused=True, amsgrad=True)),
    ("AdamW", {}), ("AdamW", dict(amsgrad=True, weight_decay=0.05)),
    ("AdamW", dict(maximize=True, betas=(0.5, 0.6))), ("AdamW", dict(foreach=True)),
    ("AdamW", dict(fused=True)),
    ("RMSprop", {}), ("RMSprop", dict(centered=True)), ("RMSprop", dict(momentum=0.9)),
    ("RMSprop", dict(alpha=0.9)),
    ("RMSprop", dict(centered=True, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(foreach=True, centered=True)),
    ("Adagrad", {}), ("Adagrad", dict(lr_decay=0.1)),
    ("Adagrad", dict(initial_accumulator_value=0.5)),
    ("Adagrad", dict(weight_decay=0.1, maximize=True, eps=1e-6)),
    ("Adagrad", dict(foreach=True, lr_decay=0.05)), ("Adagrad", dict(fused=True)),
    ("Adadelta", {}), ("Adadelta", dict(rho=0.5, eps=1e-4)),
    ("Adadelta", dict(weight_decay=0.1, maximize=True)), ("Adadelta", dict(lr=0.5)),
    ("Adadelta", dict(foreach=True)),
    ("Adamax", {}), ("Adamax", dict(betas=(0.8, 0.95))),
    ("Adamax", dict(weight_decay=0.1, maximize=True, eps=1e-4)), ("Adamax", dict(foreach=True)),
    ("NAdam", {}), ("NAdam", dict(momentum_decay=0.01)), ("NAdam", dict(weight_decay=0.1)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(maximize=True, betas=(0.8, 0.9))), ("NAdam", dict(foreach=True)),
    ("RAdam", {}), ("RAdam", dict(weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(maximize=True)), ("RAdam", dict(betas=(0.8, 0.9))),
    ("RAdam", dict(foreach=True)),
]


def case_id(case):
    name, kwargs = case
    return name + "".join(f"-{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize("name,kwargs", CASES, ids=[case_id(c) for c in CASES])
def test_every_option_steps_as_torch(name, kwargs):
    kwargs = {"lr": LR[name], **kwargs}
    k, t = make_pair()
    kopt = getattr(optim, name)(k.parameters(), **kwargs)
    topt = getattr(torch.optim, name)(t.parameters(), **kwargs)
    assert_same_state(kopt, topt, k, t)  # Adagrad makes its state in __init__
    # torch's fused CPU kernels round a little differently from its
    # single-tensor algorithm, which is the one kiln follows.
    tol = dict(rtol=1e-5, atol=1e-6) if kwargs.get("fused") else {}
    train_both(kopt, topt, k, t, **tol)


# Flags torch accepts everywhere but runs only on other devices (capturable)
# or only on non-leaf parameters (differentiable): kiln keeps them in the
# groups and steps as torch's plain algorithm does.
FLAGS = [(name, flag) for name in KINDS for flag in ("capturable", "differentiable", "foreach",
                                                     "fused")
         if flag in getattr(torch.optim, name).__init__.__code__.co_varnames]


@pytest.mark.parametrize("name,flag", FLAGS, ids=[f"{n}-{f}" for n, f in FLAGS])
def test_device_flags_are_accepted_and_kept(name, flag):
    k, t = make_pair()
    kopt = getattr(optim, name)(k.parameters(), lr=LR[name], **{flag: True})
    torch_runs_it = flag in ("foreach", "fused")
    topt = getattr(torch.optim, name)(t.parameters(), lr=LR[name],
                                      **({flag: True} if torch_runs_it else {}))
    assert kopt.param_groups[0][flag] is True
    assert kopt.defaults[flag] is True
    tol = dict(rtol=1e-5, atol=1e-6) if flag == "fused" else {}
    train_both(kopt, topt, k, t, steps=5, **tol)


def test_a_tensor_learning_rate_steps_as_a_number():
    k, t = make_pair()
    kopt = optim.Adam(k.parameters(), lr=kiln.tensor(0.01))
    topt = torch.optim.Adam(t.parameters(), lr=torch.tensor(0.01))
    train_both(kopt, topt, k, t, steps=5)
    kopt.param_groups[0]["lr"].fill_(0.002)
    topt.param_groups[0]["lr"].fill_(0.002)
    train_both(kopt, topt, k, t, steps=3, first=5)


# ---------------------------------------------------------------- groups

GROUP_OPTIONS = {
    "SGD": ({"momentum": 0.9}, {"lr": 0.05, "nesterov": True, "momentum": 0.5}),
    "Adam": ({"amsgrad": True}, {"lr": 0.05, "betas": (0.5, 0.9), "weight_decay": 0.1}),
    "AdamW": ({}, {"lr": 0.03, "weight_decay": 0.5, "amsgrad": True}),
    "RMSprop": ({"centered": True}, {"lr": 0.02, "momentum": 0.9, "alpha": 0.5}),
    "Adagrad": ({"lr_decay": 0.1}, {"lr": 0.2, "initial_accumulator_value": 1.0}),
    "Adadelta": ({"rho": 0.5}, {"lr": 0.3, "weight_decay": 0.1}),
    "Adamax": ({}, {"lr": 0.05, "betas": (0.5, 0.9)}),
    "NAdam": ({"momentum_decay": 0.01}, {"lr": 0.05, "weight_decay": 0.1,
                                         "decoupled_weight_decay": True}),
    "RAdam": ({}, {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
}


def groups_of(model, options):
    layers = [m for m in model if hasattr(m, "weight")]
    return [{"params": list(layers[0].parameters()), **options[0]},
            {"params": list(layers[1].parameters()), **options[1]}]


@pytest.mark.parametrize("name", KINDS)
def test_param_groups_with_their_own_options(name):
    k, t = make_pair()
    kopt = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name]), lr=LR[name])
    topt = getattr(torch.optim, name)(groups_of(t, GROUP_OPTIONS[name]), lr=LR[name])
    assert [sorted(g) for g in kopt.param_groups] == [sorted(g) for g in topt.param_groups]
    for kg, tg in zip(kopt.param_groups, topt.param_groups):
        assert {n: v for n, v in kg.items() if n != "params"} == \
            {n: v for n, v in tg.items() if n != "params"}
    train_both(kopt, topt, k, t)


@pytest.mark.parametrize("name", KINDS)
def test_add_param_group_mid_training(name):
    k, t = make_pair()
    first, second = GROUP_OPTIONS[name]
    kopt = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name])[:1], lr=LR[name])
    topt = getattr(torch.optim, name)(groups_of(t, GROUP_OPTIONS[name])[:1], lr=LR[name])
    train_both(kopt, topt, k, t, steps=3)
    kopt.add_param_group(groups_of(k, GROUP_OPTIONS[name])[1])
    topt.add_param_group(groups_of(t, GROUP_OPTIONS[name])[1])
    assert kopt.param_groups[1].keys() == topt.param_groups[1].keys()
    train_both(kopt, topt, k, t, steps=5, first=3)


@pytest.mark.parametrize("name", KINDS)
def test_a_parameter_without_a_gradient_is_skipped(name):
    k, t = make_pair()
    kopt = getattr(optim, name)(k.parameters(), lr=LR[name], weight_decay=0.1)
    topt = getattr(torch.optim, name)(t.parameters(), lr=LR[name], weight_decay=0.1)
    before = numpy(list(k.parameters())[1]).copy()
    train_both(kopt, topt, k, t, steps=3, skip=(1,))
    np.testing.assert_array_equal(numpy(list(k.parameters())[1]), before)
    train_both(kopt, topt, k, t, steps=3, first=3)  # then it gets one, and its state starts


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    k, t = make_pair()
    kopt, topt = optim.SGD(k.parameters(), lr=0.1), torch.optim.SGD(t.parameters(), lr=0.1)
    backward_both(k, t, 0)
    kgrad, tgrad = k[0].weight.grad, t[0].weight.grad
    kopt.zero_grad(set_to_none=set_to_none)
    topt.zero_grad(set_to_none=set_to_none)
    for kp, tp in zip(k.parameters(), t.parameters()):
        assert (kp.grad is None) == (tp.grad is None) == set_to_none
        if not set_to_none:
            np.testing.assert_array_equal(numpy(kp.grad), numpy(tp.grad))
    if not set_to_none:  # zeroed in place: what held the gradient holds zeros
        np.testing.assert_array_equal(numpy(kgrad), numpy(tgrad))
        assert not numpy(kgrad).any()
    kopt.step()  # a zero gradient, or none, leaves plain SGD's weights
    topt.step()
    assert_same_params(k, t)


# ---------------------------------------------------------------- state dicts

def assert_same_state_dict(ksd, tsd):
    assert sorted(ksd) == sorted(tsd) == ["param_groups", "state"]
    assert len(ksd["param_groups"]) == len(tsd["param_groups"])
    for kg, tg in zip(ksd["param_groups"], tsd["param_groups"]):
        assert sorted(kg) == sorted(tg)
        for key, want in tg.items():
            assert type(kg[key]) is type(want) and kg[key] == want, key
    assert sorted(ksd["state"]) == sorted(tsd["state"])
    for index, entries in tsd["state"].items():
        assert list(ksd["state"][index]) == list(entries), index
        for key, want in entries.items():
            assert_close(ksd["state"][index][key], want, f"state[{index}][{key}]")


@pytest.mark.parametrize("name", KINDS)
def test_state_dict_has_torchs_layout(name):
    k, t = make_pair()
    kopt = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name]), lr=LR[name])
    topt = getattr(torch.optim, name)(groups_of(t, GROUP_OPTIONS[name]), lr=LR[name])
    assert_same_state_dict(kopt.state_dict(), topt.state_dict())
    train_both(kopt, topt, k, t, steps=3, skip=(3,))
    assert_same_state_dict(kopt.state_dict(), topt.state_dict())


def kiln_steps(k, opt, first, steps):
    """Steps on kiln alone, each from its own batch."""
    for step in range(first, first + steps):
        rng = np.random.default_rng(100 + step)
        x = kiln.tensor(rng.standard_normal((8, 5)).astype(np.float32))
        opt.zero_grad()
        nn.functional.cross_entropy(k(x), kiln.tensor(rng.integers(0, 3, 8))).backward()
        opt.step()


@pytest.mark.parametrize("name", KINDS)
def test_a_saved_optimizer_resumes_identically(name, tmp_path):
    k, _ = make_pair()
    kopt = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name]), lr=LR[name])
    kiln_steps(k, kopt, 0, 3)
    path = tmp_path / "checkpoint.pt"
    kiln.save({"model": k.state_dict(), "optimizer": kopt.state_dict()}, path)
    kiln_steps(k, kopt, 3, 4)

    resumed, _ = make_pair(seed=1)  # other weights: the checkpoint's replace them
    resumed_opt = getattr(optim, name)(groups_of(resumed, GROUP_OPTIONS[name]), lr=LR[name])
    checkpoint = kiln.load(path)
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    kiln_steps(resumed, resumed_opt, 3, 4)
    for got, want in zip(resumed.parameters(), k.parameters()):
        np.testing.assert_array_equal(numpy(got), numpy(want))
    for got, want in zip(resumed.parameters(), k.parameters()):
        for key, value in kopt.state[want].items():
            np.testing.assert_array_equal(numpy(resumed_opt.state[got][key]), numpy(value))


@pytest.mark.parametrize("name", KINDS)
def test_a_torch_optimizers_state_loads_into_kiln(name):
    k, t = make_pair()
    topt = getattr(torch.optim, name)(groups_of(t, GROUP_OPTIONS[name]), lr=LR[name])
    scratch = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name]), lr=LR[name])
    train_both(scratch, topt, k, t, steps=3)  # kiln's weights follow torch's
    kopt = getattr(optim, name)(groups_of(k, ({}, {})), lr=LR[name] / 2)
    kopt.load_state_dict(to_kiln(topt.state_dict()))
    assert_same_state(kopt, topt, k, t)
    for kg, tg in zip(kopt.param_groups, topt.param_groups):  # the options come too
        assert {n: v for n, v in kg.items() if n != "params"} == \
            {n: v for n, v in tg.items() if n != "params"}
    train_both(kopt, topt, k, t, steps=3, first=3)


def test_load_state_dict_copies_and_casts():
    k, t = make_pair()
    kopt = optim.Adam(k.parameters(), lr=0.01)
    topt = torch.optim.Adam(t.parameters(), lr=0.01)
    train_both(kopt, topt, k, t, steps=2)
    saved = to_kiln(topt.state_dict())
    for entries in saved["state"].values():
        entries["exp_avg"] = entries["exp_avg"].to(kiln.float64)
    kopt.load_state_dict(saved)
    entries = kopt.state[k[0].weight]
    assert entries["exp_avg"].dtype == kiln.float32  # cast to the parameter's dtype
    assert entries["step"].dtype == kiln.float32
    saved["state"][0]["exp_avg_sq"].fill_(7.0)
    assert float(entries["exp_avg_sq"].max()) != 7.0  # copied, not aliased
    train_both(kopt, topt, k, t, steps=2, first=2)


def test_load_state_dict_refuses_another_layout():
    k, t = make_pair()
    kopt = optim.SGD(k.parameters(), lr=0.1)
    topt = torch.optim.SGD(t.parameters(), lr=0.1)
    two_groups = optim.SGD(groups_of(k, ({}, {})), lr=0.1)
    for opt, lib in ((kopt, kiln), (topt, torch)):
        with pytest.raises(ValueError, match="different number of parameter groups"):
            opt.load_state_dict(to_kiln(two_groups.state_dict()) if lib is kiln
                                else {"state": {}, "param_groups": [
                                    {**topt.param_groups[0], "params": [0, 1]},
                                    {**topt.param_groups[0], "params": [2, 3]}]})
    short = kopt.state_dict()
    short["param_groups"][0]["params"] = [0, 1]
    with pytest.raises(ValueError, match="doesn't match the size"):
        kopt.load_state_dict(short)


@pytest.mark.parametrize("name", KINDS)
def test_repr_is_torchs(name):
    k, t = make_pair()
    kopt = getattr(optim, name)(groups_of(k, GROUP_OPTIONS[name]), lr=LR[name])
    topt = getattr(torch.optim, name)(groups_of(t, GROUP_OPTIONS[name]), lr=LR[name])
    assert repr(kopt) == repr(topt)


def test_named_parameters_keep_their_names():
    k, t = make_pair()
    kopt = optim.Adam(k.named_parameters(), lr=0.01)
    topt = torch.optim.Adam(t.named_parameters(), lr=0.01)
    assert kopt.param_groups[0]["param_names"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    train_both(kopt, topt, k, t, steps=2)
    assert_same_state_dict(kopt.state_dict(), topt.state_dict())
    resumed = optim.Adam(k.named_parameters(), lr=0.5)
    resumed.load_state_dict(kopt.state_dict())
    assert resumed.param_groups[0]["param_names"] == kopt.param_groups[0]["param_names"]
    with pytest.raises(ValueError, match="with/without names"):
        kopt.add_param_group({"params": [kiln.nn.Parameter(kiln.zeros(2))]})
