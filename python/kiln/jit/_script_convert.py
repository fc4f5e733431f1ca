"""The rewrite at the heart of kiln.jit.script: each `if`, `while` and `for`
of the function becomes functions over the statement's state and one call
into _script_runtime, which decides when it runs whether that is plain
Python or a control-flow op. `and`, `or`, `not` and `a if c else b` become
calls too, so that they work on tensors.

    if x.sum() > 0:                def _if_true_1(y):
        y = x * 2                      y = x * 2
    else:                   ->         return (y,)
        y = -x                     def _if_false_1(y):
                                       y = -x
                                       return (y,)
                                   (y,) = _kiln_rt.if_stmt(x.sum() > 0, _if_true_1,
                                       _if_false_1, (locals().get('y', UNDEFINED),),
                                       _kiln_sites[0])
                                   if y is _kiln_rt.UNDEFINED:
                                       del y

It runs after _script_lower (no jump is left inside an `if` or loop) and
after _script_analysis annotated each statement (live and bound names).
"""
from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from kiln.jit import _script_analysis as analysis
from kiln.jit._script_lower import at, load
from kiln.jit._script_runtime import ScriptError, Site

RT = "_kiln_rt"  # the runtime module, a closure variable of the scripted function
SITES = "_kiln_sites"  # the list of Site, another
ITEM = "_kiln_item"  # a `for` body's parameter: the item of this iteration
NUMBERS = "_kiln_numbers"  # the names a tensor loop turned from Python numbers into tensors
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
        ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}


def _rt(attr: str) -> ast.Attribute:
    return ast.Attribute(value=load(RT), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[])


def _thunk(body: ast.expr) -> ast.Lambda:
    lam = ast.Lambda(args=_params([]), body=body)
    analysis.note(lam, "generated", True)
    return lam


def _params(names: Sequence[str]) -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _tuple(items: Sequence[ast.expr], ctx: ast.expr_context | None = None) -> ast.Tuple:
    return ast.Tuple(elts=list(items), ctx=ctx or ast.Load())


