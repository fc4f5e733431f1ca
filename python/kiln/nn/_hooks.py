"""Module hooks, as torch.nn.Module's: forward pre-hooks and forward hooks
(which may replace the inputs and the output), full backward hooks (which see
the gradients w.r.t. the module's inputs and outputs and may replace the
former) and backward pre-hooks (which may replace the latter).

Module.__call__ comes here only once a hook was registered (a module without
hooks pays one attribute read). Backward hooks work as torch's do: the
tensor inputs and outputs pass through identity autograd Functions whose
backward calls the hooks, so a module used twice gets its hooks called per
use. In a hybridized or traced model the forward hooks run while the graph
records (their effect is in the graph, as torch.jit.trace bakes them);
backward hooks, being Functions, are refused while a graph records with
grad mode on (kiln/autograd/function.py)."""
from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kiln import _C
from kiln.autograd.function import Function

if TYPE_CHECKING:
    from kiln.nn.module import Module

# The tables a module keeps (each an OrderedDict from hook id to hook, made
# on first registration; the class holds empty read-only ones).
TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
# Sets of hook ids with extra behavior.
FLAG_SETS = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
             "_forward_hooks_always_called")


class RemovableHandle:
    """What register_*_hook returns: remove() unregisters the hook (also as
    a context manager: `with m.register_forward_hook(h): ...`)."""

    next_id = 0

    def __init__(self, module: Module, table: OrderedDict[int, Any],
                 flag_sets: tuple[set[int], ...] = ()) -> None:
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self._module = weakref.ref(module)
        self._table = weakref.ref(table)
        self._flag_sets = flag_sets

    def remove(self) -> None:
        table = self._table()
        if table is not None:
            table.pop(self.id, None)
        for flags in self._flag_sets:
            flags.discard(self.id)
        module = self._module()
        if module is not None:
            refresh(module)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _own(module: Module, name: str, make: Callable[[], Any]) -> Any:
    if name not in module.__dict__:
        module.__dict__[name] = make()
    return module.__dict__[name]


def add(module: Module, table_name: str, hook: Callable[..., Any], prepend: bool = False,
        flags: tuple[str, ...] = ()) -> RemovableHandle:
    """Registers `hook` in module's table `table_name`, its id in the flag
    sets named by `flags`."""
    table: OrderedDict[int, Any] = _own(module, table_name, OrderedDict)
    flag_sets = tuple(_own(module, name, set) for name in flags)
    handle = RemovableHandle(module, table, flag_sets)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    for flag_set in flag_sets:
        flag_set.add(handle.id)
    refresh(module)
    return handle


def refresh(module: Module) -> None:
    """Sets whether __call__ must take the hooked path."""
    module.__dict__["_hooked"] = any(module.__dict__.get(name) for name in TABLES)


