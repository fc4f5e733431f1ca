"""The calls the code kiln.jit.script writes makes at run time: each `if`,
`while` and `for` of the scripted function becomes a call here, which looks
at the condition (or range, or iterable) it is given and either runs plain
Python, as the original would, or, when it is a kiln Tensor, the control-flow
op that keeps the branch or loop in the graph (kiln.cond, kiln.while_loop,
kiln.fori_loop, kiln.scan).

The rewritten statement is a set of functions over its *state*: the local
variables it may assign, passed in and returned as a tuple (`Site.names`).
A variable unbound before the statement is passed as UNDEFINED. In Python
mode every variable of the state goes through as Python would leave it; in
tensor mode only those read afterwards (`live_after`, and `live_head` for a
loop's next iteration) become the op's outputs or carried values, which must
then be tensors.
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kiln import _C, _control_flow, _ops
from kiln._C import Tensor
from kiln._factories import tensor

RETVAL = "_kiln_retval"  # the value of a `return` moved into a branch or loop
DO_RETURN = "_kiln_do_return"  # set by a `return` inside a loop
BREAK_PREFIX = "_kiln_break"  # set by a `break`: the loop's extra condition

State = tuple[Any, ...]


class ScriptError(RuntimeError):
    """kiln.jit.script met Python it cannot turn into graph control flow;
    the message names the construct or variable and the file and line."""


class _Undefined:
    """The value of a state variable that is not bound (yet)."""

    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED = _Undefined()

_CONTAINERS = (list, dict, set, bytearray, collections.deque)


@dataclasses.dataclass(frozen=True)
class Site:
    """One rewritten statement of the user's code, as the converter saw it."""

    kind: str  # "if", "while", "for", "conditional expression"
    file: str
    line: int
    names: tuple[str, ...] = ()  # the state
    live_after: frozenset[str] = frozenset()
    live_head: frozenset[str] = frozenset()  # loops: read in a later iteration
    assigned: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())  # if: per branch
    targets: frozenset[str] = frozenset()  # for: the names the loop target binds
    # (name, what, line): a container from outside that the body changes
    mutations: tuple[tuple[str, str, int], ...] = ()
    refusals: tuple[tuple[str, int], ...] = ()  # (construct, line) a graph cannot hold
    return_lines: tuple[int, ...] = ()  # `return`s inside, moved into RETVAL

    def at(self, line: int | None = None) -> str:
        return f"{self.file}:{self.line if line is None else line}"

    def describe(self) -> str:
        what = "`if`" if self.kind == "if" else f"`{self.kind}` loop"
        if self.kind == "conditional expression":
            what = "conditional expression (`a if c else b`)"
        return f"the {what} on a tensor at {self.at()}"


