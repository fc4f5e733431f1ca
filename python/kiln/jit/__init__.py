"""kiln.jit: capture eager code into a graph and run it compiled.

    traced = kiln.jit.trace(net, x)       # a compiled module, for x's dtypes and shapes
    print(traced.graph)                   # the optimized IR as text
    net.hybridize()                       # compiles on each new input signature
    @kiln.compile                         # the same for a plain function
    def f(x, y): return kiln.sin(x) + kiln.cos(y)
    traced.save("net.kiln")               # graph + weights; C++ loads it too
    loaded = kiln.jit.load("net.kiln")    # a TracedModule again
    f = kiln.jit.script(f)                # its if/while/for on tensors stay in the graph

What the graph cannot hold (x.item(), bool(x) in an `if`, x.numpy(),
print(x), a generator of your own, ...) is reported while recording as a
TracerWarning at your line, or raised as TraceError with strict=True.
Random ops (kiln.randn_like, dropout, ...) draw anew on every call. Python
numbers a compiled entry read (module attributes, a compiled function's
globals and closure variables) are guarded: a change records it again.
"""
from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln._pytree import describe, flatten
from kiln.jit import _guards, _record
from kiln.jit._hybrid import HybridCache
from kiln.jit._record import (
    LEAF,
    NONE,
    Dim,
    Spec,
    TraceError,
    TracerWarning,
    record,
    unflatten,
)
from kiln.jit._script import script
from kiln.jit._script_runtime import ScriptError

Graph = _C.jit.Graph
Node = _C.jit.Node
Value = _C.jit.Value
CompileReport = _C.jit.CompileReport
parse_graph = _C.jit.parse_graph
set_step_threads = _C.jit.set_step_threads  # "choose" (the default) or "all"
get_step_threads = _C.jit.get_step_threads

__all__ = ["trace", "compile", "script", "ScriptError", "Dim", "from_graph", "save", "load",
           "TracedModule", "CompiledFunction", "TracerWarning", "TraceError", "Graph", "Node",
           "Value", "CompileReport", "parse_graph", "set_step_threads", "get_step_threads"]


def _compile_options(optimize: bool, frozen: bool, fast_math: bool,
                     passes: Sequence[str] | None, exact: bool = False) -> dict[str, Any]:
    return dict(optimize=optimize, frozen=frozen, fast_math=fast_math, exact=exact,
                passes=list(passes or []))