def call(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Module.__call__ with hooks, in torch's order: forward pre-hooks, the
    backward hooks' input side, forward, forward hooks, the output side."""
    for hook_id, hook in list(module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            replaced = hook(module, args, kwargs)
            if replaced is None:
                continue
            if not (isinstance(replaced, tuple) and len(replaced) == 2):
                raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                   f"new_kwargs), but got {replaced}.")
            args, kwargs = replaced
            continue
        replaced = hook(module, args)
        if replaced is not None:
            args = replaced if isinstance(replaced, tuple) else (replaced,)
    backward_hook = None
    if module._backward_hooks or module._backward_pre_hooks:
        backward_hook = _BackwardHook(module, list(module._backward_hooks.values()),
                                      list(module._backward_pre_hooks.values()))
        args = backward_hook.setup_input_hook(args)
    result = _forward_then_hooks(module, args, kwargs)
    if backward_hook is not None:
        if not isinstance(result, (_C.Tensor, tuple)):
            warnings.warn("For backward hooks to be called, module output should be a Tensor or "
                          f"a tuple of Tensors but received {type(result)}", stacklevel=3)
        result = backward_hook.setup_output_hook(result)
    return result


def _run_forward_hook(module: Module, hook_id: int, hook: Callable[..., Any],
                      args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
    if hook_id in module._forward_hooks_with_kwargs:
        return hook(module, args, kwargs, result)
    return hook(module, args, result)


def _forward_then_hooks(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    called: set[int] = set()
    result = None
    try:
        result = module._call_unhooked(*args, **kwargs)
        for hook_id, hook in list(module._forward_hooks.items()):
            called.add(hook_id)
            replaced = _run_forward_hook(module, hook_id, hook, args, kwargs, result)
            if replaced is not None:
                result = replaced
        return result
    except Exception:
        # Hooks registered with always_call=True run even when forward raised.
        for hook_id, hook in list(module._forward_hooks.items()):
            if hook_id not in module._forward_hooks_always_called or hook_id in called:
                continue
            try:
                replaced = _run_forward_hook(module, hook_id, hook, args, kwargs, result)
                result = result if replaced is None else replaced
            except Exception as e:
                warnings.warn("forward hook with ``always_call=True`` raised an exception that "
                              f"was silenced as another error was raised in forward: {e}",
                              stacklevel=3)
        raise


class BackwardHookFunction(Function):
    """Identity on a module's tensor inputs; its backward hands their
    gradients to the full backward hooks."""

    _backward_in_graph = False  # the hooks run on every backward

    @staticmethod
    def forward(ctx: Any, state: _BackwardHook, *tensors: Any) -> Any:
        ctx.state = state
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None, *ctx.state.on_input_grads(grads))


class BackwardPreHookFunction(Function):
    """Identity on a module's tensor outputs; its backward hands their
    gradients to the backward pre-hooks (as they arrive: None where none did,
    then zeros as any node's gradients)."""

    _backward_in_graph = False  # the hooks run on every backward

    @staticmethod
    def forward(ctx: Any, state: _BackwardHook, *tensors: Any) -> Any:
        ctx.state = state
        ctx.like = [(tuple(t.shape), t.dtype) for t in tensors]
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        import kiln
        grads = ctx.state.on_output_grads(grads)
        return (None, *(kiln.zeros(shape, dtype=dtype) if g is None else g
                        for g, (shape, dtype) in zip(grads, ctx.like)))


class _BackwardHook:
    """One call's backward hooks: what the outputs' gradients were, kept
    until the inputs' gradients arrive (torch.utils.hooks.BackwardHook)."""

    def __init__(self, module: Module, hooks: list[Callable[..., Any]],
                 pre_hooks: list[Callable[..., Any]]) -> None:
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs: tuple[Any, ...] | None = None
        self.n_inputs = self.n_outputs = 0
        self.input_positions: list[int] | None = None
        self.output_positions: list[int] = []

    def _wrap(self, function: type[Function],
              args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[int] | None]:
        positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        tensors = [args[i] for i in positions]
        if not (_C.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return args, None
        out = list(args)
        for i, t in zip(positions, function.apply(self, *tensors)):
            out[i] = t
        return tuple(out), positions

    def setup_input_hook(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        wrapped, self.input_positions = self._wrap(BackwardHookFunction, args)
        self.n_inputs = len(args)
        return wrapped

    def setup_output_hook(self, result: Any) -> Any:
        is_tuple = isinstance(result, tuple)
        items = result if is_tuple else (result,)
        wrapped, positions = self._wrap(BackwardPreHookFunction, items)
        self.output_positions = positions or []
        self.n_outputs = len(items)
        return wrapped if is_tuple else wrapped[0]

    @staticmethod
    def _pack(positions: list[int], values: tuple[Any, ...], n: int) -> tuple[Any, ...]:
        out: list[Any] = [None] * n
        for i, v in zip(positions, values):
            out[i] = v
        return tuple(out)

    def on_output_grads(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        self.grad_outputs = self._pack(self.output_positions, grads, self.n_outputs)
        for hook in self.pre_hooks:
            replaced = hook(self.module, self.grad_outputs)
            if replaced is None:
                continue
            if len(replaced) != len(self.grad_outputs):
                raise RuntimeError("Backward pre hook returned an invalid number of grad_output, "
                                   f"got {len(replaced)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = tuple(replaced)
        local = self.grad_outputs
        if self.input_positions is None:  # no input requires grad: the hooks run now
            if self.hooks:
                warnings.warn("Full backward hook is firing when gradients are computed with "
                              "respect to module outputs since no inputs require gradients.",
                              stacklevel=2)
            no_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, no_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_positions)

    def on_input_grads(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.grad_outputs is None or self.input_positions is None:
            return grads  # reached without passing the outputs (double backward)
        res = self._pack(self.input_positions, grads, self.n_inputs)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if len(out) != len(res):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, got "
                                   f"{len(out)}, but expected {len(res)}")
            res = tuple(out)
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_positions)