def _is_flag(name: str) -> bool:
    return name == DO_RETURN or name.startswith(BREAK_PREFIX)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def _is_tensor_tree(name: str, value: Any, site: Site) -> bool:
    """True for a tensor or a container of tensors; False for a value with
    no tensor in it (a constant the graph does not carry); an error for a
    mix."""
    leaves = list(_leaves(value))
    tensors = sum(isinstance(leaf, Tensor) for leaf in leaves)
    if tensors and tensors < len(leaves):
        other = next(leaf for leaf in leaves if not isinstance(leaf, Tensor))
        raise ScriptError(f"script: variable '{name}' holds tensors and a "
                          f"{type(other).__name__} in {site.describe()}; the graph's values "
                          "are tensors, or tuples, lists and dicts of them")
    return tensors > 0


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (bool, int, float, complex, str, bytes, type(None), _C.dtype)):
        return bool(a == b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return False


def as_pred(value: Any) -> Tensor:
    """A condition as the ops take it: a bool tensor (Python truth: nonzero)."""
    if not isinstance(value, Tensor):
        return tensor(builtins.bool(value))
    return value if value.dtype == _C.dtype.bool else value != 0


def _check_tensor_mode(site: Site, watched: Sequence[Callable[[], Any]] | None) -> None:
    """What the body does that a graph would not repeat: raising, catching,
    and changing Python containers from outside (the body runs once while
    recording, or, for a branch, both branches run)."""
    if site.refusals:
        construct, line = site.refusals[0]
        raise ScriptError(f"script: `{construct}` at {site.at(line)} is inside "
                          f"{site.describe()}; a graph cannot {_REFUSAL_WHY[construct]}, "
                          f"so script cannot convert it")
    for (name, what, line), read in zip(site.mutations, watched or ()):
        try:
            value = read()
        except NameError:
            continue
        if isinstance(value, _CONTAINERS):
            how = ("both branches run while recording" if site.kind == "if" else
                   "the body runs once while recording")
            raise ScriptError(
                f"script: {type(value).__name__} '{name}' is changed ({what} at "
                f"{site.at(line)}) inside {site.describe()}; {how}, so the graph would not "
                "do what Python does. Keep the values in tensors the loop carries (or collect "
                "per-step values with kiln.scan)")


_REFUSAL_WHY = {"try": "catch Python exceptions", "raise": "raise Python exceptions"}


def _undefined_error(name: str, site: Site, what: str) -> ScriptError:
    """`what` says how `name` is unbound, with {site} for the statement."""
    if name == RETVAL:
        returns = ", ".join(site.at(line) for line in site.return_lines) or "inside"
        if site.kind == "if":
            return ScriptError(
                f"script: the `return` at {returns} is inside a loop and under "
                f"{site.describe()}; script cannot convert it: assign the result to a variable "
                "defined before the loop and `break` out of the loop")
        return ScriptError(
            f"script: the `return` at {returns} is inside {site.describe()}; a loop in the "
            "graph cannot return early: assign the result to a variable defined before the "
            "loop and `break` out of the loop")
    return ScriptError(f"script: variable '{name}' " + what.format(site=site.describe()))


# -- if ------------------------------------------------------------------------
def if_stmt(test: Any, true_fn: Callable[..., State], false_fn: Callable[..., State],
            state: State, site: Site,
            watched: Sequence[Callable[[], Any]] | None = None) -> State:
    if not isinstance(test, Tensor):
        return true_fn(*state) if test else false_fn(*state)
    _check_tensor_mode(site, watched)
    return tensor_if(test, true_fn, false_fn, state, site)


def tensor_if(test: Tensor, true_fn: Callable[..., State], false_fn: Callable[..., State],
              state: State, site: Site) -> State:
    """kiln.cond over the state variables read after the `if`."""
    names = site.names
    outputs = [i for i, name in enumerate(names) if name in site.live_after]
    both = site.assigned[0] & site.assigned[1]
    for i in outputs:
        if state[i] is UNDEFINED and names[i] not in both:
            side = "true" if names[i] in site.assigned[0] else "false"
            raise _undefined_error(names[i], site, f"is assigned only in the {side} branch of "
                                   "{site} and used after it; assign it in both branches, or "
                                   "before the `if`")
    consts: dict[str, dict[str, Any]] = {}

    def branch(fn: Callable[..., State], which: str) -> Callable[[], tuple[Any, ...]]:
        def run() -> tuple[Any, ...]:
            values = fn(*state)
            tensors: list[Any] = []
            mine: dict[str, Any] = {}
            for i in outputs:
                name, value = names[i], values[i]
                if value is UNDEFINED:
                    raise _undefined_error(name, site, "is not assigned on every path of the "
                                           f"{which} branch of {{site}} but is used after it")
                if _is_flag(name) and isinstance(value, builtins.bool):
                    value = tensor(value)
                if _is_tensor_tree(name, value, site):
                    tensors.append(value)
                else:
                    mine[name] = value
            for other, theirs in consts.items():
                pair = sorted([(which, mine), (other, theirs)], key=lambda b: b[0] != "true")
                _compare_branches(site, pair[0], pair[1], [names[i] for i in outputs])
            consts[which] = mine
            return tuple(tensors)
        return run

    out = iter(_control_flow.cond(as_pred(test), branch(true_fn, "true"),
                                  branch(false_fn, "false")))
    taken = next(iter(consts.values()))
    result = list(state)
    for i in outputs:
        result[i] = taken[names[i]] if names[i] in taken else next(out)
    return tuple(result)


def _compare_branches(site: Site, a: tuple[str, dict[str, Any]], b: tuple[str, dict[str, Any]],
                      outputs: list[str]) -> None:
    for name in outputs:
        in_a, in_b = name in a[1], name in b[1]
        if in_a and in_b and _same(a[1][name], b[1][name]):
            continue
        if not in_a and not in_b:
            continue
        if in_a and in_b:
            raise ScriptError(
                f"script: variable '{name}' is {a[1][name]!r} after the {a[0]} branch and "
                f"{b[1][name]!r} after the {b[0]} branch of {site.describe()}; a value that "
                "differs between the branches must be a tensor")
        const, tensor = (a, b) if in_a else (b, a)
        raise ScriptError(
            f"script: variable '{name}' is a tensor after the {tensor[0]} branch but a "
            f"{type(const[1][name]).__name__} after the {const[0]} branch of "
            f"{site.describe()}; both branches must give it a tensor")


def if_exp(test: Any, if_true: Callable[[], Any], if_false: Callable[[], Any],
           site: Site) -> Any:
    """`a if test else b`."""
    if not isinstance(test, Tensor):
        return if_true() if test else if_false()

    def checked(fn: Callable[[], Any], which: str) -> Callable[[], Any]:
        def run() -> Any:
            value = fn()
            if not _is_tensor_tree("", value, site):
                raise ScriptError(f"script: the {which} value of {site.describe()} is a "
                                  f"{type(value).__name__}; both must be tensors")
            return value
        return run
    return _control_flow.cond(as_pred(test), checked(if_true, "true"), checked(if_false, "false"))


# -- and, or, not ----------------------------------------------------------------
def and_(*operands: Callable[[], Any]) -> Any:
    """`a and b and ...`: Python's, until an operand is a tensor; from then on
    the logical and of the rest as a bool tensor (every operand runs)."""
    value = operands[0]()
    for i, operand in enumerate(operands[1:], 1):
        if isinstance(value, Tensor):
            return _fold(value, operands[i:], lambda acc, v: _ops.where(acc, v, acc))
        if not value:
            return value
        value = operand()
    return value


def or_(*operands: Callable[[], Any]) -> Any:
    value = operands[0]()
    for i, operand in enumerate(operands[1:], 1):
        if isinstance(value, Tensor):
            return _fold(value, operands[i:], lambda acc, v: _ops.where(acc, acc, v))
        if value:
            return value
        value = operand()
    return value


def _fold(first: Tensor, rest: Sequence[Callable[[], Any]],
          combine: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    acc = as_pred(first)
    for operand in rest:
        acc = combine(acc, as_pred(operand()))
    return acc


def not_(value: Any) -> Any:
    if isinstance(value, Tensor):
        return _ops.logical_not(as_pred(value))
    return not value


# -- augmented assignment --------------------------------------------------------------
_AUGMENTED = {"+": (operator.iadd, operator.add), "-": (operator.isub, operator.sub),
              "*": (operator.imul, operator.mul), "/": (operator.itruediv, operator.truediv),
              "//": (operator.ifloordiv, operator.floordiv), "%": (operator.imod, operator.mod),
              "**": (operator.ipow, operator.pow), "@": (operator.imatmul, operator.matmul),
              "&": (operator.iand, operator.and_), "|": (operator.ior, operator.or_),
              "^": (operator.ixor, operator.xor), "<<": (operator.ilshift, operator.lshift),
              ">>": (operator.irshift, operator.rshift)}


def aug(numbers: set[str], name: str, target: Any, op: str, value: Any) -> Any:
    """`name op= value`. A variable that was a Python number before a tensor
    loop carried it (`steps = 0 ... steps += 1`) is a tensor now, on which
    `+=` would write in place, changing every other name for it (`prev =
    steps`); for those, `+=` makes a new tensor, as it made a new number."""
    in_place, new = _AUGMENTED[op]
    if name in numbers and isinstance(target, Tensor):
        return new(target, value)
    return in_place(target, value)


# -- loops -----------------------------------------------------------------------
def while_stmt(test_fn: Callable[..., Any], body_fn: Callable[..., State], state: State,
               site: Site, watched: Sequence[Callable[[], Any]] | None = None,
               numbers: set[str] | None = None) -> State:
    """Python iterations while the condition is a Python value; from the
    first that is a tensor, kiln.while_loop runs the rest."""
    while True:
        test = test_fn(*state)
        if isinstance(test, Tensor):
            _check_tensor_mode(site, watched)
            return _Carried(site, state, numbers).while_loop(test_fn, body_fn)
        if not test:
            return state
        state = body_fn(*state)


class TensorRange:
    """range(start, stop, step) with a tensor among them: a loop in the graph."""

    def __init__(self, start: Any, stop: Any, step: Any) -> None:
        if not isinstance(step, Tensor) and step == 0:
            raise ValueError("range() arg 3 must not be zero")
        self.start, self.stop, self.step = start, stop, step


def range_(fn: Any, *args: Any) -> Any:
    """`range(...)` as a `for` loop's iterable: a TensorRange when `range` is
    the builtin and a bound is a tensor, else what the call gives."""
    if fn is not builtins.range or not any(isinstance(a, Tensor) for a in args):
        return fn(*args)
    if len(args) == 1:
        return TensorRange(0, args[0], 1)
    return TensorRange(*args) if len(args) == 3 else TensorRange(args[0], args[1], 1)


def for_stmt(iterable: Any, body_fn: Callable[..., State], state: State, site: Site,
             extra_test: Callable[..., Any] | None = None,
             watched: Sequence[Callable[[], Any]] | None = None,
             numbers: set[str] | None = None) -> State:
    """`for` over a range with a tensor bound (fori_loop, or while_loop with
    a `break`), over a tensor's leading dim (scan, or while_loop with a
    `break`), else over anything as Python does."""
    if isinstance(iterable, (TensorRange, Tensor)):
        _check_tensor_mode(site, watched)
        return _Carried(site, state, numbers).for_loop(iterable, body_fn, extra_test)
    iterator = iter(iterable)
    while True:
        if extra_test is not None:
            go = extra_test(*state)
            if isinstance(go, Tensor):
                _check_tensor_mode(site, watched)
                return _guarded_rest(go, iterator, body_fn, state, site, extra_test)
            if not go:
                return state
        try:
            item = next(iterator)
        except StopIteration:
            return state
        state = body_fn(item, *state)


def _guarded_rest(go: Tensor, iterator: Iterator[Any], body_fn: Callable[..., State],
                  state: State, site: Site, extra_test: Callable[..., Any]) -> State:
    """A Python loop whose `break` became a tensor (it sits under an `if` on
    a tensor): each later iteration runs under kiln.cond on the flag."""
    as_if = dataclasses.replace(site, kind="if", live_after=site.live_after | site.live_head,
                                assigned=(frozenset(site.names), frozenset()))
    for item in iterator:
        state = tensor_if(go, lambda *s, item=item: body_fn(item, *s), lambda *s: s, state,
                          as_if)
        go = extra_test(*state)
        if not isinstance(go, Tensor) and not go:
            break
    return state


class _Carried:
    """The state of a tensor loop split into what the loop carries (read by
    a later iteration or after the loop; tensors) and the rest."""

    def __init__(self, site: Site, state: State, numbers: set[str] | None) -> None:
        self.site, self.state, self.numbers = site, state, numbers
        keep = site.live_head | site.live_after
        self.index: list[int] = []
        for i, name in enumerate(site.names):
            if name in site.targets:
                if name in site.live_after:
                    raise ScriptError(
                        f"script: the loop variable '{name}' of {site.describe()} is used "
                        "after the loop; the graph's loop does not give it back: keep the "
                        "value in a variable assigned inside the loop and defined before it")
                continue
            if name not in keep:
                continue
            if state[i] is UNDEFINED:
                what = ("is first assigned inside {site} and used after it; assign it before "
                        "the loop" if name in site.live_after else "is read before it is "
                        "assigned in an iteration of {site}; assign it before the loop")
                raise _undefined_error(name, site, what)
            self.index.append(i)
        self.init = tuple(self._first(site.names[i], state[i]) for i in self.index)

    def _first(self, name: str, value: Any) -> Any:
        if isinstance(value, (builtins.bool, int, float)):
            if self.numbers is not None:
                self.numbers.add(name)  # see aug()
            return tensor(value)
        if not _is_tensor_tree(name, value, self.site):
            raise ScriptError(
                f"script: variable '{name}' is carried through {self.site.describe()} but is "
                f"a {type(value).__name__}; a loop in the graph carries tensors (or tuples, "
                "lists and dicts of them)")
        return value

    def full(self, carried: Sequence[Any], item: Any = None) -> State:
        values = [UNDEFINED] * len(self.site.names)
        for i, value in zip(self.index, carried):
            values[i] = value
        return tuple(values) if item is None else (item, *values)

    def after(self, out: Sequence[Any]) -> State:
        """The body's state as the loop carries it."""
        result = []
        for i, first in zip(self.index, self.init):
            name, value = self.site.names[i], out[i]
            if value is UNDEFINED:
                raise _undefined_error(name, self.site, "is deleted inside {site}, which carries "
                                       "it")
            if isinstance(value, (builtins.bool, int, float)) and isinstance(first, Tensor):
                value = tensor(value, dtype=first.dtype)
            elif isinstance(value, Tensor) and isinstance(first, Tensor) and \
                    isinstance(self.state[i], (builtins.bool, int, float)) and \
                    value.dtype != first.dtype:
                raise ScriptError(
                    f"script: variable '{name}' starts as the Python "
                    f"{type(self.state[i]).__name__} {self.state[i]!r} (a {first.dtype} tensor "
                    f"in the loop) but {self.site.describe()} makes it {value.dtype}; start it "
                    f"as a tensor of that dtype")
            result.append(value)
        return tuple(result)

    def result(self, carried: Sequence[Any]) -> State:
        values = list(self.state)
        for i, value in zip(self.index, carried):
            values[i] = value
        return tuple(values)

    def while_loop(self, test_fn: Callable[..., Any], body_fn: Callable[..., State]) -> State:
        out = _control_flow.while_loop(lambda c: as_pred(test_fn(*self.full(c))),
                              lambda c: self.after(body_fn(*self.full(c))), self.init)
        return self.result(out)

    def for_loop(self, iterable: Any, body_fn: Callable[..., State],
                 extra_test: Callable[..., Any] | None) -> State:
        if extra_test is None and isinstance(iterable, Tensor):
            def step(carried: Any, x: Any) -> tuple[Any, None]:
                return self.after(body_fn(*self.full(carried, x))), None
            out, _ = _control_flow.scan(step, self.init, iterable)
            return self.result(out)
        start, stop, step_by = ((iterable.start, iterable.stop, iterable.step)
                                if isinstance(iterable, TensorRange) else (0, iterable.shape[0], 1))
        if extra_test is None and not isinstance(step_by, Tensor) and step_by == 1:
            out = _control_flow.fori_loop(
                start, stop, lambda i, c: self.after(body_fn(*self.full(c, i))), self.init)
            return self.result(out)
        return self._indexed(iterable, start, stop, step_by, body_fn, extra_test)

    def _indexed(self, iterable: Any, start: Any, stop: Any, step: Any,
                 body_fn: Callable[..., State], extra_test: Callable[..., Any] | None) -> State:
        """A while_loop over (i, carried...): a range with a step other than 1
        or a `break`, or a tensor's rows with a `break`."""
        first = start if isinstance(start, Tensor) else tensor(int(start))

        def more(i: Tensor) -> Tensor:
            if isinstance(step, Tensor):
                return _ops.where(step > 0, i < stop, i > stop)
            return i < stop if step > 0 else i > stop

        def test(c: Any) -> Tensor:
            go = more(c[0])
            if extra_test is None:
                return go
            return _ops.where(go, as_pred(extra_test(*self.full(c[1:]))), go)

        def body(c: Any) -> Any:
            # t[i] by an op: indexing would read the traced i as a Python int
            item = c[0] if isinstance(iterable, TensorRange) else \
                _ops.index_select(iterable, c[0].reshape([1]), 0).squeeze(0)
            return (c[0] + step, *self.after(body_fn(*self.full(c[1:], item))))

        out = _control_flow.while_loop(test, body, (first, *self.init))
        return self.result(out[1:])
