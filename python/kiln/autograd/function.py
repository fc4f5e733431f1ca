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

In a graph recorded with grad mode on (hybridize, kiln.compile,
kiln.jit.trace) a Function is one custom_function node: each call of the
compiled graph runs forward, and graph autodiff records backward's ops into
the backward graph, so compiled training uses your backward. There,
backward may read only forward's inputs and outputs through saved_tensors,
and non-tensor arguments keep their recorded values. Such a graph cannot be
saved or exported (its node calls this process's Python code). Under
kiln.no_grad() the forward's ops are recorded instead, exactly, for
inference.
"""
from __future__ import annotations

import atexit
import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from kiln import _C
from kiln._C import Tensor
from kiln._grad_mode import no_grad

F = TypeVar("F", bound=Callable[..., Any])

# The callbacks of recorded Functions (custom_function nodes) hold Python
# functions: dropped while the interpreter can still free them.
atexit.register(_C.autograd._release_function_nodes)


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

    # False for a Function whose backward has effects every call must see
    # (module backward hooks): a recorded graph runs backward's Python once,
    # when it records the backward graph, so such a Function is refused
    # while a graph records with grad mode on.
    _backward_in_graph = True

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        return _apply(cls, args, kwargs)


_warned_inference_records: set[str] = set()


def _warn_if_recorded_without_grad(name: str) -> None:
    """A graph recorded under no_grad holds forward's ops. hybridize and
    kiln.compile record again when grad mode changes (a custom_function node
    then), but a graph recorded under no_grad and run with gradients would
    differentiate those ops: say so, once per Function."""
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


def _run_forward(cls: type[Function], ctx: FunctionCtx, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    with no_grad():
        if _overrides_setup_context(cls):
            output = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, output)
            return output
        return cls.forward(ctx, *args, **kwargs)


def _apply(cls: type[Function], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = cls.__name__
    if _C.autograd._records_node() and not cls._backward_in_graph:
        raise RuntimeError(f"{name}: a custom autograd Function whose backward runs Python "
                           "effects on every call (a module's backward hooks) was called while "
                           "kiln records a graph with grad mode on (hybridize, kiln.compile, "
                           "kiln.jit.trace); train this model eagerly (hybridize(active=False)), "
                           "or record it under kiln.no_grad() for inference")
    if _C.autograd._records_node():
        node_outputs = _apply_as_node(cls, args, kwargs)
        if node_outputs is not _NOT_A_NODE:
            return node_outputs
    if inference_trace is not None and _C.jit.is_recording():
        inference_trace.append(name)
    grad_on = _C.is_grad_enabled()
    inputs = [a if isinstance(a, _C.Tensor) else None for a in args]
    ctx = FunctionCtx(tuple(grad_on and t is not None and t.requires_grad for t in inputs))
    _warn_if_recorded_without_grad(name)
    output = _run_forward(cls, ctx, args, kwargs)
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


def _apply_as_node(cls: type[Function], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A graph records with grad mode on: forward runs once (outside the
    recording), and the graph gets one custom_function node whose kernel
    runs forward again on later calls and whose grad rule runs backward (its
    ops recorded into the backward graph). Arguments that are not tensors
    are fixed at their recorded values, as the rest of a trace's Python
    values are; backward sees a ctx with forward's attributes (as recorded)
    and the saved inputs and outputs of each call."""
    name = cls.__name__
    arg_positions = tuple(i for i, a in enumerate(args) if isinstance(a, _C.Tensor))
    inputs = [args[i] for i in arg_positions]
    ctx = FunctionCtx(tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args))
    with _C.optim.outside_recording():  # forward's ops are the node's
        output = _run_forward(cls, ctx, args, kwargs)
    is_tuple = isinstance(output, tuple)
    items = list(output) if is_tuple else [output]
    positions = tuple(i for i, item in enumerate(items) if isinstance(item, _C.Tensor))
    outputs = [items[i] for i in positions]
    if inference_trace is not None and ctx._dirty:
        return _NOT_A_NODE
    _warn_outputs_on_ctx(name, ctx, outputs)
    # A saved tensor that is neither an input nor an output (sigmoid(x) in
    # a SiLU) becomes a hidden output of the node: forward gives it again on
    # every call, and backward reads it from there.
    hidden = tuple(k for k, t in enumerate(ctx._to_save)
                   if t is not None and not any(t._is_same(x) for x in (*inputs, *outputs)))
    # The callbacks live as long as the process: they hold no tensor argument.
    fixed_args = tuple(None if isinstance(a, _C.Tensor) else a for a in args)
    forward = functools.partial(_forward_again, cls, fixed_args, arg_positions, dict(kwargs),
                                positions, hidden)
    saved, dirty = list(ctx._to_save), ctx._dirty
    extra = [saved[k] for k in hidden]
    non_differentiable = [*ctx._non_differentiable, *extra]
    ctx._to_save, ctx._non_differentiable, ctx._dirty = (), [], []
    backward = functools.partial(_backward_again, cls, ctx, arg_positions, len(args), positions,
                                 len(items))
    recorded = _C.autograd._record_function_node(
        name, inputs, outputs + extra, forward, backward, saved, non_differentiable, dirty,
        ctx._materialize_grads)
    for i, t in zip(positions, recorded):
        items[i] = t
    return tuple(items) if is_tuple else items[0]


# kiln.jit.trace (torch.jit.trace's users mostly want inference) records a
# Function a node cannot hold (one that writes an input: mark_dirty) as its
# forward's ops instead, running forward a second time; the traced module
# then refuses gradients naming it. hybridize and kiln.compile refuse such a
# Function (record_function_node's error).
_NOT_A_NODE = object()


def _forward_again(cls: type[Function], fixed_args: tuple[Any, ...],
                   arg_positions: tuple[int, ...], kwargs: dict[str, Any],
                   positions: tuple[int, ...], hidden: tuple[int, ...],
                   tensors: list[Tensor]) -> list[Tensor]:
    """The node's kernel: forward on this call's tensors; its outputs, then
    the saved intermediates (the `hidden` slots of save_for_backward)."""
    args = list(fixed_args)
    for i, t in zip(arg_positions, tensors):
        args[i] = t
    ctx = FunctionCtx((False,) * len(args))
    output = _run_forward(cls, ctx, tuple(args), kwargs)
    items = output if isinstance(output, tuple) else (output,)
    return [items[i] for i in positions] + [ctx._to_save[k] for k in hidden]


def _backward_again(cls: type[Function], recorded: FunctionCtx, arg_positions: tuple[int, ...],
                    num_args: int, positions: tuple[int, ...], num_items: int,
                    saved: list[Tensor | None], grads: list[Tensor | None],
                    needs: list[bool]) -> list[Tensor | None]:
    """The node's grad rule: backward on a ctx like the recorded one, its
    saved tensors this call's."""
    needs_input_grad = [False] * num_args
    for i, need in zip(arg_positions, needs):
        needs_input_grad[i] = need
    ctx = FunctionCtx(tuple(needs_input_grad))
    for attr, value in vars(recorded).items():
        if not attr.startswith("_") and attr != "needs_input_grad":
            setattr(ctx, attr, value)
    ctx._to_save = tuple(saved)
    ctx._materialize_grads = recorded._materialize_grads
    is_tensor_arg = tuple(i in arg_positions for i in range(num_args))
    grads = grads[:len(positions)]  # the hidden outputs (saved intermediates) get none
    result = _run_backward(cls, ctx, positions, num_items, is_tensor_arg, grads)
    return [result[i] for i in arg_positions]


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