class TracedModule:
    """A recorded graph made callable: the result of kiln.jit.trace. Call it
    with tensors of the dtypes and shapes it was traced with."""

    def __init__(self, compiled: Any, spec: Spec, name: str, module: Any = None,
                 example_inputs: Sequence[Tensor] = (), in_spec: Spec = None,
                 custom_functions: tuple[str, ...] = ()) -> None:
        self._compiled = compiled
        self._run = compiled.run
        self._spec = spec
        self._single = spec is LEAF
        self._name = name
        self._module = module
        self._example_inputs = tuple(example_inputs)
        self._in_spec = in_spec  # the arguments' structure, when it holds containers
        # Custom autograd Functions whose forward ops the graph holds: their
        # backward is not in it, so the module refuses to be differentiated.
        self._custom_functions = custom_functions

    def __call__(self, *args: Any) -> Any:
        if self._in_spec is not None:
            args = self._flat_arguments(args)
        if self._custom_functions and _C.is_grad_enabled():
            self._refuse_gradients(args)
        out = self._run(args)
        return out[0] if self._single else unflatten(self._spec, out)

    def _refuse_gradients(self, args: tuple[Any, ...]) -> None:
        params = self._module.parameters() if self._module is not None else ()
        if any(t.requires_grad for t in (*args, *params) if isinstance(t, _C.Tensor)):
            names = ", ".join(self._custom_functions)
            raise RuntimeError(f"{self._name}: the traced graph holds the forward of the custom "
                               f"autograd Function {names}, not its backward, so it cannot be "
                               "differentiated; call it under kiln.no_grad(), or train the "
                               "module itself")

    def _flat_arguments(self, args: tuple[Any, ...]) -> tuple[Tensor, ...]:
        flat: list[Tensor] = []
        spec = flatten(args, flat, f"{self._name}'s inputs")
        if spec != self._in_spec:
            raise TypeError(f"{self._name}: called with inputs {describe(spec)}, but it was "
                            f"traced with {describe(self._in_spec)}")
        return tuple(flat)

    @property
    def graph(self) -> Any:
        """The optimized graph (read only; .clone() it to rewrite it)."""
        return self._compiled.graph

    @property
    def lowered_graph(self) -> Any:
        """The graph the compiled plan runs: .graph, or a copy of it with
        small static loops unrolled (KILN_UNROLL=0: never). Read only."""
        return self._compiled.lowered_graph

    def report(self) -> Any:
        """What the compiler did: per pass, nodes before/after, rules fired
        and time; the memory plan (planned bytes against the sum of every
        intermediate's size; with dynamic shapes, at the example's sizes and
        as a formula for any size); the time to record, optimize and lower."""
        return self._compiled.report

    def memory_formula(self) -> Any:
        """Peak memory of one call as a formula over the size symbols (a
        trace with dynamic shapes): `.peak` (intermediates + outputs, in
        bytes), `.intermediates`, `.outputs`, `.weights` (bytes, held once),
        `.evaluate({"batch": 64})`. Every size's plan allocates exactly what
        the formula says there. None for a trace with static shapes."""
        return self._compiled.memory_formula()

    def max_batch_for(self, nbytes: int, symbol: str | None = None, **sizes: int) -> int | None:
        """The largest value of the size symbol (the only one, or `symbol`;
        the others given as keywords) whose call fits in `nbytes` with the
        weights, within the trace's guards; None when not even 1 fits.

            traced.max_batch_for(2 * 2**30)           # batch fitting in 2 GiB
            traced.max_batch_for(2**30, "batch", seq=128)
        """
        return self._compiled.max_size_for(nbytes, symbol or "", sizes)

    def grad_graphs(self, *inputs: Tensor) -> tuple[Any, Any] | None:
        """(forward, backward): the graphs a call on `inputs` runs when
        autograd must see it (grad mode on and an input or parameter that
        requires grad). The forward also returns the activations the
        backward reads; the backward maps them and the outputs' gradients to
        the gradients of the inputs and parameters. None when the graph
        cannot be differentiated (eager autograd then runs its backward)."""
        return self._compiled.grad_graphs(list(inputs))

    @property
    def warnings(self) -> list[str]:
        """Everything tracing reported, as text."""
        return self._compiled.warnings

    def with_graph(self, graph: Any) -> TracedModule:
        """The same module running `graph` (a rewritten clone of self.graph):
        verified, then compiled."""
        return TracedModule(self._compiled.with_graph(graph), self._spec, self._name,
                            self._module, self._example_inputs, self._in_spec,
                            self._custom_functions)

    def save(self, path: str | os.PathLike[str],
             example_inputs: Tensor | Sequence[Tensor] | None = None) -> None:
        """Writes the optimized graph and its weights to `path` (a .kiln
        file that kiln.jit.load, kiln::jit::load in C++ and the `kiln` tool
        read). The file keeps an example input (the one traced with, unless
        given; () for none) with its outputs, which load(path, verify=True)
        replays."""
        self._refuse_function_nodes("save")
        if example_inputs is None:
            example_inputs = self._example_inputs
        elif isinstance(example_inputs, _C.Tensor):
            example_inputs = (example_inputs,)
        metadata = {"python.output_spec": json.dumps(_spec_to_json(self._spec)),
                    "python.name": self._name}
        if self._in_spec is not None:
            metadata["python.input_spec"] = json.dumps(_spec_to_json(self._in_spec))
        if self._custom_functions:
            metadata["python.custom_functions"] = json.dumps(list(self._custom_functions))
        _C.jit.save(self._compiled, os.fspath(path), list(example_inputs), metadata)

    def _refuse_function_nodes(self, what: str) -> None:
        """A custom Function recorded with grad mode on is a custom_function
        node calling this process's Python forward and backward: no file
        can hold it."""
        names = [node.attrs["name"] for node in self.graph.nodes if node.op == "custom_function"]
        if names:
            listed = ", ".join(dict.fromkeys(names))
            raise RuntimeError(f"{self._name}: {what} refused: the graph holds the custom autograd "
                               f"Function {listed} as a custom_function node, which calls Python "
                               "code of this process; trace the model under kiln.no_grad() to "
                               "record the forward's ops instead (an inference graph)")

    def parameters(self) -> Iterator[Tensor]:
        return self._module.parameters() if self._module is not None else iter(())

    def __repr__(self) -> str:
        return f"TracedModule({self._name})"


def _spec_to_json(spec: Spec) -> Any:
    if spec is LEAF:
        return LEAF
    if spec is NONE:
        return None
    if spec[0] is dict:
        if not all(isinstance(key, str) for key in spec[1]):
            raise TypeError("save: a traced module returning a dict needs string keys")
        return {"dict": [[key, _spec_to_json(s)] for key, s in zip(spec[1], spec[2])]}
    return {spec[0].__name__: [_spec_to_json(s) for s in spec[1]]}


