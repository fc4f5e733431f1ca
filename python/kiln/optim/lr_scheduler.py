"""kiln.optim.lr_scheduler: StepLR and CosineAnnealingLR (the C++ ones)."""
from kiln import _C


class _Scheduler:
    def step(self):
        self._impl.step()

    def get_last_lr(self):
        return list(self._impl.get_last_lr())

    @property
    def last_epoch(self):
        return self._impl.last_epoch

    @property
    def base_lrs(self):
        return list(self._impl.base_lrs)


class StepLR(_Scheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        self.optimizer = optimizer
        self._impl = _C.StepLR(optimizer._impl, int(step_size), float(gamma))


class CosineAnnealingLR(_Scheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):
        self.optimizer = optimizer
        self._impl = _C.CosineAnnealingLR(optimizer._impl, int(T_max), float(eta_min))
