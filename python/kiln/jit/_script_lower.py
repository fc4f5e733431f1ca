"""Before kiln.jit.script turns branches and loop bodies into functions, it
removes the statements that jump out of them: `return`, `break`,
`continue`. After this pass, none is left inside an `if`, `while` or `for`.

- The code after an `if` one of whose paths ends in a jump moves into the
  paths that do not (the tail is copied when several do), so that every
  jump ends its path:  `if c: return a` + `rest`  ->  `if c: return a`
  `else: rest`.
- A `return` inside a loop sets RETVAL and DO_RETURN and breaks; after the
  loop, `if DO_RETURN: return RETVAL`.
- `continue` at the end of a path is dropped; `break` at the end of a path
  sets the loop's flag, which joins the loop's condition (`while not flag
  and test`; a `for` checks it before each item). A loop's `else` runs after
  it under `if not flag`.
- An `if` every path of which returns assigns RETVAL on each path instead,
  followed by `return RETVAL`: the `return` leaves the branch function.

A jump that would have to cross a `try` (or a `with`, other than at its end)
is refused with the line of the jump.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Sequence
from typing import TypeVar

from kiln.jit._script_analysis import LOOPS, blocks_of, is_scope, note, noted
from kiln.jit._script_runtime import BREAK_PREFIX, DO_RETURN, RETVAL, ScriptError

Jumps = tuple[type, ...]
Node = TypeVar("Node", bound=ast.AST)
WITH = (ast.With, ast.AsyncWith)


def at(node: Node, like: ast.AST) -> Node:
    """node with like's first line as its location, on node and what it
    holds that has none (the user's own expressions keep theirs). One line,
    not like's span: Python points a failed call at its last line."""
    line, col = getattr(like, "lineno", 1), getattr(like, "col_offset", 0)
    for child in ast.walk(node):
        if "lineno" in child._attributes and getattr(child, "lineno", None) is None:
            child.lineno, child.end_lineno = line, line  # type: ignore[attr-defined]
            child.col_offset, child.end_col_offset = col, col  # type: ignore[attr-defined]
    return node


def assign(name: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    return at(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value), like)


def load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def jumps_in(stmts: Sequence[ast.stmt], kinds: Jumps) -> list[ast.stmt]:
    """The `kinds` jumps among stmts that belong to them: not in nested
    functions, nor (for break and continue) in nested loops."""
    found: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, kinds):
            found.append(stmt)
        elif is_scope(stmt) or (isinstance(stmt, LOOPS) and ast.Return not in kinds):
            continue
        else:
            for block in blocks_of(stmt):
                found += jumps_in(block, kinds)
    return found


def ends_in(stmts: Sequence[ast.stmt], kinds: Jumps) -> bool:
    """Whether every path through stmts ends in one of the jumps."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, kinds):
        return True
    if isinstance(last, ast.If):
        return ends_in(last.body, kinds) and ends_in(last.orelse, kinds)
    if isinstance(last, WITH):
        return ends_in(last.body, kinds)
    return False


def tail(stmts: list[ast.stmt], kinds: Jumps) -> list[ast.stmt]:
    """stmts with each jump at the end of its path (see the module doc)."""
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, kinds):
            return stmts[:i + 1]  # what follows a jump never runs
        if isinstance(stmt, (WITH, ast.Try, ast.TryStar, ast.Match)):
            for block in blocks_of(stmt):
                block[:] = tail(block, kinds)
            continue
        if not isinstance(stmt, ast.If) or not jumps_in([stmt], kinds):
            continue
        rest = stmts[i + 1:]
        body, orelse = tail(stmt.body, kinds), tail(stmt.orelse, kinds)
        if rest and not ends_in(body, kinds):
            body = tail(body + rest, kinds)
            rest = [copy.deepcopy(s) for s in rest]
        if rest and not ends_in(orelse, kinds):
            orelse = tail(orelse + rest, kinds)
        stmt.body, stmt.orelse = body, orelse
        return stmts[:i + 1]
    return stmts


def replace_ends(stmts: list[ast.stmt], kinds: Jumps,
                 replace: Callable[[ast.stmt], list[ast.stmt]]) -> None:
    """Replaces the jumps that end stmts' paths (through `if` and `with`)."""
    if not stmts:
        return
    last = stmts[-1]
    if isinstance(last, kinds):
        stmts[-1:] = replace(last) or [at(ast.Pass(), last)]
    elif isinstance(last, ast.If):
        replace_ends(last.body, kinds, replace)
        replace_ends(last.orelse, kinds, replace)
    elif isinstance(last, WITH):
        replace_ends(last.body, kinds, replace)


class _Returns(ast.NodeTransformer):
    """`return v` inside a loop -> RETVAL = v; DO_RETURN = True; break."""

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        value = node.value or at(ast.Constant(value=None), node)
        retval = assign(RETVAL, value, node)
        lines = noted(node, "lines", [node.lineno])
        note(retval, "return_lines", lines)
        jump = at(ast.Break(), node)
        note(jump, "from", ("return", lines[0]))
        return [retval, assign(DO_RETURN, at(ast.Constant(value=True), node), node), jump]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if is_scope(node):
            return node
        return super().generic_visit(node)