def _spec_from_json(data: Any) -> Spec:
    if data == LEAF:
        return LEAF
    if data is None:
        return NONE
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"load: unknown output structure {data!r}")
    (kind, items), = data.items()
    if kind == "dict":
        return (dict, tuple(key for key, _ in items), tuple(_spec_from_json(s) for _, s in items))
    if kind not in ("tuple", "list"):
        raise ValueError(f"load: unknown output structure {kind!r}")
    return ({"tuple": tuple, "list": list}[kind], tuple(_spec_from_json(s) for s in items))


def _outputs_spec(num_outputs: int) -> Spec:
    return LEAF if num_outputs == 1 else (tuple, (LEAF,) * num_outputs)


def save(module: TracedModule, path: str | os.PathLike[str],
         example_inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """kiln.jit.save(traced, path), as torch.jit.save: traced.save(path)."""
    module.save(path, example_inputs)


def load(path: str | os.PathLike[str], verify: bool = False) -> TracedModule:
    """Reads a .kiln file (from TracedModule.save, or kiln::jit::save in C++)
    into a TracedModule. Weights are mapped from the file, not copied. A
    graph with symbolic sizes (`f32[batch, seq, 16]`) runs at any sizes its
    inputs bind that keep its guards, with no re-tracing or re-batching.
    verify: replay the example the file keeps and check the outputs."""
    compiled, metadata = _C.jit.load(os.fspath(path), verify)
    spec_text = metadata.get("python.output_spec")
    spec = _spec_from_json(json.loads(spec_text)) if spec_text else _outputs_spec(
        compiled.num_outputs)
    name = metadata.get("python.name", os.path.basename(os.fspath(path)))
    in_text = metadata.get("python.input_spec")
    in_spec = _spec_from_json(json.loads(in_text)) if in_text else None
    functions = tuple(json.loads(metadata.get("python.custom_functions", "[]")))
    return TracedModule(compiled, spec, name, in_spec=in_spec, custom_functions=functions)


def from_graph(graph: Any) -> TracedModule:
    """A TracedModule running `graph` (built, parsed or rewritten in Python),
    returning its one output, or a tuple of its outputs. The graph is
    verified and copied: later edits of it do not reach the module."""
    compiled = _C.jit.CompiledFunction.from_graph(graph)
    return TracedModule(compiled, _outputs_spec(compiled.num_outputs), "graph")


def trace(fn: Callable[..., Any], example_inputs: Tensor | Sequence[Tensor] | None = None,
          strict: bool = False, optimize: bool = True, frozen: bool = False,
          fast_math: bool = False, passes: Sequence[str] | None = None,
          dynamic_shapes: Any = None, *, check_trace: bool = False,
          check_inputs: Sequence[Any] | None = None, check_tolerance: float = 1e-5,
          example_kwarg_inputs: dict[str, Any] | None = None,
          exact: bool = False) -> TracedModule:
    """Runs `fn` (a Module or a function) once on `example_inputs` (a tensor,
    or a tuple of tensors; () for none) while recording every op, and returns
    a TracedModule running the recorded graph.

    A Module's parameters and buffers become graph parameters under their
    state_dict names, bound to the module's tensors (training them changes
    the traced module's results); any other tensor the code reads becomes a
    constant. Python control flow takes the path it took while tracing.
    The result may hold None where the function returns None (an optional
    output). optimize: run the default passes (results stay bit for bit
    eager's); frozen: parameters are constants too (inference: subgraphs of
    weights fold, and batch norm folds into the convolution or linear
    before it, which may change the last bits: report() lists each fold);
    exact: frozen, but keeping eager's rounding (no batch-norm folding);
    fast_math: also passes that may change rounding; passes:
    the pass names to run instead of the default list. strict: what the
    trace cannot see (a tensor read as a Python number) raises TraceError
    instead of warning.

    dynamic_shapes: input dims to keep symbolic, so the traced module runs
    at any size there: {"x": {0: "batch", 1: "seq"}} by input name, or one
    dict per positional input; a name may be kiln.jit.Dim("seq", max=512).
    Sizes the code reads (x.shape[0], x.size(1)) are then symbolic, and
    Python decisions on them (`if x.shape[1] > 128:`) become guards checked
    on every call.

    check_trace / check_inputs (torch.jit.trace's): run the traced module
    on the example (and on each tuple of check_inputs) beside `fn` itself
    and warn (TracerWarning) where an output differs by more than
    check_tolerance. Off by default: kiln's compiled results equal eager's
    by construction, and the check runs `fn` again (its side effects too).
    example_kwarg_inputs: keyword inputs, refused (kiln traces positional
    inputs)."""
    from kiln.nn import Module
    if example_kwarg_inputs:
        raise TypeError("kiln.jit.trace: example_kwarg_inputs is not supported; pass every "
                        "input positionally in example_inputs")
    if example_inputs is None:
        raise TypeError("kiln.jit.trace: example_inputs is required")
    inputs = (example_inputs,) if isinstance(example_inputs, _C.Tensor) else tuple(example_inputs)
    name = type(fn).__name__ if isinstance(fn, Module) else getattr(fn, "__name__", "function")
    # Tensors inside tuples, lists and dicts (an LSTM's (h0, c0)) are graph
    # inputs of their own; the traced module takes the same structure.
    given, flat = inputs, list[Tensor]()
    in_spec = flatten(inputs, flat, "a traced function's inputs")
    nested = any(s is not LEAF for s in in_spec[1])
    target = fn.forward if isinstance(fn, Module) else fn
    if nested:
        target = _called_with_structure(target, in_spec)
        inputs = tuple(flat)
    _record.check_inputs(inputs, f"trace({name})")
    options = _compile_options(optimize, frozen, fast_math, passes, exact)
    params = list(fn.state_dict(keep_vars=True).items()) if isinstance(fn, Module) else []
    from kiln.autograd import function as custom
    outer, custom.inference_trace = custom.inference_trace, []
    try:
        compiled, _, spec = record(target, inputs, params, strict, options,
                                   dynamic_shapes=dynamic_shapes)
        functions = tuple(dict.fromkeys(custom.inference_trace))
    finally:
        custom.inference_trace = outer
    traced = TracedModule(compiled, spec, name, fn if isinstance(fn, Module) else None, inputs,
                          in_spec=in_spec if nested else None, custom_functions=functions)
    if check_trace or check_inputs:
        _check_trace(fn, traced, [given, *(check_inputs or [])], check_tolerance)
    return traced


def _check_trace(fn: Callable[..., Any], traced: TracedModule, cases: Sequence[Any],
                 tolerance: float) -> None:
    import numpy as np
    for case in cases:
        case = (case,) if isinstance(case, _C.Tensor) else tuple(case)
        want: list[Tensor] = []
        flatten(fn(*case), want)
        got: list[Tensor] = []
        flatten(traced(*case), got)
        for i, (w, g) in enumerate(zip(want, got)):
            if not np.allclose(g.detach().numpy(), w.detach().numpy(), rtol=tolerance,
                               atol=tolerance, equal_nan=True):
                warnings.warn(f"Output nr {i + 1}. of the traced function does not match the "
                              f"corresponding output of the Python function", TracerWarning,
                              stacklevel=3)


class CompiledFunction:
    """A function compiled on its first call with each new input signature
    (@kiln.compile). Later calls with a signature seen before run the graph."""

    def __init__(self, fn: Callable[..., Any], strict: bool = False, optimize: bool = True,
                 frozen: bool = False, fast_math: bool = False,
                 passes: Sequence[str] | None = None, dynamic: bool | None = None,
                 exact: bool = False) -> None:
        functools.update_wrapper(self, fn)
        name = getattr(fn, "__name__", "function")
        self._hybrid = HybridCache(fn, f"compile({name})", strict=strict, bind_outside_state=True,
                                   dynamic=dynamic, values=lambda: _guards.function_values(fn),
                                   **_compile_options(optimize, frozen, fast_math, passes, exact))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._hybrid(args, kwargs)

    def cache_info(self) -> Any:
        return self._hybrid.cache_info()


def compile(fn: Callable[..., Any] | None = None, *, strict: bool = False, optimize: bool = True,
            frozen: bool = False, fast_math: bool = False,
            passes: Sequence[str] | None = None, dynamic: bool | None = None,
            exact: bool = False) -> Any:
    """@kiln.compile (or kiln.compile(fn)): compile `fn` per input signature.
    Given a Module, hybridizes it and returns it. dynamic: None (default)
    makes a dim symbolic once it takes a second value, so one entry serves
    every batch size; True makes every input dim symbolic from the first
    call; False keeps one entry per shape.

    Python values the code reads are guarded: its own globals and closure
    variables that hold numbers, flags or strings; the plain attributes of
    the modules it names (model.scale); the options of the optimizers it
    names, but the learning rate, which a compiled step reads as a tensor
    (schedulers work). A change records the code again, and cache_info()
    names the value, old -> new."""
    options: dict[str, Any] = dict(strict=strict, optimize=optimize, frozen=frozen,
                                   fast_math=fast_math, passes=passes, dynamic=dynamic,
                                   exact=exact)
    if fn is None:
        return lambda f: compile(f, **options)
    from kiln.nn import Module
    if isinstance(fn, Module):
        fn.hybridize(**options)
        return fn
    return CompiledFunction(fn, **options)


def _called_with_structure(fn: Callable[..., Any], in_spec: Spec) -> Callable[..., Any]:
    """fn taking the flat tensors of arguments whose structure is in_spec."""
    def call(*tensors: Tensor) -> Any:
        return fn(*unflatten(in_spec, tensors))
    return call
