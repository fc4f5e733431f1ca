"""The cyclic schedulers of kiln.optim.lr_scheduler, as torch's: CyclicLR,
CosineAnnealingWarmRestarts and OneCycleLR. CyclicLR and OneCycleLR move
the momentum (SGD, RMSprop, a user's optimizer with a "momentum" default)
or beta1 (those with "betas") against the learning rate."""
from __future__ import annotations

import math
import types
from collections.abc import Callable
from functools import partial
from typing import Any

from kiln.optim._lr_base import LRScheduler, _per_group, _set
from kiln.optim.optimizer import Optimizer

__all__ = ["CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR"]


def _set_momentum(group: dict[str, Any], value: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _cycled_momentum(optimizer: Optimizer) -> bool:
    """Whether the momentum a cyclic scheduler moves is beta1 (else it is
    "momentum"); refuses an optimizer with neither."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    """The lr cycles between base_lr and max_lr (up over step_size_up
    steps, down over step_size_down), each cycle's height scaled by the
    mode's function (triangular: 1; triangular2: halved each cycle;
    exp_range: gamma ** iteration) or by scale_fn; step() once per batch.
    With cycle_momentum, the momentum cycles between max_momentum and
    base_momentum the other way."""

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float],
                 max_lr: float | list[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.8,
                 max_momentum: float | list[float] = 0.9, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                _set(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_ref: Callable[[float], float]
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _cycled_momentum(optimizer)
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums,
                                            optimizer.param_groups, strict=True):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _constant_scale
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _halving_scale
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(_exponential_scale, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * scale
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for low, high, group in zip(self.base_momentums, self.max_momentums,
                                        self.optimizer.param_groups, strict=True):
                _set_momentum(group, high - (high - low) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """As the base's; of a custom scale_fn, only a callable object's
        attributes (as LambdaLR's lambdas)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _constant_scale(x: float) -> float:
    return 1.0


def _halving_scale(x: float) -> float:
    return 1 / (2.0 ** (x - 1))


def _exponential_scale(gamma: float, x: float) -> float:
    return gamma**x


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: a half cosine from base_lr to eta_min over T_i epochs, then a
    restart at base_lr with T_i *= T_mult. step(epoch) takes fractional
    epochs (epoch + batch / batches) for restarts within an epoch."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** (n)
        else:
            self.T_i = self.T_0
            self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._write_lrs(values)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr / div_factor to max_lr over
    pct_start of total_steps, then falls to initial_lr / final_div_factor
    (cos or linear); with cycle_momentum, the momentum (SGD) or beta1 (Adam)
    moves the other way between base_momentum and max_momentum."""

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.total_steps = self._total_steps(total_steps, epochs, steps_per_epoch)
        self._schedule_phases = self._phases(pct_start, three_phase)
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(max_momentums, base_momentums,
                                            optimizer.param_groups):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _total_steps(total_steps: int | None, epochs: int | None,
                     steps_per_epoch: int | None) -> int:
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            return total_steps
        if epochs is None or steps_per_epoch is None:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not isinstance(epochs, int) or epochs <= 0:
            raise ValueError(f"Expected positive integer epochs, but got {epochs}")
        if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
            raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                             f"{steps_per_epoch}")
        return epochs * steps_per_epoch

    def _phases(self, pct_start: float, three_phase: bool) -> list[dict[str, Any]]:
        def phase(end_step: float, lrs: tuple[str, str],
                  momenta: tuple[str, str]) -> dict[str, Any]:
            return {"end_step": end_step, "start_lr": lrs[0], "end_lr": lrs[1],
                    "start_momentum": momenta[0], "end_momentum": momenta[1]}

        up = float(pct_start * self.total_steps) - 1
        rise = ("max_momentum", "base_momentum")
        if three_phase:
            return [phase(up, ("initial_lr", "max_lr"), rise),
                    phase(float(2 * pct_start * self.total_steps) - 2, ("max_lr", "initial_lr"),
                          ("base_momentum", "max_momentum")),
                    phase(self.total_steps - 1, ("initial_lr", "min_lr"),
                          ("max_momentum", "max_momentum"))]
        return [phase(up, ("initial_lr", "max_lr"), rise),
                phase(self.total_steps - 1, ("max_lr", "min_lr"),
                      ("base_momentum", "max_momentum"))]

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        _set_momentum(group, value, self.use_beta1)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            last = len(self._schedule_phases) - 1
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                               group[phase["end_momentum"]],
                                                               pct))
                    break
                start_step = phase["end_step"]
        return lrs
