"""kiln.optim, as torch.optim: the Optimizer base class (param_groups as
dicts, state, state dicts, hooks) for the built-in optimizers and for those
users write, and the LR schedulers.

The built-in optimizers' per-parameter math is the C++ of
kiln/optim/functional.h (kiln._C.optim), which kiln's C++ optimizer classes
call too; each Python class keeps torch's signature, groups and state."""
from kiln._missing import module_getattr
from kiln.optim import lr_scheduler
from kiln.optim._builtin import (
    SGD,
    Adadelta,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    NAdam,
    RAdam,
    RMSprop,
)
from kiln.optim.optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "lr_scheduler"]

__getattr__ = module_getattr("kiln.optim", "torch.optim")
