"""kiln.optim.lr_scheduler: StepLR and CosineAnnealingLR (the C++ ones)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kiln import _C

if TYPE_CHECKING:
    from kiln.optim import Optimizer


class _Scheduler:
    _impl: Any  # the C++ scheduler

    def step(self) -> None:
        self._impl.step()

    def get_last_lr(self) -> list[float]:
        return list(self._impl.get_last_lr())

    @property
    def last_epoch(self) -> int:
        return self._impl.last_epoch

    @property
    def base_lrs(self) -> list[float]:
        return list(self._impl.base_lrs)


class StepLR(_Scheduler):
    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        self.optimizer = optimizer
        self._impl = _C.StepLR(optimizer._impl, int(step_size), float(gamma))


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        self.optimizer = optimizer
        self._impl = _C.CosineAnnealingLR(optimizer._impl, int(T_max), float(eta_min))
