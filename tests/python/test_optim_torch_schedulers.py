"""kiln.optim.lr_scheduler against torch.optim.lr_scheduler 2.13: each
scheduler over two param groups (their own lrs) steps ~20 times beside
torch's, and the learning rates (get_last_lr() and each group's "lr", and
the momentum or beta1 the cyclic ones move) must equal torch's to the last
bit. Then resuming (last_epoch, state_dict/load_state_dict), the
deprecated step(epoch), ReduceLROnPlateau's modes, the composites, a user's
optimizer subclass, and the errors bad arguments raise."""
import warnings

import pytest
import torch

import kiln
from test_optim_torch_api import assert_same_error, momentum_sgd_class

STEPS = 20
K, T = kiln.optim.lr_scheduler, torch.optim.lr_scheduler


def optimizers(kind="SGD", lrs=(0.1, 0.5), **kwargs):
    """The same optimizer in kiln and torch, over two groups (lrs[0] the
    default, lrs[1] the second group's)."""
    def make(lib):
        cls = momentum_sgd_class(lib) if kind == "subclass" else getattr(lib.optim, kind)
        p, q = lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(3))
        return cls([{"params": [p]}, {"params": [q], "lr": lrs[1]}], lr=lrs[0], **kwargs)
    return make(kiln), make(torch)


def values(opt, sched=None):
    """What a schedule sets: each group's lr, momentum and beta1, and the
    scheduler's last lrs."""
    out = [(g["lr"], g.get("momentum"), g["betas"][0] if "betas" in g else None)
           for g in opt.param_groups]
    return out, (sched.get_last_lr() if sched is not None else None)


def step_both(kopt, topt, ksched, tsched, steps=STEPS, metrics=None):
    for i in range(steps):
        kopt.step()
        topt.step()
        if metrics is None:
            ksched.step()
            tsched.step()
        else:
            ksched.step(metrics[i])
            tsched.step(metrics[i])
        assert values(kopt, ksched) == values(topt, tsched), f"step {i}"
        assert getattr(ksched, "last_epoch", None) == getattr(tsched, "last_epoch", None)


def lambda_decay(epoch):
    return 0.9 ** epoch


