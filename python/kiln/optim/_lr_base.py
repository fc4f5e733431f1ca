"""The base of kiln.optim.lr_scheduler's schedulers (LRScheduler, as
torch's) and what they share: reading and writing one option of every
param group, and per-group arguments."""
from __future__ import annotations

import warnings
from typing import Any

from kiln._C import Tensor
from kiln.optim.optimizer import Optimizer

__all__ = ["LRScheduler"]


def _lrs(optimizer: Optimizer, key: str = "lr") -> list[Any]:
    """group[key] of every group (tensors copied, so none aliases a group's)."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key]
            for g in optimizer.param_groups]


def _set(group: dict[str, Any], key: str, value: Any) -> None:
    """group[key] = value; a tensor there is written in place."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """Base class: construction records each group's lr as "initial_lr"
    (base_lrs) and takes step 0; each step() advances last_epoch and writes
    get_lr() into the groups. Subclasses implement get_lr(), which warns
    when called outside step() (as torch's: it is the recursive formula of
    the next step, not the current lr, which get_last_lr() gives)."""

    _is_initial = False
    _get_lr_called_within_step = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial_lr = group["lr"]
                group.setdefault("initial_lr",
                                 initial_lr.clone() if isinstance(initial_lr, Tensor)
                                 else initial_lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming scheduler with last_epoch >= 0.\n"
                                   "This typically happens when:\n"
                                   "1. You're trying to resume training from a checkpoint "
                                   "but haven't properly loaded the optimizer state\n"
                                   "2. You're using last_epoch >= 0 for a fresh training run "
                                   "(not recommended)")
        self.base_lrs: list[Any] = _lrs(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The lr of each group after the latest step (or construction)."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: "
                          "call them in the opposite order, or the first value of the "
                          "schedule is skipped", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated; the "
                          "closed form is used where there is one", UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: float | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch  # type: ignore[assignment]
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._write_lrs(values)

    def _write_lrs(self, values: list[Any]) -> None:
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set(group, "lr", lr)
        self._last_lr: list[Any] = _lrs(self.optimizer)

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=3)


# torch's old name, which programs still subclass
_LRScheduler = LRScheduler