class Expressions(ast.NodeTransformer):
    """and / or / not / a if c else b -> _kiln_rt.and_ / or_ / not_ / if_exp,
    each operand that Python evaluates lazily wrapped in a lambda. Nested
    functions, lambdas and comprehensions keep their own code; an operand
    with `:=`, `yield` or `await` (which a lambda would change) is left."""

    def __init__(self, add_site: Callable[[Site], ast.expr], file: str,
                 numbers: bool = False) -> None:
        self.add_site, self.file = add_site, file
        self.numbers = numbers  # rewrite `n op= v` for _kiln_rt.aug

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if analysis.is_scope(node) or isinstance(node, analysis.COMPREHENSIONS):
            return node
        return super().generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node  # the top function is visited through its body

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if not self.numbers or not isinstance(node.target, ast.Name):
            return node
        name = node.target.id
        call = _call(_rt("aug"), load(NUMBERS), ast.Constant(value=name), load(name),
                     ast.Constant(value=_OPS[type(node.op)]), node.value)
        return at(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call), node)

    @staticmethod
    def _plain(nodes: Sequence[ast.AST]) -> bool:
        return not any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await))
                       for node in nodes for n in ast.walk(node))

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if not self._plain(node.values):
            return node
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        return at(_call(_rt(fn), *[_thunk(v) for v in node.values]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return at(_call(_rt("not_"), node.operand), node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if not self._plain([node.body, node.orelse]):
            return node
        site = self.add_site(Site("conditional expression", self.file, node.lineno))
        return at(_call(_rt("if_exp"), node.test, _thunk(node.body), _thunk(node.orelse),
                              site), node)


class Statements:
    """Rewrites the `if`s and loops of a function body, innermost first."""

    def __init__(self, file: str, declared: dict[str, tuple[str, int]],
                 liveness: analysis.Liveness, new_name: Callable[[str], str],
                 add_site: Callable[[Site], ast.expr], numbers: bool = False) -> None:
        self.file = file
        self.numbers = numbers  # pass _kiln_numbers to the loops
        self.declared = declared  # global/nonlocal names: {name: (statement, line)}
        self.liveness = liveness
        self.new_name = new_name
        self.add_site = add_site

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                out += self.if_(stmt)
            elif isinstance(stmt, (ast.While, ast.For)):
                out += self.loop(stmt)
            else:
                if not analysis.is_scope(stmt):
                    for field in ("body", "orelse", "finalbody"):
                        if isinstance(getattr(stmt, field, None), list):
                            setattr(stmt, field, self.block(getattr(stmt, field)))
                    for part in getattr(stmt, "handlers", []) + getattr(stmt, "cases", []):
                        part.body = self.block(part.body)
                out.append(stmt)
        return out

    # -- the state ---------------------------------------------------------------
    def _names(self, what: str, node: ast.stmt, parts: Sequence[ast.AST]) -> list[str]:
        names = analysis.bound_names(parts)
        for name in sorted(names & set(self.declared)):
            statement, line = self.declared[name]
            raise ScriptError(
                f"script: `{statement} {name}` (line {line}) is assigned inside the `{what}` at "
                f"{self.file}:{node.lineno}, whose body script turns into a function; assign "
                f"it outside the `{what}`")
        return sorted(names)

    @staticmethod
    def _read(names: Sequence[str], bound: frozenset[str] | set[str],
              live: frozenset[str] | None = None) -> ast.Tuple:
        """The state's values, UNDEFINED for a name not bound (yet), or not
        `live` (assigned before any read, whatever it holds now)."""
        def value(name: str) -> ast.expr:
            if live is not None and name not in live:
                return _rt("UNDEFINED")
            if name in bound:
                return load(name)
            get = ast.Attribute(value=_call(load("locals")), attr="get", ctx=ast.Load())
            return _call(get, ast.Constant(value=name), _rt("UNDEFINED"))
        return _tuple([value(n) for n in names])

    def _function(self, name: str, params: Sequence[str], body: list[ast.stmt],
                  names: Sequence[str], like: ast.stmt) -> ast.FunctionDef:
        unbound = {n.id for n in analysis.own_statements(body)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}
        unbound |= {n.name for n in analysis.own_statements(body)
                    if isinstance(n, ast.ExceptHandler) and n.name}
        back = ast.Return(value=self._read(names, set(names) - unbound))
        fdef = ast.FunctionDef(name=name, args=_params(params), body=body + [back],
                               decorator_list=[], returns=None, type_comment=None)
        return at(fdef, like)

    def _assign_back(self, names: Sequence[str], call: ast.Call, bound: frozenset[str] | set[str],
                     like: ast.stmt) -> list[ast.stmt]:
        if not names:
            return [at(ast.Expr(value=call), like)]
        target = _tuple([ast.Name(id=n, ctx=ast.Store()) for n in names], ast.Store())
        out: list[ast.stmt] = [ast.Assign(targets=[target], value=call)]
        for n in names:
            if n not in bound:  # unbound before and maybe still: as Python leaves it
                test = ast.Compare(left=load(n), ops=[ast.Is()], comparators=[_rt("UNDEFINED")])
                out.append(ast.If(test=test, body=[ast.Delete(
                    targets=[ast.Name(id=n, ctx=ast.Del())])], orelse=[]))
        return [at(s, like) for s in out]

    def _watched(self, body: Sequence[ast.stmt], live: frozenset[str]
                 ) -> tuple[list[tuple[str, str, int]], ast.expr]:
        """The in-place changes of values from outside, and a tuple of
        lambdas reading those values (checked when the statement is on a
        tensor)."""
        found = [m for m in analysis.mutations(body) if m[0] in live]
        reads = _tuple([_thunk(load(name)) for name, _, _ in found])
        return found, reads

    @staticmethod
    def _return_lines(body: Sequence[ast.stmt]) -> tuple[int, ...]:
        return tuple(line for node in analysis.own_statements(body)
                     for line in analysis.noted(node, "return_lines", ()))

    # -- if ----------------------------------------------------------------------
    def if_(self, node: ast.If) -> list[ast.stmt]:
        names = self._names("if", node, node.body + node.orelse)
        defined: frozenset[str] = analysis.noted(node, "defined")
        live_out: frozenset[str] = analysis.noted(node, "live_out")
        bounder = analysis.Bound()
        ends = [bounder.block(b, defined) for b in (node.body, node.orelse)]
        after = (ends[0] & ends[1] if ends[0] is not None and ends[1] is not None
                 else ends[0] or ends[1] or defined)
        live_in = self.liveness.block(node.body, live_out) | self.liveness.block(node.orelse,
                                                                                  live_out)
        mutations, watched = self._watched(node.body + node.orelse, live_in)
        site = Site("if", self.file, node.lineno, tuple(names), live_out & set(names),
                    assigned=(frozenset(analysis.bound_names(node.body)),
                              frozenset(analysis.bound_names(node.orelse))),
                    mutations=tuple(mutations),
                    refusals=tuple(analysis.refusals(node.body + node.orelse)),
                    return_lines=self._return_lines(node.body + node.orelse))
        true_name, false_name = self.new_name("_if_true"), self.new_name("_if_false")
        body = self.block(node.body)
        orelse = self.block(node.orelse) or [at(ast.Pass(), node)]
        call = _call(_rt("if_stmt"), node.test, load(true_name), load(false_name),
                     self._read(names, defined, live_in), self.add_site(site))
        if mutations:
            call.args.append(watched)
        return [self._function(true_name, names, body, names, node),
                self._function(false_name, names, orelse, names, node),
                *self._assign_back(names, call, after, node)]

    # -- loops -------------------------------------------------------------------
    def loop(self, node: ast.While | ast.For) -> list[ast.stmt]:
        kind = "while" if isinstance(node, ast.While) else "for"
        targets = analysis.bound_names([node.target]) if isinstance(node, ast.For) else set()
        if isinstance(node, ast.While) and analysis.first_of([node.test], (ast.NamedExpr,)):
            raise ScriptError(
                f"script: `:=` in the condition of the `while` loop at {self.file}:{node.lineno} "
                "is not supported (script evaluates the condition in a function of its own); "
                "assign the variable before the loop and at the end of its body")
        parts: list[ast.AST] = [*node.body, *([node.target] if isinstance(node, ast.For) else [])]
        names = self._names(kind, node, parts)
        defined: frozenset[str] = analysis.noted(node, "defined")
        live_out: frozenset[str] = analysis.noted(node, "live_out")
        live_head: frozenset[str] = analysis.noted(node, "live_head")
        mutations, watched = self._watched(node.body, live_head)
        site = Site(kind, self.file, node.lineno, tuple(names), live_out & set(names),
                    live_head=live_head & set(names), targets=frozenset(targets),
                    mutations=tuple(mutations), refusals=tuple(analysis.refusals(node.body)),
                    return_lines=self._return_lines(node.body))
        body_name = self.new_name("_loop_body")
        body = self.block(node.body)
        out: list[ast.stmt] = []
        if isinstance(node, ast.For):
            bind = at(ast.Assign(targets=[node.target], value=load(ITEM)), node)
            out.append(self._function(body_name, [ITEM, *names], [bind, *body],
                                      names, node))
            flag = analysis.noted(node, "break_flag")
            extra: ast.expr = ast.Constant(value=None)
            if flag:
                test_name = self.new_name("_loop_test")
                out.append(self._test(test_name, names, _call(_rt("not_"), load(flag)), node))
                extra = load(test_name)
            call = _call(_rt("for_stmt"), self._iterable(node.iter), load(body_name),
                         self._read(names, defined, live_head), self.add_site(site), extra)
        else:
            test_name = self.new_name("_loop_test")
            out.append(self._test(test_name, names, node.test, node))
            out.append(self._function(body_name, names, body, names, node))
            call = _call(_rt("while_stmt"), load(test_name), load(body_name),
                         self._read(names, defined, live_head), self.add_site(site))
        if mutations:
            call.keywords.append(ast.keyword(arg="watched", value=watched))
        if self.numbers:
            call.keywords.append(ast.keyword(arg="numbers", value=load(NUMBERS)))
        return out + self._assign_back(names, call, defined, node)

    def _test(self, name: str, names: Sequence[str], test: ast.expr,
              like: ast.stmt) -> ast.stmt:
        fdef = ast.FunctionDef(name=name, args=_params(names), body=[ast.Return(value=test)],
                               decorator_list=[], returns=None, type_comment=None)
        return at(fdef, like)

    @staticmethod
    def _iterable(node: ast.expr) -> ast.expr:
        """range(...) -> _kiln_rt.range_(range, ...): a tensor bound makes a
        loop in the graph (the call still goes to whatever `range` is)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range" and not node.keywords and \
                not any(isinstance(a, ast.Starred) for a in node.args) and 1 <= len(node.args) <= 3:
            return at(_call(_rt("range_"), node.func, *node.args), node)
        return node
