"""kiln.optim.Optimizer: torch.optim.Optimizer's base class, for the built-in
optimizers and for those users write.

    class MySGD(kiln.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        @kiln.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])

param_groups is a list of dicts (params plus options by torch's names),
state a defaultdict keyed by parameter, and state_dict() has torch's
layout (state keyed by parameter index, groups with 'params' as indices).

In a compiled training step (kiln.compile of forward, backward and step),
the options are constants of the graph, guarded (kiln/jit/_guards.py): each
group is a dict that bumps the guards' version when assigned, so changing
an option records the step again. The built-in optimizers read the learning
rate as a tensor that assigning group["lr"] keeps current, so a scheduler
does not record again; a user's step that reads group["lr"] as a number
records again when it changes (correct, if slower). State a step makes
while a compiled step records is reported: the compiled calls would not
keep it (make it in __init__, or take one eager step first)."""
from __future__ import annotations

import functools
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any, Self, TypeVar, cast

from kiln import _C
from kiln._C import Tensor

__all__ = ["Optimizer", "RemovableHandle", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook", "required"]

F = TypeVar("F", bound=Callable[..., Any])


class _RequiredParameter:
    """A default no group may leave out (torch.optim.optimizer.required)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


class RemovableHandle:
    """What register_*_hook returns: handle.remove() unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: OrderedDict[int, Any]) -> None:
        self._hooks = weakref.ref(hooks)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


_global_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
_global_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()


def register_optimizer_step_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """A hook(optimizer, args, kwargs) every optimizer runs before step()."""
    handle = RemovableHandle(_global_pre_hooks)
    _global_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """A hook(optimizer, args, kwargs) every optimizer runs after step()."""
    handle = RemovableHandle(_global_post_hooks)
    _global_post_hooks[handle.id] = hook
    return handle


def _bump_guards() -> None:
    from kiln.jit import _guards
    _guards.bump()


