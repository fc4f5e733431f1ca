"""nn.Module in Python, so that user models subclass it as in PyTorch:
attributes that are Parameters, Modules or registered buffers are recorded in
assignment order and reached by parameters(), named_parameters(),
state_dict() and friends with dotted names."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from kiln import _C
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._device import check_device, parse_to
from kiln.jit import _guards
from kiln.nn import _hooks
from kiln.nn.parameter import Parameter

if TYPE_CHECKING:
    from kiln.jit import HybridCache


def _as_tensor(value: Any, like: Tensor) -> Tensor:
    if isinstance(value, _C.Tensor):
        return value
    # np.asarray(order="C"), not ascontiguousarray: that one turns 0-d into 1-d.
    array = np.asarray(value, order="C")
    if hasattr(like, "numpy"):
        array = array.astype(like.detach().numpy().dtype, copy=False)
    return _C.from_numpy(array)


class Module:
    """Base class of all layers and models. Subclasses call
    super().__init__() first, assign their parts as attributes and define
    forward(); calling the module calls forward."""

    training: bool
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    _modules: OrderedDict[str, Module | None]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())

    # -- registration ------------------------------------------------------
    # Parameters, buffers and children live in their ordered tables and are
    # mirrored in the instance __dict__, so that `self.weight` in a forward is
    # a plain attribute read: a miss that falls back to __getattr__ costs a
    # formatted AttributeError first, about a microsecond per access. Every
    # write goes through _set_member or __delattr__, which keep both in step.
    def _set_member(self, table: OrderedDict[str, Any], name: str, value: Any) -> None:
        _guards.bump()  # a compiled entry holds the members it was recorded with
        for other in (self._parameters, self._buffers, self._modules):
            if other is not table:
                other.pop(name, None)
        table[name] = value
        self.__dict__[name] = value

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            if isinstance(value, (Parameter, Module)):
                raise AttributeError(
                    f"cannot assign '{name}' before Module.__init__() call")
            object.__setattr__(self, name, value)
            return
        params, modules, buffers = self._parameters, self._modules, self._buffers
        if isinstance(value, Parameter):
            self._set_member(params, name, value)
        elif isinstance(value, Module):
            self._set_member(modules, name, value)
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (kiln.nn.Parameter or None expected)")
            self._set_member(params, name, None)
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (kiln.nn.Module or None expected)")
            self._set_member(modules, name, None)
        elif name in buffers:
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(kiln.Tensor or None expected)")
            self._set_member(buffers, name, value)
        else:
            # A plain value (a number, a flag) may be baked into a compiled
            # entry: the hybridize caches compare theirs on their next call.
            _guards.assigning(self, name, value)
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not in __dict__ (members are mirrored there).
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        # A plain attribute moved aside while a compiled entry records, so
        # that the read is seen (jit/_guards.py).
        value = _guards.hidden_attr(self, name)
        if value is not _guards.MISSING:
            return value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                _guards.bump()
                del table[name]
                self.__dict__.pop(name, None)
                return
        if not _guards.deleting(self, name):
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' as parameter '{name}' "
                            "(kiln.nn.Parameter or None expected)")
        self._set_member(self._parameters, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' as buffer '{name}'")
        self._set_member(self._buffers, name, tensor)
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._set_member(self._modules, name, module)

    # -- traversal ---------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None,
                      prefix: str = "") -> Iterator[tuple[str, Module]]:
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, child in self._modules.items():
            if child is not None:
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(self, table: str, prefix: str,
                       recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen = set()
        modules: Iterator[tuple[str, Module]] | list[tuple[str, Module]] = (
            self.named_modules(prefix=prefix) if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "",
                         recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "",
                      recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- state -------------------------------------------------------------
    def state_dict(self, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        out: dict[str, Tensor] = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        skip = self.__dict__.get("_non_persistent", set())
        for name, b in self._buffers.items():
            if b is not None and name not in skip:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> tuple[list[str], list[str]]:
        """Copies `state_dict`'s values (kiln tensors or anything NumPy takes)
        into this module's parameters and buffers, in place. strict: the keys
        must match exactly; errors name the missing and unexpected keys."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " +
                          ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " +
                          ", ".join(f'"{k}"' for k in missing) + ".")
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = _as_tensor(state_dict[key], target)
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{list(value.shape)} from checkpoint, the shape in current "
                              f"model is {list(target.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" +
                               "\n\t".join(errors))
        for key, target in own.items():
            if key in state_dict:
                _C._copy_no_grad(target, _as_tensor(state_dict[key], target))
        return missing, unexpected

    # -- modes and grads ---------------------------------------------------
    def train(self, mode: bool = True) -> Self:
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Self:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Self:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            p.grad = None

    # -- devices and dtypes -----------------------------------------------
    def to(self, *args: Any, **kwargs: Any) -> Self:
        """PyTorch's forms: to(device), to(dtype), to(device, dtype),
        to(tensor), with device=, dtype=, non_blocking=. A dtype converts the
        floating parameters and buffers (each parameter becomes a new
        Parameter holding the converted values, its .grad converted too):
        build optimizers after it, as PyTorch's documentation says. kiln's
        one device is the CPU (kiln.device)."""
        dtype, _ = parse_to(args, kwargs, f"{type(self).__name__}.to()", accepts_copy=False)
        if dtype is not None:
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                                f"desired dtype={dtype}")
            self._convert_floating(dtype)
        return self

    def cpu(self) -> Self:
        return self

    def cuda(self, device: Any = None) -> Self:
        check_device("cuda" if device is None else device, f"{type(self).__name__}.cuda()")
        return self

    def float(self) -> Self:
        return self.to(_C.dtype.float32)

    def double(self) -> Self:
        return self.to(_C.dtype.float64)

    def half(self) -> Self:
        raise TypeError(f"{type(self).__name__}.half(): kiln has no float16; its floating "
                        "dtypes are float32 and float64")

    def bfloat16(self) -> Self:
        raise TypeError(f"{type(self).__name__}.bfloat16(): kiln has no bfloat16; its floating "
                        "dtypes are float32 and float64")

    def _convert_floating(self, dtype: DType) -> None:
        for module in self.modules():
            for name, param in list(module._parameters.items()):
                if param is None or not param.dtype.is_floating_point or param.dtype == dtype:
                    continue
                converted = Parameter(param.detach().to(dtype), param.requires_grad)
                if param.grad is not None:
                    converted.grad = param.grad.to(dtype)
                module._set_member(module._parameters, name, converted)
            for name, buffer in list(module._buffers.items()):
                if buffer is None or not buffer.dtype.is_floating_point or buffer.dtype == dtype:
                    continue
                module._set_member(module._buffers, name, buffer.to(dtype))

    def apply(self, fn: Callable[[Module], object]) -> Self:
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- calling -----------------------------------------------------------
    _hybrid: HybridCache | None = None  # set by hybridize(): one compiled entry per signature

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._hooked:  # a hook was registered (nn/_hooks.py)
            return _hooks.call(self, args, kwargs)
        hybrid = self._hybrid
        if hybrid is None:
            return self.forward(*args, **kwargs)
        # HybridCache.__call__, inlined: a hit is one integer compare (no
        # plain attribute assigned since the last check) and one call into C++.
        if hybrid.version != _guards.version:
            hybrid.check_values()
        if not kwargs:
            out = hybrid.run(args, self.training)
            if out is not None:
                return out[0] if hybrid.single else hybrid.unflatten(out)
        return hybrid.miss(args, kwargs, self.training)

    def _call_unhooked(self, *args: Any, **kwargs: Any) -> Any:
        """What __call__ runs between the hooks: forward, or the compiled entry."""
        hybrid = self._hybrid
        if hybrid is None:
            return self.forward(*args, **kwargs)
        return hybrid(args, kwargs, self.training)

    # -- hooks (nn/_hooks.py) ----------------------------------------------
    # Each table is made on first registration; until then the class's
    # empty, read-only ones answer.
    _hooked = False
    _forward_pre_hooks: Mapping[int, Callable[..., Any]] = MappingProxyType({})
    _forward_hooks: Mapping[int, Callable[..., Any]] = MappingProxyType({})
    _backward_hooks: Mapping[int, Callable[..., Any]] = MappingProxyType({})
    _backward_pre_hooks: Mapping[int, Callable[..., Any]] = MappingProxyType({})
    _forward_pre_hooks_with_kwargs: frozenset[int] = frozenset()
    _forward_hooks_with_kwargs: frozenset[int] = frozenset()
    _forward_hooks_always_called: frozenset[int] = frozenset()

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> _hooks.RemovableHandle:
        """hook(module, args) before forward; a value it returns replaces
        args (a non-tuple becomes a 1-tuple). with_kwargs: hook(module, args,
        kwargs) returning None or (args, kwargs)."""
        flags = ("_forward_pre_hooks_with_kwargs",) if with_kwargs else ()
        return _hooks.add(self, "_forward_pre_hooks", hook, prepend, flags)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> _hooks.RemovableHandle:
        """hook(module, args, output) after forward (with_kwargs: hook(module,
        args, kwargs, output)); a value it returns replaces the output.
        always_call: also when forward raises."""
        flags = (("_forward_hooks_with_kwargs",) if with_kwargs else ()) + \
            (("_forward_hooks_always_called",) if always_call else ())
        return _hooks.add(self, "_forward_hooks", hook, prepend, flags)

    def register_full_backward_hook(self, hook: Callable[..., Any],
                                    prepend: bool = False) -> _hooks.RemovableHandle:
        """hook(module, grad_input, grad_output) once the gradients w.r.t.
        the module's inputs are computed (one entry per positional argument,
        None where it is not a tensor); a tuple it returns replaces
        grad_input."""
        return _hooks.add(self, "_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any],
                                        prepend: bool = False) -> _hooks.RemovableHandle:
        """hook(module, grad_output) once the gradients w.r.t. the module's
        outputs are computed; a tuple it returns replaces grad_output."""
        return _hooks.add(self, "_backward_pre_hooks", hook, prepend)

    def hybridize(self, active: bool = True, strict: bool = False, optimize: bool = True,
                  frozen: bool = False, fast_math: bool = False,
                  passes: Sequence[str] | None = None, dynamic: bool | None = None,
                  script: bool = False, exact: bool = False) -> Self:
        """From the next call on, each new input signature (dtypes and shapes,
        grad mode, train/eval) runs forward once while recording it, and
        later calls with that signature run the compiled graph: one call into
        C++, forward's Python body does not run. Parameters and buffers stay
        bound to this module's tensors, so training and load_state_dict are
        seen. A plain attribute forward reads (self.scale = 2.0, a flag) is
        guarded: assigning it another value records forward again, and
        cache_info() says which attribute changed. Options as
        kiln.jit.trace; active=False turns it off.
        dynamic: None (default) makes a dim symbolic once it takes a second
        value (one entry for every batch size); True, every input dim from
        the first call; False, one entry per shape.
        script: kiln.jit.script forward first, so that its `if`s and loops
        on tensors stay in the graph instead of following the recorded path."""
        if not active:
            object.__setattr__(self, "_hybrid", None)
            object.__setattr__(self, "_hybrid_options", None)
            return self
        # Kept so that a copy (deepcopy, pickle) hybridizes itself the same way.
        object.__setattr__(self, "_hybrid_options", dict(
            strict=strict, optimize=optimize, frozen=frozen, fast_math=fast_math,
            passes=passes, dynamic=dynamic, script=script, exact=exact))
        from kiln.jit import HybridCache
        if script:
            from kiln.jit import script as script_module
            script_module(self)

        def params() -> list[tuple[str, Tensor]]:
            return list(self.state_dict(keep_vars=True).items())

        def values() -> tuple[dict[Any, str], list[_guards.Guard]]:
            return _guards.module_names(self, "self"), []

        object.__setattr__(self, "_hybrid", HybridCache(
            self.forward, f"hybridize({type(self).__name__})", params, strict=strict,
            optimize=optimize, frozen=frozen, fast_math=fast_math, passes=list(passes or []),
            dynamic=dynamic, values=values, exact=exact))
        return self

    # -- copy.deepcopy and pickle ---------------------------------------------
    # The compiled entries hold this module's own tensors and bound forward,
    # so a copy does not share them: it hybridizes itself again.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_hybrid"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        options = state.get("_hybrid_options")
        if options is not None:
            self.hybridize(**options)

    def cache_info(self) -> Any:
        """The hybridized module's compiled entries, hits, and why each miss
        missed (the guard that failed, old -> new)."""
        if self._hybrid is None:
            raise RuntimeError(f"{type(self).__name__}.cache_info(): the module is not "
                               "hybridized (call hybridize() first)")
        return self._hybrid.cache_info()

    # -- printing ----------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, child in self._modules.items():
            child_text = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {child_text}")
        head = type(self).__name__ + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._modules) |
                      set(self._buffers))
