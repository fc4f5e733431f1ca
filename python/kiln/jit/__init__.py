"""kiln.jit: capture eager code into a graph and run it compiled.

    traced = kiln.jit.trace(net, x)       # a compiled module, for x's dtypes and shapes
    print(traced.graph)                   # the optimized IR as text
    net.hybridize()                       # compiles on each new input signature
    @kiln.compile                         # the same for a plain function
    def f(x, y): return kiln.sin(x) + kiln.cos(y)

What the graph cannot hold (x.item(), bool(x) in an `if`, x.numpy(),
print(x), random factories, ...) is reported while recording as a
TracerWarning at your line, or raised as TraceError with strict=True.
"""
import functools

from kiln import _C
from kiln.jit._hybrid import HybridCache
from kiln.jit._record import LEAF, TraceError, TracerWarning, check_inputs, record, unflatten

Graph = _C.jit.Graph
Node = _C.jit.Node
Value = _C.jit.Value
CompileReport = _C.jit.CompileReport
parse_graph = _C.jit.parse_graph

__all__ = ["trace", "compile", "from_graph", "TracedModule", "CompiledFunction", "TracerWarning",
           "TraceError", "Graph", "Node", "Value", "CompileReport", "parse_graph"]


def _compile_options(optimize, frozen, fast_math, passes):
    return dict(optimize=optimize, frozen=frozen, fast_math=fast_math, passes=list(passes or []))


class TracedModule:
    """A recorded graph made callable: the result of kiln.jit.trace. Call it
    with tensors of the dtypes and shapes it was traced with."""

    def __init__(self, compiled, spec, name, module=None):
        self._compiled = compiled
        self._run = compiled.run
        self._spec = spec
        self._single = spec is LEAF
        self._name = name
        self._module = module

    def __call__(self, *args):
        out = self._run(args)
        return out[0] if self._single else unflatten(self._spec, out)

    @property
    def graph(self):
        """The optimized graph (read only; .clone() it to rewrite it)."""
        return self._compiled.graph

    def report(self):
        """What the compiler did: per pass, nodes before/after, rules fired
        and time; the memory plan (planned bytes against the sum of every
        intermediate's size); the time to record, optimize and lower."""
        return self._compiled.report

    @property
    def warnings(self):
        """Everything tracing reported, as text."""
        return self._compiled.warnings

    def with_graph(self, graph):
        """The same module running `graph` (a rewritten clone of self.graph):
        verified, then compiled."""
        return TracedModule(self._compiled.with_graph(graph), self._spec, self._name,
                            self._module)

    def parameters(self):
        return self._module.parameters() if self._module is not None else iter(())

    def __repr__(self):
        return f"TracedModule({self._name})"


def from_graph(graph):
    """A TracedModule running `graph` (built, parsed or rewritten in Python),
    returning its one output, or a tuple of its outputs. The graph is
    verified and copied: later edits of it do not reach the module."""
    compiled = _C.jit.CompiledFunction.from_graph(graph)
    spec = LEAF if compiled.num_outputs == 1 else (tuple, (LEAF,) * compiled.num_outputs)
    return TracedModule(compiled, spec, "graph")


def trace(fn, example_inputs, strict=False, optimize=True, frozen=False, fast_math=False,
          passes=None):
    """Runs `fn` (a Module or a function) once on `example_inputs` (a tensor,
    or a tuple of tensors; () for none) while recording every op, and returns
    a TracedModule running the recorded graph.

    A Module's parameters and buffers become graph parameters under their
    state_dict names, bound to the module's tensors (training them changes
    the traced module's results); any other tensor the code reads becomes a
    constant. Python control flow takes the path it took while tracing.
    optimize: run the default passes (results stay bit for bit eager's);
    frozen: parameters are constants too (inference: subgraphs of weights
    fold); fast_math: also passes that may change rounding; passes: the
    pass names to run instead of the default list."""
    from kiln.nn import Module
    inputs = (example_inputs,) if isinstance(example_inputs, _C.Tensor) else tuple(example_inputs)
    name = type(fn).__name__ if isinstance(fn, Module) else getattr(fn, "__name__", "function")
    check_inputs(inputs, f"trace({name})")
    options = _compile_options(optimize, frozen, fast_math, passes)
    if isinstance(fn, Module):
        params = list(fn.state_dict(keep_vars=True).items())
        compiled, _, spec = record(fn.forward, inputs, params, strict, options)
        return TracedModule(compiled, spec, name, fn)
    compiled, _, spec = record(fn, inputs, [], strict, options)
    return TracedModule(compiled, spec, name)


class CompiledFunction:
    """A function compiled on its first call with each new input signature
    (@kiln.compile). Later calls with a signature seen before run the graph."""

    def __init__(self, fn, strict=False, optimize=True, frozen=False, fast_math=False,
                 passes=None):
        functools.update_wrapper(self, fn)
        name = getattr(fn, "__name__", "function")
        self._hybrid = HybridCache(fn, f"compile({name})", strict=strict,
                                   **_compile_options(optimize, frozen, fast_math, passes))

    def __call__(self, *args, **kwargs):
        return self._hybrid(args, kwargs)

    def cache_info(self):
        return self._hybrid.cache_info()


def compile(fn=None, *, strict=False, optimize=True, frozen=False, fast_math=False,
            passes=None):
    """@kiln.compile (or kiln.compile(fn)): compile `fn` per input signature.
    Given a Module, hybridizes it and returns it."""
    options = dict(strict=strict, optimize=optimize, frozen=frozen, fast_math=fast_math,
                   passes=passes)
    if fn is None:
        return lambda f: compile(f, **options)
    from kiln.nn import Module
    if isinstance(fn, Module):
        fn.hybridize(**options)
        return fn
    return CompiledFunction(fn, **options)
