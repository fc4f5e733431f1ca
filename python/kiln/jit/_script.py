"""kiln.jit.script: reads a function's Python source and rewrites its `if`,
`while` and `for` statements (and `and`, `or`, `not`, `a if c else b`) into
calls that decide when they run: on a kiln Tensor, the control-flow op that
keeps the branch or loop in the graph (kiln.cond, kiln.while_loop,
kiln.fori_loop, kiln.scan); on a Python value, plain Python, as TF's
AutoGraph does. Eagerly the scripted function computes what the original
does; recorded (kiln.jit.trace, kiln.compile, hybridize), its graph branches
and loops as the code does, for every input.

    @kiln.jit.script
    def f(x):
        while x.sum() > 1:          # a tensor condition: a while_loop
            x = x / 2
        return x
    print(f.code)                   # the rewritten source

The passes: _script_lower (return, break, continue out of the way),
_script_convert (the rewrite, helped by _script_analysis), and the calls the
rewritten code makes, _script_runtime. This file reads the source and builds
the new function over the original's globals and closure cells.
"""
from __future__ import annotations
import __future__

import ast
import inspect
import itertools
import textwrap
import types
from typing import Any

from kiln.jit import _script_runtime
from kiln.jit._script_analysis import (
    Bound,
    Liveness,
    bound_names,
    captured_names,
    own_statements,
)
from kiln.jit._script_convert import NUMBERS, RT, SITES, Expressions, Statements, _params
from kiln.jit._script_lower import Lowering, at, load
from kiln.jit._script_runtime import ScriptError, Site

_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def script(fn: Any) -> Any:
    """Rewrites `fn`'s `if`/`elif`/`else`, `while` and `for` so that a
    condition, a range bound or an iterable that is a kiln Tensor keeps the
    branch or loop in the graph (kiln.cond, kiln.while_loop, kiln.fori_loop,
    kiln.scan), while Python values keep plain Python. Accepts a function,
    a method, or a Module (whose forward it scripts, in place; the module is
    returned). The result's `.code` is the rewritten source.

    On a tensor: the variables an `if` assigns and code after it reads
    become the cond's outputs (tensors, or containers of them; a variable
    assigned in one branch only must be bound before the `if`); a loop
    carries the variables it assigns that it or the code after it reads
    (Python numbers among them become tensors). `break`, `continue` and
    `return` work, but `return` inside a loop on a tensor. What the graph
    cannot do the same (a list appended to inside a loop on a tensor,
    `try` or `raise` under a tensor condition, a variable the graph cannot
    carry) raises ScriptError naming the variable or construct and the file
    and line."""
    from kiln.nn import Module
    if isinstance(fn, Module):
        forward: Any = fn.forward
        if not _is_scripted(forward):
            object.__setattr__(fn, "forward", script(forward))
        return fn
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return types.MethodType(_script_function(fn.__func__), fn.__self__)
    if isinstance(fn, types.FunctionType):
        return _script_function(fn)
    raise TypeError(f"script: expected a function, a method or a Module, got a "
                    f"{type(fn).__name__}")


def _is_scripted(fn: Any) -> bool:
    return getattr(getattr(fn, "__func__", fn), "__kiln_script__", False)


def _script_function(fn: types.FunctionType) -> types.FunctionType:
    if _is_scripted(fn):
        return fn
    name = fn.__qualname__
    if fn.__name__ == "<lambda>":
        raise ScriptError(f"script: {name} is a lambda; script converts functions defined "
                          "with `def`")
    if hasattr(fn, "__wrapped__"):
        raise ScriptError(f"script: {name} is wrapped by a decorator; apply kiln.jit.script "
                          "to the function itself (the innermost decorator)")
    if fn.__code__.co_flags & _GENERATOR_FLAGS:
        kind = "a generator" if fn.__code__.co_flags & inspect.CO_GENERATOR else "asynchronous"
        raise ScriptError(f"script: {name} ({fn.__code__.co_filename}:"
                          f"{fn.__code__.co_firstlineno}) is {kind}; script converts plain "
                          "functions")
    fdef, file = _parse(fn)
    converted, sites = convert(fdef, file, fn)
    text = ast.unparse(converted)
    scripted = _build(fn, converted, file, sites)
    scripted.code = text  # type: ignore[attr-defined]
    scripted.__kiln_script__ = True  # type: ignore[attr-defined]
    return scripted


def _parse(fn: types.FunctionType) -> tuple[ast.FunctionDef, str]:
    """fn's `def` from its source, with the file's line numbers."""
    file = fn.__code__.co_filename
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError) as error:
        raise ScriptError(f"script: cannot read the source of {fn.__qualname__} (defined in "
                          f"{file}): {error}") from None
    source = "".join(lines)
    if source[:1].isspace():  # a method or a nested function: parse it inside a block
        tree = ast.parse("if 1:\n" + source)
        ast.increment_lineno(tree, start - 2)
        node = tree.body[0].body[0]  # type: ignore[attr-defined]
    else:
        tree = ast.parse(textwrap.dedent(source))
        ast.increment_lineno(tree, start - 1)
        node = tree.body[0]
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        raise ScriptError(f"script: the source of {fn.__qualname__} at {file}:{start} is not "
                          f"its `def`")
    node.decorator_list = []
    return node, file


