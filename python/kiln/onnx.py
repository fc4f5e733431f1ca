"""kiln.onnx: export kiln models to ONNX, and run ONNX models in kiln.

    kiln.onnx.export(net, x, "mlp.onnx")                      # runs in ONNX Runtime
    kiln.onnx.export(net, x, "mlp.onnx", dynamic_axes={"x": {0: "batch"}})
    kiln.onnx.export(symbolic_traced, None, "bert.onnx")      # its symbolic dims as they are
    m = kiln.onnx.load("mlp.onnx")                            # a compiled module

Export traces the model on the example (or takes a TracedModule as it is)
and writes the optimized graph, with kiln's fused ops written as the ONNX
ops they stand for. An op without an ONNX translation fails the export,
naming the op.

A TracedModule whose graph has symbolic sizes (traced with dynamic shapes,
or built from IR text such as `%x : f32[batch, seq, 16]`) exports them as
ONNX dim_params named by the symbols, with the sizes its reshapes and
slices take computed in the ONNX graph: no dynamic_axes needed.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kiln import _C
from kiln._C import Tensor

if TYPE_CHECKING:
    from kiln.jit import TracedModule
    from kiln.nn import Module

# dynamic_axes: {name: {0: "batch"}} or {name: [0]}
DynamicAxes = Mapping[str, Mapping[int, str] | Sequence[int]]

__all__ = ["export", "load", "can_export", "importable_ops"]

can_export = _C.onnx.can_export
importable_ops = _C.onnx.importable_ops


def _symbolic_input_dims(traced: TracedModule) -> dict[str, set[int]] | None:
    """{input name: its symbolic dims} of a graph with symbolic sizes, else None."""
    dims = {value.name: {i for i, d in enumerate(value.shape) if not isinstance(d, int)}
            for value in traced.graph.inputs}
    return dims if any(dims.values()) else None


def _dynamic_shapes(model: Any, dynamic_axes: DynamicAxes | None) -> dict[str, Any] | None:
    """The dynamic_axes naming the model's inputs, as trace's dynamic_shapes:
    the model is traced with those dims symbolic, so any of them (not only
    the batch) stays symbolic in the file. Names of outputs are left out:
    their sizes follow from the inputs'. A list of dims names each
    `{input}_{dim}`."""
    if not dynamic_axes:
        return None
    from kiln.jit import _record
    from kiln.nn import Module
    inputs = set(_record.input_names(model.forward if isinstance(model, Module) else model))
    shapes: dict[str, Any] = {}
    for name, axes in dynamic_axes.items():
        if name not in inputs:
            continue
        shapes[name] = (dict(axes) if isinstance(axes, Mapping)
                        else {int(d): f"{name}_{d}" for d in axes})
    return shapes or None


def _check_still_dynamic(traced: TracedModule, dynamic_shapes: dict[str, Any] | None) -> None:
    """A dim asked to be dynamic that the model fixes (a linear layer's width)
    is an error naming it, not a dim_param that only one value satisfies."""
    fixed = traced.graph.fixed_sizes
    for name, axes in (dynamic_shapes or {}).items():
        for dim, symbol in axes.items():
            symbol = getattr(symbol, "name", symbol)
            if str(symbol) in fixed:
                raise ValueError(f"kiln.onnx.export: dynamic_axes[{name!r}] asks for dim {dim} "
                                 f"to be dynamic, but the model needs it to be "
                                 f"{fixed[str(symbol)]} (the trace fixed {symbol})")


def _dynamic_batch(traced: TracedModule, dynamic_axes: DynamicAxes | None) -> bool:
    if not dynamic_axes:
        return False
    symbolic = _symbolic_input_dims(traced)
    if symbolic is not None:
        # The graph's own symbols are exported; dynamic_axes may only repeat them.
        for name, axes in dynamic_axes.items():
            dims = set(axes.keys() if isinstance(axes, dict) else axes)
            if name in symbolic and not dims <= symbolic[name]:
                raise ValueError(f"kiln.onnx.export: dynamic_axes[{name!r}] asks for dims "
                                 f"{sorted(dims - symbolic[name])}, which are static in the "
                                 f"graph; a graph with symbolic sizes exports those it has "
                                 f"(leave dynamic_axes out)")
        return False
    for name, axes in dynamic_axes.items():
        asked = list(axes.keys() if isinstance(axes, dict) else axes)
        if asked != [0]:
            raise ValueError(f"kiln.onnx.export: only the first dimension (the batch) can be "
                             f"dynamic; dynamic_axes[{name!r}] asks for {asked}")
    return True


def export(model: Module | TracedModule | Callable[..., Any],
           example_inputs: Tensor | tuple[Tensor, ...], path: str | os.PathLike[str],
           opset_version: int = 17, dynamic_axes: DynamicAxes | None = None,
           output_names: Sequence[str] | None = None) -> None:
    """Writes `model` (a Module, a function, or a TracedModule) to `path` as
    an ONNX model of opset `opset_version` (13 to 17). example_inputs: the
    tensor (or tuple of tensors) to trace with (None for a TracedModule).
    dynamic_axes: optional; {name: {0: "batch", 1: "seq"}} keeps those dims
    of the inputs symbolic (the model is traced with them as dynamic shapes;
    the outputs' sizes follow). A TracedModule with symbolic sizes exports
    them without it; for one with static shapes only the first dimension
    can be made dynamic (the graph is re-batched).
    output_names: names for the outputs."""
    from kiln.jit import TracedModule, trace
    if isinstance(model, TracedModule):
        traced = model
    else:
        dynamic_shapes = _dynamic_shapes(model, dynamic_axes)
        traced = trace(model, example_inputs, dynamic_shapes=dynamic_shapes)
        _check_still_dynamic(traced, dynamic_shapes)
    _C.onnx.export(traced._compiled, os.fspath(path), opset_version,
                   _dynamic_batch(traced, dynamic_axes), list(output_names or []))


def load(path: str | os.PathLike[str], input_shapes: Mapping[str, Sequence[int]] | None = None,
         constant_inputs: Mapping[str, Tensor] | None = None) -> TracedModule:
    """Imports the ONNX model at `path` into kiln and compiles it (default
    passes): a TracedModule taking the model's inputs in order and returning
    its output, or a tuple of its outputs. Initializers become parameters
    under their ONNX names. A symbolic dimension in the file stays symbolic,
    so the module runs at any size of it (one plan per size): a dim_param
    names its size symbol (inputs that name the same one must agree), and a
    dimension without one gets a symbol of its own. Shape arithmetic on
    such sizes (Shape, Gather, Concat, Reshape, ...) is done at import.
    input_shapes: {name: shape} fixes inputs' shapes instead (a static
    import). constant_inputs: {name: tensor} binds inputs to fixed values
    (models that take a shape or axes as an input); they leave the module's
    inputs."""
    from kiln.jit import TracedModule, _outputs_spec
    shapes = {name: list(shape) for name, shape in (input_shapes or {}).items()}
    compiled, inputs, outputs = _C.onnx.load(os.fspath(path), shapes, dict(constant_inputs or {}))
    return TracedModule(compiled, _outputs_spec(compiled.num_outputs), os.path.basename(path))
