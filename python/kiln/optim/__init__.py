"""kiln.optim: SGD, Adam and AdamW (the C++ optimizers of kiln/optim, bound
in kiln._C) with torch.optim's signatures, and the LR schedulers."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, KeysView
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln.jit import _guards
from kiln.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]


def _param_list(params: Iterable[Tensor]) -> list[Tensor]:
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if isinstance(params[0], dict):
        raise NotImplementedError("kiln.optim: parameter groups as dicts are not supported "
                                  "yet; pass one iterable of parameters")
    for p in params:
        if not isinstance(p, _C.Tensor):
            raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                            f"{type(p).__name__}")
    return params


class _ParamGroup(dict[str, Any]):
    """param_groups[i]: reads and writes go to the C++ optimizer's options,
    so `group["lr"] = 0.1` changes the learning rate as in PyTorch."""

    def __init__(self, impl: Any, index: int) -> None:
        super().__init__()
        self._impl, self._index = impl, index

    def _options(self) -> dict[str, Any]:
        options = dict(self._impl.hyperparams(self._index))
        options["params"] = list(self._impl.params(self._index))
        return options

    def __getitem__(self, key: str) -> Any:
        return self._options()[key]

    def __setitem__(self, key: str, value: float) -> None:
        self._impl.set_option(key, float(value), self._index)
        _guards.bump()  # a compiled step holds every option but lr as a constant

    def keys(self) -> KeysView[str]:  # type: ignore[override]  # its options' keys
        return self._options().keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._options())

    def __repr__(self) -> str:
        return repr({k: v for k, v in self._options().items() if k != "params"})


class Optimizer:
    def __init__(self, impl: Any) -> None:  # impl: the C++ optimizer (kiln._C.SGD, ...)
        self._impl = impl

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = closure() if closure is not None else None
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._impl.zero_grad()

    @property
    def param_groups(self) -> list[_ParamGroup]:
        return [_ParamGroup(self._impl, i) for i in range(self._impl.num_param_groups())]

    def state_of(self, index: int) -> dict[str, Any]:
        """The state of the index-th parameter: {"step": n, buffer name: Tensor}."""
        state = dict(self._impl.state_buffers(index))
        state["step"] = self._impl.state_step(index)
        return state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key, value in sorted(group._options().items()):
                if key != "params":
                    lines.append(f"    {key}: {value}")
        return "\n".join(lines + [")"])


class SGD(Optimizer):
    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(_C.SGD(_param_list(params), float(lr), float(momentum),
                                float(dampening), float(weight_decay), bool(nesterov)))


class Adam(Optimizer):
    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False) -> None:
        super().__init__(_C.Adam(_param_list(params), float(lr), float(betas[0]),
                                 float(betas[1]), float(eps), float(weight_decay),
                                 bool(amsgrad)))


class AdamW(Optimizer):
    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(_C.AdamW(_param_list(params), float(lr), float(betas[0]),
                                  float(betas[1]), float(eps), float(weight_decay),
                                  bool(amsgrad)))