def convert(fdef: ast.FunctionDef, file: str, fn: types.FunctionType | None = None
            ) -> tuple[ast.FunctionDef, list[Site]]:
    """The rewritten `def` and the sites its calls name."""
    if fn is not None:
        _mangle(fdef, fn.__qualname__)
        _explicit_super(fdef, fn)
    declared = {n: (type(node).__name__.lower(), node.lineno)
                for node in own_statements(fdef.body) if isinstance(node, (ast.Global,
                                                                          ast.Nonlocal))
                for n in node.names}
    taken = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | \
        {a.arg for a in ast.walk(fdef) if isinstance(a, ast.arg)}
    counter = itertools.count(1)

    def new_name(base: str) -> str:
        while True:
            candidate = f"{base}_{next(counter)}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate

    sites: list[Site] = []

    def add_site(site: Site) -> ast.expr:
        sites.append(site)
        return ast.Subscript(value=load(SITES), slice=ast.Constant(value=len(sites) - 1),
                             ctx=ast.Load())

    Lowering(file, new_name).function(fdef)
    # A loop may turn a Python number into a tensor, on which `+=` would write
    # in place: the function then keeps the set of those names (runtime.aug).
    numbers = any(isinstance(n, (ast.While, ast.For)) for n in own_statements(fdef.body)) and \
        any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
            for n in own_statements(fdef.body))
    fdef.body = [Expressions(add_site, file, numbers).visit(stmt) for stmt in fdef.body]
    params = {a.arg for a in ast.walk(fdef.args) if isinstance(a, ast.arg)}
    captured, dynamic = captured_names(fdef)
    if dynamic:  # locals(), eval, ...: any variable may be read anywhere
        captured |= bound_names(fdef.body) | params
    liveness = Liveness(captured)
    liveness.block(fdef.body, frozenset())
    Bound().block(fdef.body, frozenset(params))
    fdef.body = Statements(file, declared, liveness, new_name, add_site, numbers).block(fdef.body)
    if numbers:
        fdef.body.insert(0, at(ast.Assign(targets=[ast.Name(id=NUMBERS, ctx=ast.Store())],
                                          value=ast.Call(func=load("set"), args=[], keywords=[])),
                               fdef.body[0]))
    return fdef, sites


def _build(fn: types.FunctionType, fdef: ast.FunctionDef, file: str,
           sites: list[Site]) -> types.FunctionType:
    """Compiles the rewritten `def` inside a factory whose parameters are
    fn's free variables, so that they stay free variables of the new code;
    the new function then gets fn's own cells: it sees what fn sees, as it
    changes."""
    freevars = fn.__code__.co_freevars
    fdef.args.defaults, fdef.args.kw_defaults = [], [None] * len(fdef.args.kwonlyargs)
    factory = ast.FunctionDef(name="_kiln_factory", args=_params([*freevars, RT, SITES]),
                              body=[fdef, ast.Return(value=load(fdef.name))],
                              decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[ast.copy_location(factory, fdef)], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, file, "exec", flags=fn.__code__.co_flags & _FUTURE_FLAGS,
                   dont_inherit=True)
    factory_code = _code_named(code, "_kiln_factory")
    inner = _code_named(factory_code, fdef.name)
    cells = dict(zip(freevars, fn.__closure__ or ()))
    cells[RT] = types.CellType(_script_runtime)
    cells[SITES] = types.CellType(sites)
    scripted = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__,
                                  tuple(cells[name] for name in inner.co_freevars))
    scripted.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    for attr in ("__module__", "__qualname__", "__doc__"):
        setattr(scripted, attr, getattr(fn, attr))
    scripted.__annotations__ = dict(fn.__annotations__)
    scripted.__dict__.update(fn.__dict__)
    scripted.__wrapped__ = fn  # type: ignore[attr-defined]
    return scripted


def _code_named(code: types.CodeType, name: str) -> types.CodeType:
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def _mangle(fdef: ast.FunctionDef, qualname: str) -> None:
    """A method's `self.__x` is `self._Class__x` when compiled in its class;
    the rewritten code is compiled outside it, so it spells it out."""
    parts = qualname.split(".")
    owner = parts[-2].lstrip("_") if len(parts) >= 2 and parts[-2] != "<locals>" else ""
    if not owner:
        return

    def mangled(name: str) -> str:
        if name.startswith("__") and not name.endswith("__") and "." not in name:
            return f"_{owner}{name}"
        return name
    for node in ast.walk(fdef):
        if isinstance(node, ast.Attribute):
            node.attr = mangled(node.attr)
        elif isinstance(node, ast.Name):
            node.id = mangled(node.id)


def _explicit_super(fdef: ast.FunctionDef, fn: types.FunctionType) -> None:
    """super() finds its class and instance in the frame it runs in, which
    for a statement moved into a branch function is not the method's:
    super() -> super(__class__, self)."""
    args = fdef.args.posonlyargs + fdef.args.args
    if "__class__" not in fn.__code__.co_freevars or not args:
        return
    for node in own_statements(fdef.body):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "super" and not node.args and not node.keywords:
            node.args = [load("__class__"), load(args[0].arg)]

