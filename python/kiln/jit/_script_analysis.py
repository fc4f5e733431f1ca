"""What kiln.jit.script needs to know about the function it rewrites: the
names each statement binds and reads, which variables are live after each
`if` and loop (read later, before being assigned again), which are surely
bound before it, and what in a body a graph cannot hold.

All of it is conservative: a name counted live that is not, or a name not
counted surely bound that is, costs an output or a check, never a wrong
program. Each `if`/`while`/`for` is annotated in place:
  _kiln_live_out   names live after the statement
  _kiln_live_head  (loops) names live at the top of an iteration
  _kiln_defined    names surely bound before the statement
"""
from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import Any

NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
LOOPS = (ast.While, ast.For)
# Methods that change a list, dict, set or deque in place.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                      "setdefault", "popitem", "add", "discard", "appendleft", "extendleft",
                      "popleft", "sort", "reverse"})
# Calls that read the local variables by name, behind the analysis' back.
DYNAMIC = frozenset({"locals", "vars", "eval", "exec", "dir"})


def note(node: ast.AST, key: str, value: Any) -> None:
    """Annotates a node (the analysis' results ride on the tree)."""
    setattr(node, f"_kiln_{key}", value)


def noted(node: ast.AST, key: str, default: Any = None) -> Any:
    return getattr(node, f"_kiln_{key}", default)


def generated(node: ast.AST) -> bool:
    """A lambda script wrote (an operand of and/or): part of the scope."""
    return bool(noted(node, "generated", False))


