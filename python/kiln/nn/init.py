"""kiln.nn.init: parameter initialization with torch.nn.init's names,
arguments and formulas. The math is kiln/nn/init.h's, bound once; each
function fills the tensor in place without recording autograd history and
returns it. Random ones draw from `generator` (a kiln.Generator) or the
default generator (kiln.manual_seed)."""
from __future__ import annotations

import math
from typing import Any

from kiln import _C
from kiln._C import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]

_init = _C.nn.init


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    return float(_init.calculate_gain(nonlinearity, param))


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    fan_in, fan_out = _init._calculate_fan_in_and_fan_out(tensor)
    return int(fan_in), int(fan_out)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Any = None) -> Tensor:
    _init.uniform_(tensor, float(a), float(b), generator)
    return tensor


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Any = None) -> Tensor:
    _init.normal_(tensor, float(mean), float(std), generator)
    return tensor


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Any = None) -> Tensor:
    _init.trunc_normal_(tensor, float(mean), float(std), float(a), float(b), generator)
    return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    _init.constant_(tensor, float(val))
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    _init.ones_(tensor)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    _init.zeros_(tensor)
    return tensor


def eye_(tensor: Tensor) -> Tensor:
    _init.eye_(tensor)
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    _init.dirac_(tensor, int(groups))
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    _init.xavier_uniform_(tensor, float(gain), generator)
    return tensor


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    _init.xavier_normal_(tensor, float(gain), generator)
    return tensor


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    _init.kaiming_uniform_(tensor, float(a), mode, nonlinearity, generator)
    return tensor


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    _init.kaiming_normal_(tensor, float(a), mode, nonlinearity, generator)
    return tensor


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    _init.orthogonal_(tensor, float(gain), generator)
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,
            generator: Any = None) -> Tensor:
    """A 2-D tensor of N(0, std) values with ceil(sparsity * rows) zeros in
    each column, at random rows (torch.nn.init.sparse_)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros_per_column = int(math.ceil(sparsity * rows))
    from kiln._grad_mode import no_grad
    from kiln._random import randperm
    with no_grad():
        normal_(tensor, 0.0, std, generator)
        for col in range(cols):
            for row in randperm(rows, generator=generator)[:zeros_per_column].tolist():
                tensor[int(row), col] = 0.0
    return tensor
