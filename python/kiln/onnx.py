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

import enum
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kiln import _C
from kiln._C import Tensor

if TYPE_CHECKING:
    from kiln.jit import TracedModule
    from kiln.nn import Module

# dynamic_axes: {name: {0: "batch"}} or {name: [0]}
DynamicAxes = Mapping[str, Mapping[int, str] | Sequence[int]]

__all__ = ["export", "load", "can_export", "importable_ops", "TrainingMode", "SpecializedModel"]

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


class TrainingMode(enum.Enum):
    """torch.onnx.TrainingMode: the mode a Module is exported in. EVAL (the
    default) exports it as module.eval() computes (dropout off, batch-norm
    with running statistics); PRESERVE, in the mode it is in; TRAINING, as
    module.train() computes."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


# torch.onnx.export's keywords that choose among its own exporters, or
# among what it reports and writes beside the model. kiln has one exporter
# (the trace), so they change nothing; they are accepted so that a
# PyTorch call runs as written.
_ACCEPTED_AND_IGNORED = frozenset({
    "verbose", "dynamo", "external_data", "report", "optimize", "profile",
    "dump_exported_program", "artifacts_dir", "fallback", "operator_export_type",
    "custom_opsets", "export_modules_as_functions", "autograd_inlining",
    "custom_translation_table"})


def _split_args(args: Any, kwargs: Mapping[str, Any] | None) -> tuple[Tensor, ...]:
    """torch's `args`: a tensor, or a tuple of them that may end with a dict
    of keyword inputs. kiln traces positional tensor inputs only."""
    if isinstance(args, _C.Tensor):
        args = (args,)
    args = tuple(args)
    if args and isinstance(args[-1], Mapping):
        kwargs = {**args[-1], **(kwargs or {})}
        args = args[:-1]
    if kwargs:
        raise TypeError(f"kiln.onnx.export: keyword inputs ({', '.join(map(str, kwargs))}) "
                        "are not supported; pass every input positionally in `args`")
    return args


def _renamed_axes(model: Any, dynamic_axes: DynamicAxes | None,
                  input_names: Sequence[str] | None) -> DynamicAxes | None:
    """dynamic_axes keyed by input_names (as PyTorch users write it), keyed
    by the model's own argument names instead, which the trace uses."""
    if not dynamic_axes or not input_names:
        return dynamic_axes
    from kiln.jit import _record
    from kiln.nn import Module
    own = _record.input_names(model.forward if isinstance(model, Module) else model)
    given = dict(zip(input_names, own))
    return {given.get(name, name): axes for name, axes in dynamic_axes.items()}


def _write(traced: TracedModule, f: Any, options: dict[str, Any]) -> None:
    traced._refuse_function_nodes("onnx export")
    if hasattr(f, "write"):  # a file object (io.BytesIO), as torch accepts
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.onnx")
            _C.onnx.export(traced._compiled, path, **options)
            with open(path, "rb") as written:
                f.write(written.read())
        return
    _C.onnx.export(traced._compiled, os.fspath(f), **options)


def _verify(f: Any, traced: TracedModule, inputs: tuple[Tensor, ...]) -> None:
    """verify=True: the written model, imported back, gives the traced
    model's outputs on the example."""
    if hasattr(f, "write"):
        return  # nothing to read back from a stream
    import numpy as np
    reloaded = load(f)
    want, got = traced(*inputs), reloaded(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for i, (w, g) in enumerate(zip(want, got)):
        if w is None:
            continue
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=f"kiln.onnx.export(verify=True): output {i}")


