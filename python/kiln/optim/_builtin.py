"""The built-in optimizers: torch.optim's signatures, param_groups and state
over the C++ updates of kiln/optim/functional.h (kiln._C.optim), where each
algorithm's math is written once (the C++ optimizer classes call it too).

foreach, fused, capturable and differentiable are accepted, kept in the
groups as torch keeps them, and ignored: every update is the single-tensor
algorithm, and a compiled step (kiln.compile) is always "capturable"."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln.optim.optimizer import Optimizer, _ParamGroup

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
           "RAdam"]

Params = Iterable[Any]  # tensors, (name, tensor) pairs or group dicts


def _number(value: Any) -> float:
    return float(value.item()) if isinstance(value, Tensor) else float(value)


def _tensor_entries(state: dict[str, Any] | None) -> dict[str, Tensor]:
    if not state:
        return {}
    return {k: v for k, v in state.items() if isinstance(v, Tensor)}


def _lr_tensor(group: dict[str, Any], value: float) -> Tensor:
    """The float64 0-d tensor a compiled step reads as the group's learning
    rate, made outside the recording. A group of Optimizer.param_groups
    keeps it (assigning its lr writes it); any other dict gets a new one per
    recording, its lr being guarded instead."""
    from kiln import float64, tensor
    from kiln.optim.optimizer import _fill
    held = group._lr_tensor if isinstance(group, _ParamGroup) else None
    if held is None:
        with _C.optim.outside_recording():
            held = tensor(value, dtype=float64)
        if isinstance(group, _ParamGroup):
            group._lr_tensor = held
    else:
        _fill(held, value)
    return held


class _Functional(Optimizer):
    """An optimizer whose per-parameter update is kiln._C.optim's `_kind`.
    `_options` names the group options it hands over (betas as beta1 and
    beta2; flags as 0 or 1)."""

    _kind = ""
    _options: tuple[str, ...] = ()
    _state_outside_recording = True

    def _hyperparams(self, group: dict[str, Any]) -> dict[str, float]:
        out = {}
        for key in self._options:
            value = group[key]
            if key == "betas":
                out["beta1"], out["beta2"] = _number(value[0]), _number(value[1])
            else:
                out[key] = _number(value)
        return out

    def _check_group(self, group: dict[str, Any]) -> None:
        options = self._hyperparams(group)
        options["lr"] = _number(group["lr"])
        _C.optim.complete_options(self._kind, options,
                                  f"in parameter group {len(self.param_groups)}")

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        from kiln import float32, tensor
        for entries in self.state.values():  # a number where torch's old dicts held one
            for key in ("step", "mu_product"):
                if key in entries and not isinstance(entries[key], Tensor):
                    entries[key] = tensor(float(entries[key]), dtype=float32)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            from kiln import enable_grad
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        params, grads = [], []
        for p in group["params"]:
            grad = p.grad
            if grad is not None:
                params.append(p)
                grads.append(grad)
        if not params:
            return
        states = [_tensor_entries(self.state.get(p)) for p in params]
        lr = group["lr"]
        lr_tensor = None
        if _C.jit.is_recording():  # compiling a step: it reads the lr on every call
            lr_tensor = lr if isinstance(lr, Tensor) else _lr_tensor(group, float(lr))
            lr_value = 0.0 if isinstance(lr, Tensor) else float(lr)
        else:
            lr_value = _number(lr)
        updated = _C.optim.update_parameters(self._kind, params, grads, states,
                                             self._hyperparams(group), lr_value, lr_tensor)
        for p, entries in zip(params, updated):
            self._keep_state(p, entries)

    def _keep_state(self, param: Tensor, entries: dict[str, Tensor]) -> None:
        """Stores what the C++ update made or updated for `param`; new entries
        go in torch's order ("step" first), as a state dict lists them."""
        if not entries:
            return
        order = _C.optim.state_names(self._kind)
        state = self.state[param]
        for name in sorted(entries, key=lambda n: order.index(n) if n in order else len(order)):
            state[name] = entries[name]


def _check_lr(lr: Any, foreach: bool | None = None, capturable: bool = True) -> None:
    """torch's checks of a tensor learning rate (its foreach kernels take
    only a number, unless capturable)."""
    if not isinstance(lr, Tensor):
        return
    if foreach and not capturable:
        raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
    if lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def _check_fused(fused: bool | None, foreach: bool | None, differentiable: bool) -> None:
    """torch's refusals of fused=True with the flags its fused kernels lack
    (kiln runs one algorithm for all, but a program torch refuses is not
    one that works here)."""
    if not fused:
        return
    if differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


class SGD(_Functional):
    _kind = "SGD"
    _options = ("momentum", "dampening", "weight_decay", "nesterov", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)


class Adam(_Functional):
    _kind = "Adam"
    _options = ("betas", "eps", "weight_decay", "amsgrad", "maximize", "decoupled_weight_decay")

    def __init__(self, params: Params, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        _check_lr(lr, foreach, capturable)
        if not (all(isinstance(b, float) for b in betas)
                or all(isinstance(b, Tensor) for b in betas)):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = (_number(betas[0]), _number(betas[1]))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)


class AdamW(Adam):
    _kind = "AdamW"

    def __init__(self, params: Params, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class RMSprop(_Functional):
    _kind = "RMSprop"
    _options = ("alpha", "eps", "weight_decay", "momentum", "centered", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)


class Adagrad(_Functional):
    _kind = "Adagrad"
    _options = ("lr_decay", "eps", "weight_decay", "initial_accumulator_value", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        for group in self.param_groups:  # torch makes Adagrad's state here
            for p in group["params"]:
                self._init_sum(p, group)

    def _init_sum(self, param: Tensor, group: dict[str, Any]) -> None:
        """torch starts every "sum" at the constructor's (the defaults')
        initial_accumulator_value, whatever a group says: so does kiln, so
        that the same program trains the same way."""
        options = self._hyperparams(group)
        options["initial_accumulator_value"] = _number(self.defaults["initial_accumulator_value"])
        self._keep_state(param, _C.optim.init_state(self._kind, param, {}, options))

    def _update_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:  # those of a group added since __init__
            if p.grad is not None and not self.state.get(p):
                self._init_sum(p, group)
        super()._update_group(group)


class Adadelta(_Functional):
    _kind = "Adadelta"
    _options = ("rho", "eps", "weight_decay", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)


class Adamax(_Functional):
    _kind = "Adamax"
    _options = ("betas", "eps", "weight_decay", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)


class NAdam(_Functional):
    _kind = "NAdam"
    _options = ("betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay",
                "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)


class RAdam(_Functional):
    _kind = "RAdam"
    _options = ("betas", "eps", "weight_decay", "decoupled_weight_decay", "maximize")

    def __init__(self, params: Params, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)
