"""kiln.autograd.Function: a forward and a backward you write, as
torch.autograd.Function.

    class Exp(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)        # y.grad_fn: ExpBackward

forward runs without recording; its tensor outputs get one backward node
(C++'s FunctionNode, kiln/autograd/function_node.h) that calls backward with
one gradient per output and takes one per argument (None for arguments that
are not tensors or need none). Store tensors for backward with
save_for_backward, not as ctx attributes: an output kept on ctx would keep
itself alive (output -> node -> backward -> ctx -> output) past its use.

In a recorded graph (hybridize, kiln.compile, kiln.jit.trace) a Function is
refused while grad mode is on: graph autodiff would differentiate forward's
ops instead of calling backward. Under kiln.no_grad() the forward's ops are
recorded, exactly, for inference.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from kiln import _C
from kiln._C import Tensor
from kiln._grad_mode import no_grad

F = TypeVar("F", bound=Callable[..., Any])


class FunctionCtx:
    """What forward leaves for backward: saved tensors, flags, and any
    attribute you set (ctx.scale = 2.0)."""

    needs_input_grad: tuple[bool, ...]

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._to_save: tuple[Tensor | None, ...] = ()
        self._non_differentiable: list[Tensor] = []
        self._dirty: list[Tensor] = []
        self._materialize_grads = True
        self._recorded: Any = None  # kiln._C.autograd.FunctionContext, once forward returned

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keeps inputs or outputs for backward (read them as
        ctx.saved_tensors); an in-place write to one of them after this makes
        backward fail rather than read the new values."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _C.Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} "
                                f"is of type {type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._recorded is None:
            return tuple(self._to_save)
        return tuple(self._recorded.saved_tensors())

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """Outputs that carry no gradient (indices, masks): they do not
        require grad; their gradients reach backward as zeros."""
        self._non_differentiable.extend(outputs)

    def mark_dirty(self, *inputs: Tensor) -> None:
        """Inputs forward modified in place (and returns)."""
        self._dirty.extend(inputs)

    def set_materialize_grads(self, value: bool) -> None:
        """False: gradients that never arrived reach backward as None
        rather than zeros."""
        self._materialize_grads = bool(value)


class Function:
    """Subclass it with static forward(ctx, *args) and backward(ctx,
    *grad_outputs) (or forward(*args) plus setup_context(ctx, inputs,
    output)); call it as MyFunction.apply(*args)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "MyFunction.apply(x), with @staticmethod forward(ctx, x) and backward(ctx, grad))")

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        return _apply(cls, args, kwargs)


_warned_inference_records: set[str] = set()


def _warn_if_recorded_without_grad(name: str) -> None:
    """A graph recorded under no_grad holds forward's ops. hybridize and
    kiln.compile record again when grad mode changes (and then refuse), but
    a kiln.jit.trace result called with gradients would differentiate those
    ops: say so, once per Function."""
    if (_C.is_grad_enabled() or not _C.jit.is_recording() or name in _warned_inference_records
            or inference_trace is not None):
        return
    _warned_inference_records.add(name)
    warnings.warn(f"kiln.autograd.Function {name} was recorded under no_grad: the graph holds "
                  "its forward's ops, for inference. A kiln.jit.trace result called with "
                  f"gradients would differentiate those ops rather than run {name}.backward",
                  stacklevel=4)


def _warn_outputs_on_ctx(name: str, ctx: FunctionCtx, outputs: list[Tensor]) -> None:
    """An output kept as a ctx attribute holds its own backward node (output
    -> node -> backward -> ctx -> output), a cycle through C++ that Python's
    collector cannot see: it would never be freed."""
    for attr, value in vars(ctx).items():
        if isinstance(value, _C.Tensor) and any(value._is_same(o) for o in outputs):
            warnings.warn(f"{name}.forward keeps an output as ctx.{attr}: it will never be "
                          "freed (it holds the node that holds ctx); use "
                          "ctx.save_for_backward(output) and ctx.saved_tensors", stacklevel=4)


def _overrides_setup_context(cls: type[Function]) -> bool:
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not \
        getattr(Function.setup_context, "__func__", Function.setup_context)


# Set by kiln.jit.trace (and so kiln.onnx.export) while it records: the
# names of the custom Functions the trace met. The traced module holds
# their forward's ops for inference and refuses to be differentiated.
inference_trace: list[str] | None = None


def _apply(cls: type[Function], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = cls.__name__
    if inference_trace is not None and _C.jit.is_recording():
        inference_trace.append(name)
    else:
        _C.autograd._check_recordable(name)
    grad_on = _C.is_grad_enabled()
    inputs = [a if isinstance(a, _C.Tensor) else None for a in args]
    ctx = FunctionCtx(tuple(grad_on and t is not None and t.requires_grad for t in inputs))
    _warn_if_recorded_without_grad(name)
    with no_grad():
        if _overrides_setup_context(cls):
            output = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args, **kwargs)
    is_tuple = isinstance(output, tuple)
    items = list(output) if is_tuple else [output]
    positions = [i for i, item in enumerate(items) if isinstance(item, _C.Tensor)]
    _warn_outputs_on_ctx(name, ctx, [items[i] for i in positions])
    # The backward closure must hold neither the arguments nor forward's
    # lists: a dirty input or a saved output would then hold itself alive.
    backward = functools.partial(_run_backward, cls, ctx, tuple(positions), len(items),
                                 tuple(t is not None for t in inputs))
    recorded, ctx._recorded = _C.autograd._record_function(
        name, inputs, [items[i] for i in positions], backward, list(ctx._to_save),
        ctx._non_differentiable, ctx._dirty, ctx._materialize_grads)
    ctx._to_save, ctx._non_differentiable, ctx._dirty = (), [], []
    for i, t in zip(positions, recorded):
        if not t._is_same(items[i]):  # an alias carrying the new history
            items[i] = t
    return tuple(items) if is_tuple else items[0]


def _run_backward(cls: type[Function], ctx: FunctionCtx, positions: tuple[int, ...],
                  num_items: int, is_tensor_arg: tuple[bool, ...],
                  grads: list[Tensor | None]) -> list[Tensor | None]:
    """Called by the backward engine: one gradient per tensor output in, one
    per argument out."""
    grad_outputs: list[Tensor | None] = [None] * num_items
    for i, g in zip(positions, grads):
        grad_outputs[i] = g
    result = cls.backward(ctx, *grad_outputs)
    result = result if isinstance(result, tuple) else (result,)
    expected = len(is_tensor_arg)
    if len(result) > expected and all(g is None for g in result[expected:]):
        result = result[:expected]
    name = f"{cls.__name__}Backward"
    if len(result) != expected:
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {expected}, got {len(result)})")
    for i, (g, is_tensor) in enumerate(zip(result, is_tensor_arg)):
        if g is not None and not is_tensor:
            raise RuntimeError(f"function {name} returned a gradient different than None at "
                               f"position {i + 1}, but the corresponding forward input was not "
                               "a Variable")
        if g is not None and not isinstance(g, _C.Tensor):
            raise TypeError(f"function {name} returned a {type(g).__name__} as the gradient "
                            f"of argument {i}; expected a Tensor or None")
    return list(result)


def once_differentiable(fn: F) -> F:
    """Decorates a backward whose ops need not be recorded (it is not
    differentiated again): it runs under no_grad."""
    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)
    return wrapper  # type: ignore[return-value]