def export(model: Module | TracedModule | Callable[..., Any], args: Any = (),
           f: str | os.PathLike[str] | Any = None, *, kwargs: Mapping[str, Any] | None = None,
           export_params: bool = True, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, opset_version: int | None = None,
           dynamic_axes: DynamicAxes | None = None, keep_initializers_as_inputs: bool = False,
           dynamic_shapes: Any = None, do_constant_folding: bool = True,
           training: TrainingMode | None = None, verify: bool = False,
           **ignored: Any) -> None:
    """Writes `model` (a Module, a function, or a TracedModule) to `f` (a
    path or a binary file object) as an ONNX model, with torch.onnx.export's
    signature. args: the example input tensor, or a tuple of them (None for
    a TracedModule); the model is traced on them.

    input_names / output_names: names of the graph's inputs and outputs.
    opset_version: 13 to 17 (default 17). dynamic_axes: {name: {0: "batch",
    1: "seq"}} (names from input_names or the model's arguments) keeps those
    dims symbolic: the model is traced with them as dynamic shapes and the
    outputs' sizes follow; dynamic_shapes: the same, in torch.export's
    form. A TracedModule with symbolic sizes exports them without either.
    export_params=False makes the weights graph inputs;
    keep_initializers_as_inputs lists them as inputs too. training: a
    Module is exported in eval mode unless TrainingMode.PRESERVE or
    TRAINING. do_constant_folding=False skips kiln's graph passes.
    verify=True reads the file back and checks it gives the model's
    outputs. The keywords that choose among torch's exporters (dynamo,
    external_data, report, ...) are accepted and change nothing."""
    unknown = set(ignored) - _ACCEPTED_AND_IGNORED
    if unknown:
        raise TypeError(f"kiln.onnx.export() got unexpected keyword arguments "
                        f"{', '.join(sorted(unknown))}")
    if f is None:
        raise TypeError("kiln.onnx.export: `f`, the path or file to write, is required")
    from kiln import no_grad
    from kiln.jit import TracedModule, trace
    from kiln.nn import Module
    if isinstance(model, SpecializedModel):
        raise TypeError(f"kiln.onnx.export: {model._name}'s graph depends on the values of its "
                        f"inputs {', '.join(model.value_inputs)}, so no one graph holds it; "
                        "export the graph of one tuple of values: "
                        "kiln.onnx.export(model.specialize(*inputs), None, f)")
    inputs: tuple[Tensor, ...] = ()
    if isinstance(model, TracedModule):
        traced = model
        inputs = tuple(model._example_inputs or ()) if verify else ()
    else:
        inputs = _split_args(args, kwargs)
        dynamic_axes = _renamed_axes(model, dynamic_axes, input_names)
        shapes = dynamic_shapes if dynamic_shapes is not None else _dynamic_shapes(
            model, dynamic_axes)
        mode = TrainingMode.EVAL if training is None else training
        module = model if isinstance(model, Module) else None
        was_training = module.training if module is not None else False
        if module is not None and mode is not TrainingMode.PRESERVE:
            module.train(mode is TrainingMode.TRAINING)
        try:
            with no_grad():  # an inference graph (custom Functions record their forward)
                traced = trace(model, inputs, dynamic_shapes=shapes,
                               optimize=do_constant_folding)
        finally:
            if module is not None:
                module.train(was_training)
        _check_still_dynamic(traced, shapes)
    options = dict(opset_version=17 if opset_version is None else int(opset_version),
                   dynamic_batch=_dynamic_batch(traced, dynamic_axes),
                   output_names=list(output_names or []), input_names=list(input_names or []),
                   export_params=bool(export_params),
                   keep_initializers_as_inputs=bool(keep_initializers_as_inputs))
    _write(traced, f, options)
    if verify and inputs:
        with no_grad():
            _verify(f, traced, inputs)


# How an input or output is given flat to kiln._C.onnx.Model.call: one
# tensor, an absent optional (None), or a list of n tensors (n).
_TENSOR_FORM, _ABSENT_FORM = -1, -2


def _flatten(args: Sequence[Any]) -> tuple[list[Tensor], list[int]]:
    """The tensors of a call's inputs, flat, and each input's form."""
    tensors: list[Tensor] = []
    forms: list[int] = []
    for arg in args:
        if arg is None:
            forms.append(_ABSENT_FORM)
        elif isinstance(arg, (list, tuple)):
            forms.append(len(arg))
            tensors.extend(arg)
        else:
            forms.append(_TENSOR_FORM)
            tensors.append(arg)
    return tensors, forms


def _regroup(tensors: Sequence[Tensor], forms: Sequence[int]) -> list[Any]:
    """The outputs from their tensors, flat, and forms: a tensor, None or a list."""
    outputs: list[Any] = []
    at = 0
    for form in forms:
        if form == _ABSENT_FORM:
            outputs.append(None)
        elif form == _TENSOR_FORM:
            outputs.append(tensors[at])
            at += 1
        else:
            outputs.append(list(tensors[at:at + form]))
            at += form
    return outputs