class Warmup:
    """A callable object: its attributes go in the state dict (a
    function's do not)."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.steps)


SCHEDULES = {
    "LambdaLR": lambda S, o: S.LambdaLR(o, lambda_decay),
    "LambdaLR-per-group": lambda S, o: S.LambdaLR(o, [lambda_decay, Warmup(5)]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95),
    "MultiplicativeLR-per-group": lambda S, o: S.MultiplicativeLR(
        o, [lambda e: 0.9, lambda e: 1.0 if e % 3 else 0.5]),
    "StepLR": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=7),
    "LinearLR-down": lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.1,
                                             total_iters=12),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.85),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=6, eta_min=0.01),
    "CosineAnnealingLR-long": lambda S, o: S.CosineAnnealingLR(o, T_max=30),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=4),
    "CosineAnnealingWarmRestarts-mult": lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01),
    "CyclicLR": lambda S, o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "CyclicLR-triangular2": lambda S, o: S.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=2,
        mode="triangular2"),
    "CyclicLR-exp_range": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                  mode="exp_range", gamma=0.9),
    "CyclicLR-scale_fn": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                 scale_fn=lambda x: 1 / x, scale_mode="cycle",
                                                 cycle_momentum=False),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=STEPS + 1),
    "OneCycleLR-linear": lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=STEPS + 1,
                                                   anneal_strategy="linear", pct_start=0.4),
    "OneCycleLR-three_phase": lambda S, o: S.OneCycleLR(
        o, max_lr=0.5, epochs=3, steps_per_epoch=7, three_phase=True, div_factor=10.0,
        final_div_factor=100.0, base_momentum=[0.8, 0.7], max_momentum=0.9),
    "OneCycleLR-no-momentum": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=STEPS + 1,
                                                        cycle_momentum=False),
    "SequentialLR": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=4), S.ExponentialLR(o, gamma=0.9)],
        milestones=[4]),
    "SequentialLR-three": lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.CosineAnnealingLR(o, T_max=5),
            S.StepLR(o, 2, gamma=0.5)], milestones=[3, 9]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=4), S.ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler-optimizer": lambda S, o: S.ChainedScheduler(
        [S.LinearLR(o, 0.5, total_iters=3), S.MultiStepLR(o, [4, 8])], optimizer=o),
}
OPTIMIZERS = {"SGD": dict(momentum=0.9), "Adam": {}}


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_lr_sequence_equals_torchs(name, kind):
    kopt, topt = optimizers(kind, **OPTIMIZERS[kind])
    ksched, tsched = SCHEDULES[name](K, kopt), SCHEDULES[name](T, topt)
    assert type(ksched).__name__ == type(tsched).__name__
    assert values(kopt, ksched) == values(topt, tsched)
    step_both(kopt, topt, ksched, tsched)


def state_entries(sched):
    """A scheduler's state dict as plain values (the members' of a composite
    nested), for comparing kiln's with torch's."""
    state = dict(sched.state_dict())
    if "_schedulers" in state:
        state["_schedulers"] = [plain(s) for s in state["_schedulers"]]
    return plain(state)


def plain(state):
    return {k: (dict(v) if k == "milestones" else v) for k, v in state.items()
            if k not in ("_scale_fn_ref",)}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_equals_torchs_and_resumes(name):
    kopt, topt = optimizers("SGD", momentum=0.9)
    ksched, tsched = SCHEDULES[name](K, kopt), SCHEDULES[name](T, topt)
    step_both(kopt, topt, ksched, tsched, steps=7)
    assert state_entries(ksched) == state_entries(tsched)

    resumed_opt, _ = optimizers("SGD", momentum=0.9)
    resumed = SCHEDULES[name](K, resumed_opt)  # as torch's docs: make, then load
    resumed_opt.load_state_dict(kopt.state_dict())
    resumed.load_state_dict(ksched.state_dict())
    step_both(resumed_opt, topt, resumed, tsched, steps=STEPS - 7)


RESUMED = {  # made as a checkpoint's program makes them, 5 epochs in
    "StepLR": lambda S, o: S.StepLR(o, 3, gamma=0.5, last_epoch=5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, [2, 7, 9], gamma=0.3, last_epoch=5),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=8, last_epoch=5),
    "LinearLR": lambda S, o: S.LinearLR(o, 0.25, 0.9, total_iters=9, last_epoch=5),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, 0.85, last_epoch=5),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=12, power=2.0, last_epoch=5),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=8, eta_min=0.01,
                                                          last_epoch=5),
    "LambdaLR": lambda S, o: S.LambdaLR(o, lambda_decay, last_epoch=5),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9, last_epoch=5),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, last_epoch=5),
    "CyclicLR": lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=4, last_epoch=5),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=30, last_epoch=5),
}


@pytest.mark.parametrize("name", list(RESUMED))
def test_constructing_with_last_epoch(name):
    kopt, topt = optimizers("SGD", momentum=0.9)
    for opt in (kopt, topt):
        for group in opt.param_groups:  # what a first construction left in the groups
            group.update(initial_lr=group["lr"] * 2, max_lr=1.0, min_lr=1e-4,
                         max_momentum=0.95, base_momentum=0.85)
    ksched, tsched = RESUMED[name](K, kopt), RESUMED[name](T, topt)
    assert ksched.last_epoch == tsched.last_epoch
    assert values(kopt, ksched) == values(topt, tsched)
    step_both(kopt, topt, ksched, tsched, steps=10)


def test_resuming_without_initial_lr_is_a_key_error():
    kopt, topt = optimizers()
    assert_same_error(lambda: T.StepLR(topt, 2, last_epoch=3),
                      lambda: K.StepLR(kopt, 2, last_epoch=3))


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "LinearLR", "PolynomialLR", "ConstantLR", "LambdaLR"])
def test_the_deprecated_epoch_argument(name):
    kopt, topt = optimizers()
    ksched, tsched = SCHEDULES[name](K, kopt), SCHEDULES[name](T, topt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (3, 4, 9, 2, 15):
            kopt.step()
            topt.step()
            ksched.step(epoch)
            tsched.step(epoch)
            assert values(kopt, ksched) == values(topt, tsched), epoch


def test_cosine_warm_restarts_with_fractional_epochs():
    kopt, topt = optimizers()
    ksched = K.CosineAnnealingWarmRestarts(kopt, T_0=3, T_mult=2, eta_min=0.001)
    tsched = T.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2, eta_min=0.001)
    for epoch in range(8):
        for batch in range(4):
            kopt.step()
            topt.step()
            ksched.step(epoch + batch / 4)
            tsched.step(epoch + batch / 4)
            assert values(kopt, ksched) == values(topt, tsched)
            assert (ksched.T_cur, ksched.T_i) == (tsched.T_cur, tsched.T_i)


def test_get_lr_outside_step_warns_as_torchs():
    kopt, topt = optimizers()
    for sched in (K.StepLR(kopt, 2), T.StepLR(topt, 2)):
        with pytest.warns(UserWarning, match="use `get_last_lr\\(\\)`"):
            sched.get_lr()


def test_stepping_the_scheduler_first_warns_as_torchs():
    for lib, S in ((kiln, K), (torch, T)):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        sched = S.StepLR(opt, 2)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            sched.step()


# ---------------------------------------------------------------- plateau

METRICS = [1.0, 0.9, 0.95, 0.94, 0.8999, 0.91, 0.92, 0.93, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75,
           0.69999, 0.76, 0.5, 0.77, 0.78, 0.79, 0.8, 0.81]
PLATEAUS = [
    dict(), dict(patience=2), dict(patience=1, factor=0.5, cooldown=2),
    dict(patience=0, threshold=0.05), dict(patience=1, threshold=0.05, threshold_mode="abs"),
    dict(patience=0, factor=0.5, min_lr=0.02), dict(patience=0, factor=0.5, min_lr=[0.03, 0.2]),
    dict(patience=0, factor=0.9, eps=0.02), dict(mode="max", patience=1),
    dict(mode="max", patience=1, threshold_mode="abs", threshold=0.01, cooldown=1),
]


@pytest.mark.parametrize("kwargs", PLATEAUS, ids=[str(p) for p in PLATEAUS])
@pytest.mark.parametrize("kind", ["SGD", "Adam", "subclass"])
def test_reduce_lr_on_plateau(kwargs, kind):
    kopt, topt = optimizers(kind)
    ksched, tsched = K.ReduceLROnPlateau(kopt, **kwargs), T.ReduceLROnPlateau(topt, **kwargs)
    metrics = METRICS if kwargs.get("mode") != "max" else [-m for m in METRICS]
    for i, metric in enumerate(metrics):
        kopt.step()
        topt.step()
        # a 0-d (float32) tensor, too
        ksched.step(kiln.tensor(metric) if i % 2 else metric)
        tsched.step(torch.tensor(metric) if i % 2 else metric)
        assert values(kopt, ksched) == values(topt, tsched), i
        for name in ("best", "num_bad_epochs", "cooldown_counter", "last_epoch"):
            assert getattr(ksched, name) == getattr(tsched, name), (i, name)
    assert state_entries(ksched) == state_entries(tsched)


def test_reduce_lr_on_plateau_resumes_from_its_state_dict():
    kopt, topt = optimizers()
    ksched = K.ReduceLROnPlateau(kopt, patience=1, cooldown=1)
    tsched = T.ReduceLROnPlateau(topt, patience=1, cooldown=1)
    step_both(kopt, topt, ksched, tsched, steps=8, metrics=METRICS)
    resumed_opt, _ = optimizers()
    resumed = K.ReduceLROnPlateau(resumed_opt, mode="max")  # the state says min
    resumed_opt.load_state_dict(kopt.state_dict())
    resumed.load_state_dict(ksched.state_dict())
    step_both(resumed_opt, topt, resumed, tsched, steps=len(METRICS) - 8, metrics=METRICS[8:])


def test_reduce_lr_on_plateau_after_add_param_group():
    kopt, topt = optimizers()
    ksched = K.ReduceLROnPlateau(kopt, patience=0, min_lr=0.01)
    tsched = T.ReduceLROnPlateau(topt, patience=0, min_lr=0.01)
    step_both(kopt, topt, ksched, tsched, steps=3, metrics=METRICS)
    kopt.add_param_group({"params": [kiln.nn.Parameter(kiln.zeros(1))], "lr": 0.3})
    topt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.3})
    step_both(kopt, topt, ksched, tsched, steps=8, metrics=METRICS[3:])


# ---------------------------------------------------------------- user optimizers

@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR",
                                  "SequentialLR", "LambdaLR-per-group"])
def test_schedulers_drive_a_user_subclass(name):
    kopt, topt = optimizers("subclass")
    ksched, tsched = SCHEDULES[name](K, kopt), SCHEDULES[name](T, topt)
    assert values(kopt, ksched) == values(topt, tsched)
    step_both(kopt, topt, ksched, tsched)


def test_a_scheduler_changes_what_the_optimizer_steps_with():
    kopt, topt = optimizers("SGD")
    ksched, tsched = K.StepLR(kopt, 1, gamma=0.5), T.StepLR(topt, 1, gamma=0.5)
    for _step in range(4):
        for opt in (kopt, topt):
            for p in (opt.param_groups[0]["params"][0], opt.param_groups[1]["params"][0]):
                p.grad = p.detach() * 0 + 1
        kopt.step()
        topt.step()
        ksched.step()
        tsched.step()
        for kg, tg in zip(kopt.param_groups, topt.param_groups):
            assert kg["params"][0].detach().numpy().tolist() == \
                pytest.approx(tg["params"][0].detach().numpy().tolist(), rel=1e-6)


# ---------------------------------------------------------------- errors

BAD = {
    "not-an-optimizer": lambda S, o: S.StepLR(object(), 2),
    "lambda-count": lambda S, o: S.LambdaLR(o, [lambda e: 1.0]),
    "constant-factor": lambda S, o: S.ConstantLR(o, factor=1.5),
    "linear-start": lambda S, o: S.LinearLR(o, start_factor=0.0),
    "linear-end": lambda S, o: S.LinearLR(o, end_factor=1.5),
    "plateau-factor": lambda S, o: S.ReduceLROnPlateau(o, factor=1.0),
    "plateau-mode": lambda S, o: S.ReduceLROnPlateau(o, mode="up"),
    "plateau-threshold-mode": lambda S, o: S.ReduceLROnPlateau(o, threshold_mode="pct"),
    "plateau-min-lrs": lambda S, o: S.ReduceLROnPlateau(o, min_lr=[0.1]),
    "onecycle-total": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=0),
    "onecycle-none": lambda S, o: S.OneCycleLR(o, 1.0),
    "onecycle-epochs": lambda S, o: S.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3),
    "onecycle-pct": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=10, pct_start=1.5),
    "onecycle-anneal": lambda S, o: S.OneCycleLR(o, 1.0, total_steps=10,
                                                 anneal_strategy="exp"),
    "onecycle-max-lrs": lambda S, o: S.OneCycleLR(o, [1.0], total_steps=10),
    "cyclic-mode": lambda S, o: S.CyclicLR(o, 0.01, 0.1, mode="sawtooth"),
    "warm-restarts-T0": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=0),
    "warm-restarts-mult": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    "sequential-milestones": lambda S, o: S.SequentialLR(o, [S.StepLR(o, 2)], milestones=[3]),
    "sequential-empty": lambda S, o: S.SequentialLR(o, [], milestones=[]),
    "sequential-plateau": lambda S, o: S.SequentialLR(
        o, [S.StepLR(o, 2), S.ReduceLROnPlateau(o)], milestones=[3]),
    "chained-empty": lambda S, o: S.ChainedScheduler([]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_torchs_errors(case):
    kopt, topt = optimizers()
    assert_same_error(lambda: BAD[case](T, topt), lambda: BAD[case](K, kopt))


def test_cycling_momentum_needs_an_optimizer_with_one():
    def make(lib, S, cls):
        opt = lib.optim.Adagrad([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        return lambda: cls(S, opt)
    for cls in (lambda S, o: S.OneCycleLR(o, 1.0, total_steps=5),
                lambda S, o: S.CyclicLR(o, 0.01, 0.1)):
        assert_same_error(make(torch, T, cls), make(kiln, K, cls))


def test_one_cycle_past_its_total_steps():
    kopt, topt = optimizers()
    ksched = K.OneCycleLR(kopt, 1.0, total_steps=3)
    tsched = T.OneCycleLR(topt, 1.0, total_steps=3)
    step_both(kopt, topt, ksched, tsched, steps=3)
    assert_same_error(tsched.step, ksched.step)


def warmup_class(S):
    """A scheduler written by a user, as torch's docs show: get_lr() from
    base_lrs and last_epoch."""

    class LinearWarmup(S.LRScheduler):
        def __init__(self, optimizer, warmup, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            scale = min(1.0, (self.last_epoch + 1) / self.warmup)
            return [base_lr * scale for base_lr in self.base_lrs]

    return LinearWarmup


def test_a_user_scheduler_subclass():
    kopt, topt = optimizers("Adam")
    ksched, tsched = warmup_class(K)(kopt, 6), warmup_class(T)(topt, 6)
    assert values(kopt, ksched) == values(topt, tsched)
    step_both(kopt, topt, ksched, tsched, steps=10)
    assert state_entries(ksched) == state_entries(tsched)


def test_a_tensor_learning_rate_is_scheduled_in_place():
    def make(lib):
        return lib.optim.Adam([lib.nn.Parameter(lib.zeros(2))], lr=lib.tensor(0.01))
    kopt, topt = make(kiln), make(torch)
    klr, tlr = kopt.param_groups[0]["lr"], topt.param_groups[0]["lr"]
    ksched = K.CosineAnnealingLR(kopt, T_max=5)
    tsched = T.CosineAnnealingLR(topt, T_max=5)
    for _ in range(7):
        kopt.step()
        topt.step()
        ksched.step()
        tsched.step()
        assert isinstance(ksched.get_last_lr()[0], kiln.Tensor)
        assert float(ksched.get_last_lr()[0]) == float(tsched.get_last_lr()[0])
        assert float(klr) == float(tlr)  # the group's tensor, written in place