class Lowering:
    """Runs the pass over one function; `new_name` gives unused names."""

    def __init__(self, file: str, new_name: Callable[[str], str]) -> None:
        self.file, self.new_name = file, new_name
        self.uses_do_return = False

    def function(self, fdef: ast.FunctionDef) -> None:
        body = self.block(fdef.body)
        if jumps_in(body, (ast.Return,)) and not ends_in(body, (ast.Return,)):
            body.append(at(ast.Return(value=None), body[-1]))  # the implicit `return None`
        body = self.retvals(tail(body, (ast.Return,)))
        if self.uses_do_return:
            body.insert(0, assign(DO_RETURN, ast.Constant(value=False), fdef))
        fdef.body = body
        self.check(fdef.body, [])

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, LOOPS):
                out += self.loop(stmt)
                continue
            if not is_scope(stmt):
                for block in blocks_of(stmt):
                    block[:] = self.block(block)
            out.append(stmt)
        return out

    def loop(self, loop: ast.While | ast.For) -> list[ast.stmt]:
        loop.body = self.block(loop.body)  # inner loops first
        orelse, loop.orelse = self.block(loop.orelse), []
        returns = jumps_in(loop.body, (ast.Return,))
        if returns:
            self.uses_do_return = True
            loop.body = [_Returns().visit(stmt) for stmt in loop.body]
            loop.body = [s for stmt in loop.body for s in (stmt if isinstance(stmt, list)
                                                           else [stmt])]
        loop.body = tail(loop.body, (ast.Break, ast.Continue))
        flag = self.new_name(BREAK_PREFIX) if jumps_in(loop.body, (ast.Break,)) else ""

        def end(jump: ast.stmt) -> list[ast.stmt]:
            if isinstance(jump, ast.Continue):
                return []  # the end of the path is the end of the iteration
            return [assign(flag, at(ast.Constant(value=True), jump), jump)]
        replace_ends(loop.body, (ast.Break, ast.Continue), end)
        out: list[ast.stmt] = []
        if flag:
            out.append(assign(flag, ast.Constant(value=False), loop))
            if isinstance(loop, ast.While):
                loop.test = at(ast.BoolOp(op=ast.And(), values=[
                    ast.UnaryOp(op=ast.Not(), operand=load(flag)), loop.test]), loop.test)
            else:
                note(loop, "break_flag", flag)
        out.append(loop)
        if orelse:
            out += [at(ast.If(test=ast.UnaryOp(op=ast.Not(), operand=load(flag)), body=orelse,
                               orelse=[]), loop)] if flag else orelse
        if returns:
            back = at(ast.Return(value=load(RETVAL)), loop)
            note(back, "lines", [line for r in returns for line in noted(r, "lines", [r.lineno])])
            out.append(at(ast.If(test=load(DO_RETURN), body=[back], orelse=[]), loop))
        return out

    def retvals(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """An `if` all of whose paths return: RETVAL on each, one return after."""
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, ast.If) and ends_in([stmt], (ast.Return,)):
                replace_ends([stmt], (ast.Return,), self._retval)
                out += [stmt, at(ast.Return(value=load(RETVAL)), stmt)]
                continue
            if not is_scope(stmt):
                for block in blocks_of(stmt):
                    block[:] = self.retvals(block)
            out.append(stmt)
        return out

    @staticmethod
    def _retval(node: ast.stmt) -> list[ast.stmt]:
        assert isinstance(node, ast.Return)
        stmt = assign(RETVAL, node.value or at(ast.Constant(value=None), node), node)
        note(stmt, "return_lines", noted(node, "lines", [node.lineno]))
        return [stmt]

    def check(self, stmts: list[ast.stmt], outer: list[ast.stmt]) -> None:
        """Refuses the jumps left inside an `if` or loop."""
        for stmt in stmts:
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                self._refuse(stmt, outer)
            if is_scope(stmt):
                continue
            for block in blocks_of(stmt):
                self.check(block, outer + [stmt])

    def _refuse(self, jump: ast.stmt, outer: list[ast.stmt]) -> None:
        controls = [s for s in outer if isinstance(s, (ast.If, *LOOPS))]
        if not controls:
            return
        kind, line = noted(jump, "from", (type(jump).__name__.lower(), jump.lineno))
        names = {ast.With: "with", ast.AsyncWith: "async with", ast.Try: "try",
                 ast.TryStar: "try", ast.Match: "match"}
        blocker = next((s for s in reversed(outer) if type(s) in names), None)
        control = controls[-1]
        ctrl = "if" if isinstance(control, ast.If) else type(control).__name__.lower()
        if blocker is None:  # not expected: say so rather than convert wrongly
            raise ScriptError(f"script: cannot convert the `{kind}` at {self.file}:{line} "
                              f"inside the `{ctrl}` at line {control.lineno}")
        raise ScriptError(
            f"script: cannot convert the `{kind}` at {self.file}:{line}: it leaves the "
            f"`{names[type(blocker)]}` at line {blocker.lineno} from inside the `{ctrl}` at "
            f"line {control.lineno}, and script turns the `{ctrl}`'s body into a function; "
            f"move the `{kind}` out of the `{names[type(blocker)]}`")
