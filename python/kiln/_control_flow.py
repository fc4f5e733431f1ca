"""Control flow that stays in the graph: kiln.cond, kiln.while_loop,
kiln.scan and kiln.fori_loop, shaped like JAX's lax functions, over pytrees
(tensors, or tuples, lists and dicts of them).

Eagerly they run the Python functions, as plain code would. Inside a trace,
hybridize or kiln.compile they record one node owning sub-graphs, so the
compiled graph branches and loops as the code does, for every input.

    y = kiln.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)
    total = kiln.fori_loop(0, 10, lambda i, acc: acc + x[i], kiln.zeros(3))
    h_last, hs = kiln.scan(lambda h, x_t: (cell(x_t, h),) * 2, h0, xs)
"""
from __future__ import annotations

import builtins
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln._factories import tensor
from kiln._pytree import Spec, describe, flatten, unflatten

__all__ = ["cond", "while_loop", "scan", "fori_loop"]

_KILN_DIR = __file__.rsplit("/", 1)[0]


def _caller() -> str:
    """file:line of the innermost frame outside kiln: the user's call."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_KILN_DIR):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "<unknown>"


class _Located:
    """Adds the user's file and line to kiln's own errors from an op (the
    messages start with the op's name); errors the user's functions raise
    pass through unchanged."""

    def __init__(self, op: str, site: str) -> None:
        self._op, self._site = op, site

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        # An inner op's error already names its own site.
        if error is None or " (at " in str(error):
            return
        if isinstance(error, (TypeError, ValueError, RuntimeError)) and \
                str(error).startswith(f"{self._op}:"):
            error.args = (f"{error} (at {self._site})",) + tuple(error.args[1:])


class _Traced:
    """fn called on flat tensors: unflattens its arguments, flattens its
    result and remembers the result's structure."""

    def __init__(self, fn: Callable[..., Any], what: str, arg_specs: list[Spec]) -> None:
        self._fn, self._what, self._arg_specs = fn, what, arg_specs
        self.spec: Spec = None

    def call(self, *flat_groups: list[Tensor]) -> list[Tensor]:
        args = [unflatten(spec, flat) if spec is not None else None
                for spec, flat in zip(self._arg_specs, flat_groups)]
        return self.flat(self._fn(*args))

    def flat(self, result: Any) -> list[Tensor]:
        out: list[Tensor] = []
        spec = flatten(result, out, f"what {self._what} returns")
        if self.spec is not None and spec != self.spec:
            raise TypeError(f"{self._what} returned {describe(spec)} where {describe(self.spec)} "
                            "was expected")
        self.spec = spec
        return out


def _flat(tree: Any, what: str) -> tuple[list[Tensor], Spec]:
    flat: list[Tensor] = []
    return flat, flatten(tree, flat, what)


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         *operands: Any) -> Any:
    """true_fn(*operands) if pred else false_fn(*operands). pred is a
    one-element bool tensor (kept in the graph) or a Python bool (decided
    now). Both branches must return the same structure of tensors with the
    same dtypes and shapes."""
    if isinstance(pred, builtins.bool):
        return true_fn(*operands) if pred else false_fn(*operands)
    flat, spec = _flat(operands, "cond's operands")
    branches = [_Traced(lambda ops, fn=fn: fn(*ops), f"cond's {name}", [spec])
                for fn, name in ((true_fn, "true_fn"), (false_fn, "false_fn"))]
    with _Located("cond", _caller()):
        out = _C.cond(pred, branches[0].call, branches[1].call, flat)
        recorded = [b.spec for b in branches if b.spec is not None]
        if len(recorded) == 2 and recorded[0] != recorded[1]:
            raise TypeError(f"cond: true_fn returned {describe(recorded[0])} but false_fn "
                            f"returned {describe(recorded[1])}")
    return unflatten(recorded[0], out)


def while_loop(cond_fn: Callable[[Any], Any], body_fn: Callable[[Any], Any], carried: Any,
               max_iterations: int | None = None) -> Any:
    """carried = body_fn(carried) while cond_fn(carried); returns carried.
    The body keeps each tensor's dtype and shape. With max_iterations, more
    iterations are an error, and a compiled loop can be differentiated."""
    flat, spec = _flat(carried, "while_loop's carried values")
    body = _Traced(body_fn, "while_loop's body_fn", [spec])
    body.spec = spec  # the body returns what it was given

    def predicate(values: list[Tensor]) -> Tensor:
        pred = cond_fn(unflatten(spec, values))
        if isinstance(pred, builtins.bool):
            return tensor(pred)
        return pred

    with _Located("while_loop", _caller()):
        out = _C.while_loop(predicate, body.call, flat, max_iterations)
    return unflatten(spec, out)


def scan(fn: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         reverse: builtins.bool = False, length: int | None = None) -> tuple[Any, Any]:
    """Runs carry, y = fn(carry, x) over the leading dim of xs (a pytree of
    tensors of one length, or None with `length` steps and x None); returns
    (the last carry, the ys stacked along a new leading dim). reverse: from
    the last step to the first."""
    carry_flat, carry_spec = _flat(init, "scan's init")
    xs_flat, xs_spec = _flat(xs, "scan's xs") if xs is not None else ([], None)
    step = _Traced(fn, "scan's fn (as its carry)", [])
    step.spec = carry_spec
    ys_spec: list[Spec] = []

    def call(carry: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        out = fn(unflatten(carry_spec, carry), unflatten(xs_spec, x) if xs_spec else None)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("scan: fn must return a pair (carry, y)")
        new_carry, y = out
        carry_out = step.flat(new_carry)
        y_flat, spec = _flat(y, "what scan's fn returns as y") if y is not None else ([], None)
        if ys_spec and ys_spec[0] != spec:
            raise TypeError(f"scan's fn returned y as {describe(spec)} where "
                            f"{describe(ys_spec[0])} was expected")
        ys_spec[:] = [spec]
        return carry_out, y_flat

    with _Located("scan", _caller()):
        carry_out, ys = _C.scan(call, carry_flat, xs_flat, reverse, length)
    y_spec = ys_spec[0] if ys_spec else None
    return unflatten(carry_spec, carry_out), (unflatten(y_spec, ys) if y_spec is not None
                                              else None)


def fori_loop(lower: int | Tensor, upper: int | Tensor, body_fn: Callable[[Tensor, Any], Any],
              init: Any) -> Any:
    """val = body_fn(i, val) for i in range(lower, upper); returns val. i is
    a 0-d int64 tensor. Integer bounds give a static trip count (a scan,
    differentiable); tensor bounds a while_loop."""
    flat, spec = _flat(init, "fori_loop's init")
    body = _Traced(body_fn, "fori_loop's body_fn", [])
    body.spec = spec

    def call(i: Tensor, values: list[Tensor]) -> list[Tensor]:
        return body.flat(body_fn(i, unflatten(spec, values)))

    bounds: tuple[Any, Any] = (lower, upper)
    if not isinstance(lower, Tensor) and not isinstance(upper, Tensor):
        bounds = (int(lower), int(upper))
    else:
        bounds = (lower if isinstance(lower, Tensor) else tensor(int(lower)),
                  upper if isinstance(upper, Tensor) else tensor(int(upper)))
    with _Located("fori_loop", _caller()):
        out = _C.fori_loop(bounds[0], bounds[1], call, flat)
    return unflatten(spec, out)