class _ParamGroup(dict[Any, Any]):
    """One of Optimizer.param_groups: a dict that tells compiled steps when
    it changes. Each assignment bumps the guards' version (a compiled step
    holds the options as constants, and records again when one changed), and
    an assigned lr goes into the tensor the built-in optimizers' compiled
    steps read (_lr_tensor, made by the first one)."""

    __slots__ = ("_lr_tensor",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lr_tensor: Tensor | None = None

    def _changed(self) -> None:
        _bump_guards()
        lr = self.get("lr")
        if self._lr_tensor is not None and lr is not None and not isinstance(lr, Tensor):
            _fill(self._lr_tensor, float(lr))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        self._changed()
        return value

    def pop(self, key: Any, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._changed()
        return value

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        self._changed()
        return item

    def clear(self) -> None:
        super().clear()
        self._changed()

    def __ior__(self, other: Any) -> Self:  # type: ignore[misc]
        self.update(other)
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # copies and pickles hold no lr tensor
        return (_ParamGroup, (dict(self),))


def _fill(t: Tensor, value: float) -> None:
    """Writes a 0-d tensor in place, outside any recording (a compiled step
    reads it by reference)."""
    from kiln._grad_mode import no_grad
    with _C.optim.outside_recording(), no_grad():
        t.fill_(value)


def _hooked(step: F) -> F:
    """step() with the step hooks around it (torch's profile_hook_step), and
    a check of the state a compiled step records."""

    @functools.wraps(step)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # As torch's, the hooks see the optimizer in `args` too (and a pre
        # hook's new args must hold it).
        self: Optimizer = args[0]
        for pre_hook in chain(_global_pre_hooks.values(),
                              self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is None:
                continue
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(f"{step} must return None or a tuple of (new_args, "
                                   f"new_kwargs), but got {result}.")
            args, kwargs = result
        self._opt_called = True  # LRScheduler warns when it steps first
        watch = None
        if _C.jit.is_recording() and not type(self)._state_outside_recording:
            watch = _StateWatch(self)
        out = step(*args, **kwargs)
        if watch is not None:
            watch.report()
        for post_hook in chain(self._optimizer_step_post_hooks.values(),
                               _global_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True  # type: ignore[attr-defined]
    return cast(F, wrapper)


class _StateWatch:
    """What a user's step() did to the state while a compiled step records:
    a tensor it made or replaced holds one run's value (the compiled calls
    update the graph's own, never that one), and a number it changed is not
    changed again. Both are reported, at the user's line."""

    def __init__(self, opt: Optimizer) -> None:
        self.opt = opt
        self.before = self._snapshot()

    def _snapshot(self) -> dict[tuple[int, Any], Any]:
        out = {}
        for param, entries in self.opt.state.items():
            if not isinstance(entries, dict):
                continue
            for key, value in entries.items():
                out[(id(param), key)] = id(value) if isinstance(value, Tensor) else value
        return out

    def report(self) -> None:
        from kiln.jit import _guards
        changed = [entry[1] for entry, value in self._snapshot().items()
                   if entry not in self.before or not _guards.same(self.before[entry], value)]
        if not changed:
            return
        names = ", ".join(sorted({repr(k) for k in changed}))
        _guards.report(
            f"{type(self.opt).__name__}.step() made or replaced optimizer state ({names}) "
            "while a compiled step recorded: the compiled calls do not update it; make the "
            "state in __init__ (or take one eager step first) and update its tensors in place",
            strict=False)


class Optimizer:
    """Base class for all optimizers: params is an iterable of tensors or of
    dicts (each a parameter group: "params" and the options it overrides),
    defaults the options every group gets unless it sets its own."""

    # Whether step() makes its state outside a compiled step's recording (the
    # built-in optimizers do); a user's step() is watched for state it makes.
    _state_outside_recording = False
    _opt_called = False  # set by the first step(); LRScheduler warns when it steps first

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict[int, Callable[..., Any]] = \
            OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict[int, Callable[..., Any]] = \
            OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict[int, Callable[..., Any]] = \
            OrderedDict()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}")
        self.state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(cast(dict, param_group))

    def _patch_step_function(self) -> None:
        cls = type(self)
        if not getattr(cls.step, "hooked", False):
            cls.step = _hooked(cls.step)  # type: ignore[method-assign]

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        self.param_groups = [g if isinstance(g, _ParamGroup) else _ParamGroup(g)
                             for g in self.param_groups]
        self._patch_step_function()
        _bump_guards()  # compiled steps bound the state and groups this replaces

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    # -- hooks ------------------------------------------------------------
    def _register(self, hooks: OrderedDict[int, Any], hook: Callable[..., Any],
                  prepend: bool = False) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs),
        run before each step()."""
        return self._register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """hook(optimizer, args, kwargs), run after each step()."""
        return self._register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable[..., Any],
                                     prepend: bool = False) -> RemovableHandle:
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable[..., Any],
                                      prepend: bool = False) -> RemovableHandle:
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable[..., Any],
                                          prepend: bool = False) -> RemovableHandle:
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable[..., Any],
                                           prepend: bool = False) -> RemovableHandle:
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # -- state dicts ------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """{'state': {param index: its state}, 'param_groups': [each group's
        options, with 'params' as indices]}. The state's tensors are the
        optimizer's own (as torch's): copy them to keep a snapshot."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v
                        for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads a state_dict() (of this optimizer's kind, over parameters of
        the same shapes). Tensors are copied in, cast to their parameter's
        dtype (but "step", as torch)."""
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = _cast(param, value)
            else:
                state[key] = value

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    # -- steps ------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears the gradients of every parameter: to None (the default),
        or to zeros in place."""
        from kiln._grad_mode import no_grad
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if grad.requires_grad:
                    grad = grad.detach()
                    p.grad = grad
                with no_grad():
                    grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient. Subclasses
        implement it."""
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a group ({"params": tensors, option: value, ...}); the options
        it leaves out are the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        param_group = dict(param_group)
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        tensors = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(tensors):
            raise ValueError("all optimizer params should be with/without names. Some param "
                             "names are missing")
        param_group["params"] = tensors
        if names:
            param_group["param_names"] = names
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{type(param).__name__}")
            if not self.defaults.get("differentiable", None) and not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(tensors) != len({id(p) for p in tensors}):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error", stacklevel=3)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if any(id(p) in seen for p in tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self._check_group(param_group)
        self.param_groups.append(_ParamGroup(param_group))
        _bump_guards()  # a compiled step updates the groups it was recorded with

    def _check_group(self, group: dict[str, Any]) -> None:
        """Checks a complete group's options before it is added (the
        built-in optimizers check them in C++)."""


def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
    """A copy of a state dict's value for `param`: its tensors cast to the
    parameter's dtype, but "step" (torch's policy)."""
    if isinstance(value, Tensor):
        copy = value.detach().clone()
        if key != "step" and param.dtype.is_floating_point and copy.dtype != param.dtype:
            copy = copy.to(param.dtype)
        return copy
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value
