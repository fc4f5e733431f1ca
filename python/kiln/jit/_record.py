"""The Python half of recording a function into a graph: its output
structure (a tensor, or tuples/lists/dicts of them) flattened to the list of
tensors C++ records and rebuilt from it, and the handler that turns the C++
tracer's reports into Python warnings (or, in strict mode, TraceError) at
the user's own file and line. Recording, compiling and the cache are C++
(kiln._C.jit.trace and HybridCache)."""
from __future__ import annotations

import atexit
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln._pytree import LEAF, NONE, Spec, flatten, unflatten  # noqa: F401  (kiln.jit imports them here)


class TracerWarning(UserWarning):
    """Tracing met something the compiled graph cannot reproduce (a traced
    value read into Python, a random factory, ...): the compiled function may
    not do what the eager code did."""


class TraceError(RuntimeError):
    """The same as TracerWarning, raised instead in strict mode."""


_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_frame() -> FrameType | None:
    """The innermost frame outside the kiln package: the user's line."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_KILN_DIR):
        frame = frame.f_back
    return frame


def _on_trace_warning(kind: str, message: str, file: str, line: int, divergence: bool,
                      fatal: bool) -> None:
    # A location inside kiln's C++ means nothing to a Python user: the
    # Python line that led there does.
    if file:
        message = message.removesuffix(f" (at {file}:{line})")
    frame = _user_frame()
    filename = frame.f_code.co_filename if frame else "<unknown>"
    lineno = frame.f_lineno if frame else 0
    text = f"{message} (at {filename}:{lineno})"
    if fatal:  # strict mode: the C++ recorder stops with this error
        raise TraceError(text)
    registry = frame.f_globals.setdefault("__warningregistry__", {}) if frame else None
    module = frame.f_globals.get("__name__") if frame else None
    warnings.warn_explicit(text, TracerWarning, filename, lineno, module=module,
                           registry=registry)


_C.jit.set_warning_handler(_on_trace_warning)
# The handler holds a Python function: drop it while Python still runs.
atexit.register(_C.jit.set_warning_handler, None)


# -- recording ---------------------------------------------------------------
def check_inputs(args: Sequence[Any], who: str) -> None:
    for i, arg in enumerate(args):
        if not isinstance(arg, _C.Tensor):
            raise TypeError(f"{who}: argument {i} is a {type(arg).__name__}; a compiled "
                            "function takes tensors only (keep other settings as attributes "
                            "or closure variables, which are frozen into the graph)")


def input_names(fn: Callable[..., Any]) -> list[str]:
    """fn's positional parameter names, to name the graph inputs (%x rather
    than %in0); none when they cannot be told or repeat. A recording with
    fewer inputs uses the first ones."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    names = [p.name for p in parameters
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names if len(set(names)) == len(names) else []


class FlatFunction:
    """fn as C++ records it: called with a list of tensors, returning the
    list of its output tensors. `spec` is the structure of its last result,
    which must stay the same from one recording to the next."""

    def __init__(self, fn: Callable[..., Any], owner: str) -> None:
        self._fn = fn
        self._owner = owner
        self.spec: Spec = None

    def __call__(self, inputs: list[Tensor]) -> list[Tensor]:
        result = self._fn(*inputs)
        flat: list[Tensor] = []
        spec = flatten(result, flat)
        if self.spec is not None and spec != self.spec:
            raise TypeError(f"{self._owner}: the function returned a different structure for "
                            f"these inputs than for earlier calls; a compiled function returns "
                            "one structure")
        self.spec = spec
        return flat


class Dim:
    """A named size for kiln.jit.trace(..., dynamic_shapes=...), with
    optional bounds checked on every call: Dim("batch", min=1, max=64).
    Inputs naming the same Dim must have the same size there."""

    def __init__(self, name: str, min: int | None = None, max: int | None = None) -> None:
        self.name, self.min, self.max = name, min, max

    def __repr__(self) -> str:
        return f"Dim({self.name!r}, min={self.min}, max={self.max})"


# (input, dim, symbol, min, max), as kiln._C.jit.trace takes them.
DynamicDims = list[tuple[int, int, str, int | None, int | None]]


def dynamic_dims(dynamic_shapes: Any, names: Sequence[str], num_inputs: int) -> DynamicDims:
    """dynamic_shapes as trace() takes it: {input name: {dim: name or Dim}},
    or one such {dim: ...} (or None) per positional input."""
    if dynamic_shapes is None:
        return []
    per_input: list[Any]
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names[:num_inputs]]
        if unknown:
            raise ValueError(f"dynamic_shapes names {unknown}, which are not inputs of the traced "
                             f"function (its inputs: {list(names[:num_inputs])})")
        per_input = [dynamic_shapes.get(name) for name in names[:num_inputs]]
    else:
        per_input = list(dynamic_shapes)
        if len(per_input) != num_inputs:
            raise ValueError(f"dynamic_shapes has {len(per_input)} entries for {num_inputs} inputs")
    out: DynamicDims = []
    for i, dims in enumerate(per_input):
        for dim, size in (dims or {}).items():
            if isinstance(size, str):
                size = Dim(size)
            if not isinstance(size, Dim) or not isinstance(dim, int):
                raise TypeError(f"dynamic_shapes: input {i} maps {dim!r} to {size!r}; expected "
                                "{dim (an int): a name or kiln.jit.Dim}")
            out.append((i, dim, size.name, size.min, size.max))
    return out


def record(fn: Callable[..., Any], inputs: Sequence[Tensor], params: Sequence[tuple[str, Tensor]],
           strict: bool, compile_options: dict[str, Any],
           bind_outside_state: bool = False, dynamic_shapes: Any = None) -> tuple[Any, Any, Spec]:
    """Runs fn(*inputs) once while recording. Returns (CompiledFunction, the
    eager result, its structure). bind_outside_state: tensors fn reaches
    from outside (a model's weights, an optimizer's buffers) are bound by
    reference and written back, not frozen as constants."""
    flat_fn = FlatFunction(fn, getattr(fn, "__name__", "function"))
    all_names = input_names(fn)
    names = all_names[:len(inputs)]
    dims = dynamic_dims(dynamic_shapes, all_names, len(inputs))
    compiled, flat = _C.jit.trace(flat_fn, list(inputs), list(params), strict=strict,
                                  bind_outside_state=bind_outside_state,
                                  input_names=names if len(names) == len(inputs) else [],
                                  dynamic_dims=dims, **compile_options)
    return compiled, unflatten(flat_fn.spec, flat), flat_fn.spec