class SpecializedModel:
    """An ONNX model some of whose inputs decide its graph (a Reshape's
    shape, a TopK's k, a Slice's starts, a Loop's trip count fed from a
    graph input), or which takes or gives ONNX sequences or optionals:
    kiln.onnx.load returns it for such a model. Call it with every input,
    as ONNX Runtime is called; each call reads the value inputs
    (`value_inputs`) and runs the graph imported for those values, the
    other inputs being its inputs. Graphs are cached per distinct tuple of
    values, at most `max_specializations` (the least recently used is
    dropped), as torch.compile specializes on Python ints.

    A sequence is given and returned as a list of tensors, an optional as
    a tensor (or list) or None; kiln's graph holds a sequence as its
    tensors, so graphs are also cached per number and shapes of the
    tensors of the sequence and optional inputs.

    There is no one graph to save or export: `specialize(*inputs)` gives
    the TracedModule of one tuple of values (taking the other inputs),
    which can be."""

    def __init__(self, model: Any, name: str) -> None:
        self._model = model
        self._name = name
        self._single = len(model.output_names) == 1

    def __call__(self, *args: Any) -> Any:
        tensors, forms = _flatten(args)
        flat, output_forms = self._model.call(tensors, forms)
        out = _regroup(flat, output_forms)
        return out[0] if self._single else tuple(out)

    @property
    def value_inputs(self) -> list[str]:
        """The inputs calls specialize on (it can grow on a call, when a
        translation asks for an input only once others have values)."""
        return self._model.value_inputs

    @property
    def shape_inputs(self) -> list[str]:
        """The inputs whose shapes calls specialize on: a comparison of their
        symbolic sizes decides the graph's form (silero VAD squeezes an axis
        when it has one frame)."""
        return self._model.shape_inputs

    @property
    def input_names(self) -> list[str]:
        return self._model.input_names

    @property
    def output_names(self) -> list[str]:
        return self._model.output_names

    @property
    def num_specializations(self) -> int:
        """The graphs cached now."""
        return self._model.num_specializations

    @property
    def max_specializations(self) -> int:
        return self._model.max_specializations

    def specialize(self, *args: Any) -> TracedModule:
        """The TracedModule a call with `args` runs: the graph imported for
        the value inputs' values in `args`, taking the other inputs (the
        tensors of sequences and optionals, flat)."""
        from kiln.jit import TracedModule, _outputs_spec
        compiled = self._model.compiled_for(*_flatten(args))
        return TracedModule(compiled, _outputs_spec(compiled.num_outputs), self._name)

    def save(self, path: str | os.PathLike[str], *args: Any) -> None:
        raise RuntimeError(f"{self._name}: save refused: the model's graph depends on the values "
                           f"of its inputs {', '.join(self.value_inputs)}, so no one graph "
                           "holds it; save the graph of one tuple of values instead: "
                           "model.specialize(*inputs).save(path)")

    def parameters(self) -> Any:
        return iter(())

    def __repr__(self) -> str:
        return f"SpecializedModel({self._name}, value_inputs={self.value_inputs})"


def load(path: str | os.PathLike[str], input_shapes: Mapping[str, Sequence[int]] | None = None,
         constant_inputs: Mapping[str, Tensor] | None = None,
         max_specializations: int = 8) -> TracedModule | SpecializedModel:
    """Imports the ONNX model at `path` into kiln and compiles it (default
    passes): a TracedModule taking the model's inputs in order and returning
    its output, or a tuple of its outputs. Initializers become parameters
    under their ONNX names. A symbolic dimension in the file stays symbolic,
    so the module runs at any size of it (one plan per size): a dim_param
    names its size symbol (inputs that name the same one must agree), and a
    dimension without one gets a symbol of its own. Shape arithmetic on
    such sizes (Shape, Gather, Concat, Reshape, ...) is done at import.
    input_shapes: {name: shape} fixes inputs' shapes instead (a static
    import).

    A model that feeds a shape, axes, a k or a trip count from its inputs
    gives a SpecializedModel instead: called with every input, it imports
    one graph per distinct tuple of those inputs' values (at most
    max_specializations kept), as does one whose graph's form depends on a
    comparison of symbolic sizes (per shape of the inputs holding them,
    `shape_inputs`), and one that takes or gives ONNX
    sequences (lists of tensors) or optionals (None when empty).
    constant_inputs: {name: tensor} binds inputs to fixed values at load;
    they leave the model's inputs."""
    from kiln.jit import TracedModule, _outputs_spec
    shapes = {name: list(shape) for name, shape in (input_shapes or {}).items()}
    model = _C.onnx.Model(os.fspath(path), shapes, dict(constant_inputs or {}),
                          int(max_specializations))
    name = os.path.basename(path)
    if model.value_inputs or model.shape_inputs or model.has_composites:
        return SpecializedModel(model, name)
    compiled = model.compiled()
    return TracedModule(compiled, _outputs_spec(compiled.num_outputs), name)