def is_scope(node: ast.AST) -> bool:
    return isinstance(node, NESTED_SCOPES) and not generated(node)


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """node's descendants outside nested functions, lambdas and classes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not is_scope(child):
            yield from own_nodes(child)


def own_statements(stmts: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in stmts:
        yield stmt
        if not is_scope(stmt):
            yield from own_nodes(stmt)


def bound_names(stmts: Sequence[ast.AST]) -> set[str]:
    """The names the statements bind (or unbind) in their scope."""
    out: set[str] = set()
    for stmt in stmts:
        _bound(stmt, out, False)
    return out


def _bound(node: ast.AST, out: set[str], in_comprehension: bool) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(node.name)
        return
    if isinstance(node, ast.Lambda) and not generated(node):
        return
    if isinstance(node, COMPREHENSIONS):
        in_comprehension = True  # its targets are its own; `:=` binds outside
    if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
        out.add(node.target.id)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        if not in_comprehension:
            out.add(node.id)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        out.add(node.name)
    elif isinstance(node, ast.alias) and node.name != "*":
        out.add((node.asname or node.name).split(".")[0])
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        out.add(node.name)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        out.add(node.rest)
    for child in ast.iter_child_nodes(node):
        _bound(child, out, in_comprehension)


def read_names(node: ast.AST) -> set[str]:
    """Every name the node may read, in nested scopes too."""
    out = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    out.update(n.target.id for n in ast.walk(node)
               if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name))
    return out


def reads_of(nodes: Sequence[ast.AST]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        out |= read_names(node)
    return out


def captured_names(fdef: ast.FunctionDef) -> tuple[set[str], bool]:
    """The names nested functions, lambdas and classes read (they may read
    them at any later time), and whether the code reads its variables by
    name (locals(), eval, ...)."""
    captured: set[str] = set()
    dynamic = False
    for node in own_statements(fdef.body):
        if is_scope(node):
            captured |= read_names(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in DYNAMIC:
            dynamic = True
    return captured, dynamic


# -- liveness --------------------------------------------------------------------
class Liveness:
    """Backward over the statements: live before = (live after - bound) | read."""

    def __init__(self, always: set[str]) -> None:
        self.always = frozenset(always)

    def block(self, stmts: Sequence[ast.stmt], live: frozenset[str],
              extra: frozenset[str] = frozenset()) -> frozenset[str]:
        """`extra`: names live everywhere in the block (an `except` may read
        them after any statement raised)."""
        live = live | extra | self.always
        for stmt in reversed(stmts):
            live = self.stmt(stmt, live) | extra | self.always
        return live

    def stmt(self, stmt: ast.stmt, live: frozenset[str]) -> frozenset[str]:
        if isinstance(stmt, ast.If):
            note(stmt, "live_out", live)
            return (frozenset(read_names(stmt.test)) | self.block(stmt.body, live) |
                    self.block(stmt.orelse, live))
        if isinstance(stmt, LOOPS):
            return self.loop(stmt, live)
        if isinstance(stmt, ast.Return):
            return frozenset(read_names(stmt.value)) if stmt.value else frozenset()
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return frozenset(reads_of(stmt.items)) | self.block(stmt.body, live)
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            after = self.block(stmt.finalbody, live)
            handlers = frozenset().union(*(self.block(h.body, after) for h in stmt.handlers))
            extra = handlers | after | frozenset(reads_of(stmt.handlers))
            return self.block(stmt.body, self.block(stmt.orelse, after), extra) | extra
        if isinstance(stmt, ast.Match):
            cases = [self.block(case.body, live) for case in stmt.cases]
            return frozenset(read_names(stmt)) | live | frozenset().union(*cases)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (live - {stmt.name}) | frozenset(read_names(stmt))
        kills = bound_names([stmt]) if not isinstance(stmt, ast.AugAssign) else set()
        return (live - kills) | frozenset(read_names(stmt))

    def loop(self, loop: ast.While | ast.For, live: frozenset[str]) -> frozenset[str]:
        exit_live = self.block(loop.orelse, live)
        if isinstance(loop, ast.While):
            test = frozenset(read_names(loop.test))
            head = test | exit_live
            while True:
                new = test | exit_live | self.block(loop.body, head)
                if new == head:
                    break
                head = new
            before = head
        else:
            targets = frozenset(bound_names([loop.target]))
            # The target's own reads (`for a[i] in ...`), and the `break`
            # flag checked before each item.
            reads = frozenset(read_names(loop.target)) | {noted(loop, "break_flag")} - {None}
            head = exit_live | reads
            while True:
                new = exit_live | reads | (self.block(loop.body, head) - targets)
                if new == head:
                    break
                head = new
            before = head | frozenset(read_names(loop.iter))
        note(loop, "live_out", live)
        note(loop, "live_head", head)
        return before


# -- surely bound ----------------------------------------------------------------
class Bound:
    """Forward over the statements: the names surely bound at each point.
    None stands for a point never reached (after a return)."""

    def block(self, stmts: Sequence[ast.stmt], bound: frozenset[str] | None
              ) -> frozenset[str] | None:
        for stmt in stmts:
            if bound is None:
                return None
            bound = self.stmt(stmt, bound)
        return bound

    def stmt(self, stmt: ast.stmt, bound: frozenset[str]) -> frozenset[str] | None:
        if isinstance(stmt, (ast.If, *LOOPS)):
            note(stmt, "defined", bound)
        if isinstance(stmt, ast.If):
            body, orelse = self.block(stmt.body, bound), self.block(stmt.orelse, bound)
            if body is None or orelse is None:
                return orelse if body is None else body
            return body & orelse
        if isinstance(stmt, LOOPS):
            targets = bound_names([stmt.target]) if isinstance(stmt, ast.For) else set()
            self.block(stmt.body, bound | targets)
            self.block(stmt.orelse, bound)
            return bound
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return None
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return self.block(stmt.body, bound | bound_names(stmt.items))
        if isinstance(stmt, (ast.Try, ast.TryStar, ast.Match)):
            for block in blocks_of(stmt):
                self.block(block, bound)
            unbinds = {n.id for n in own_nodes(stmt) if isinstance(n, ast.Name) and
                       isinstance(n.ctx, ast.Del)}
            handlers = {h.name for h in getattr(stmt, "handlers", ()) if h.name}
            return bound - unbinds - handlers
        if isinstance(stmt, ast.Delete):
            return bound - bound_names([stmt])
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            return bound
        return bound | bound_names([stmt])


def blocks_of(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists directly inside a compound statement."""
    blocks = [getattr(stmt, field) for field in ("body", "orelse", "finalbody")
              if isinstance(getattr(stmt, field, None), list)]
    blocks += [h.body for h in getattr(stmt, "handlers", ())]
    blocks += [case.body for case in getattr(stmt, "cases", ())]
    return blocks


# -- what a graph cannot hold ------------------------------------------------------
def mutations(stmts: Sequence[ast.stmt]) -> list[tuple[str, str, int]]:
    """(name, what, line) for each in-place change of a variable's value:
    name.append(...), name[...] = ..., del name[...]."""
    found: list[tuple[str, str, int]] = []
    for node in own_statements(stmts):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.attr in MUTATORS:
            name = node.func.value.id
            found.append((name, f"{name}.{node.func.attr}(...)", node.lineno))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    name = target.value.id
                    verb = "del " if isinstance(node, ast.Delete) else ""
                    found.append((name, f"{verb}{name}[...]{' =' if not verb else ''}",
                                  node.lineno))
    return found


def refusals(stmts: Sequence[ast.stmt]) -> list[tuple[str, int]]:
    """(construct, line) for what a branch or loop in a graph cannot do."""
    out: list[tuple[str, int]] = []
    for node in own_statements(stmts):
        if isinstance(node, (ast.Try, ast.TryStar)):
            out.append(("try", node.lineno))
        elif isinstance(node, ast.Raise):
            out.append(("raise", node.lineno))
    return out


def first_of(stmts: Sequence[ast.AST], kinds: tuple[type, ...]) -> ast.AST | None:
    """The first node of `kinds` in the statements' own scope."""
    for node in own_statements(stmts):  # type: ignore[arg-type]
        if isinstance(node, kinds):
            return node
    return None
