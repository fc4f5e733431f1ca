"""kiln.jit.script, run eagerly: for each construct it rewrites (if/elif/else,
while, for over a range or a tensor, break, continue, early return, and/or/
not, a if c else b), the scripted function gives what the plain function
gives on inputs that take different paths; a tensor condition goes through
the control-flow op and a Python one stays Python; a variable assigned in
one branch only is an error naming it and its line. Random programs check the
rewrite of jumps against Python itself. What script refuses is in
test_jit_script_errors.py, the compiled form in test_jit_script_compiled.py."""
import inspect
import itertools
import os
import tempfile
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln
from kiln import nn
from kiln.jit import ScriptError, script
from script_helpers import assert_same, at, check, floats, vec, vectors
from script_programs import branch, chain, logic, nested, rows, until_negative

FILE = __file__


@pytest.fixture
def ops(monkeypatch):
    """Counts the calls of the control-flow ops the rewritten code makes."""
    counts = {}
    for name in ("cond", "while_loop", "fori_loop", "scan"):
        original = getattr(kiln._control_flow, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(kiln._control_flow, name, counted)
    return counts


# -- if ------------------------------------------------------------------------
def test_if_else_on_a_tensor_is_a_cond(ops):
    scripted = check(branch, (vec(1, 2, 3),), (vec(-1, -2, 0),))
    assert ops == {"cond": 2}
    assert "if_stmt" in scripted.code and "if x.sum() > 0" not in scripted.code


@given(vectors)
@settings(max_examples=40, deadline=None)
def test_if_elif_else_chain(x):
    check(chain, (x,))


@given(vectors, vectors)
@settings(max_examples=40, deadline=None)
def test_nested_ifs(x, y):
    check(nested, (x, y))


def python_branches(x, flag, n):
    if flag:
        label = "on"  # a Python value of each type per branch: fine in Python mode
        extra = [1, 2]
    else:
        label = 3
    if n > 2:
        x = x * n
    return x, label, extra if flag else None


def test_python_conditions_stay_python(ops):
    scripted = script(python_branches)
    out, label, extra = scripted(vec(1, 2), True, 3)
    assert (label, extra) == ("on", [1, 2])
    assert_same(out, vec(3, 6))
    out, label, extra = scripted(vec(1, 2), False, 1)
    assert (label, extra) == (3, None)
    assert ops == {}


def unbound_on_one_path(flag):
    if flag:
        y = 1
    return y


def test_python_if_leaves_a_variable_unbound_as_python_does():
    scripted = script(unbound_on_one_path)
    assert scripted(True) == 1
    with pytest.raises(UnboundLocalError, match="'y'"):
        scripted(False)


def only_in_one_branch(x):
    if x.sum() > 0:
        y = x * 2  # y: one branch only
    return y


def not_on_every_path(x, flag):
    if x.sum() > 0:
        if flag:
            y = x
    else:
        y = -x
    return y


def temporary_in_one_branch(x):
    if x.sum() > 0:
        t = x * 2
        y = t + 1
    else:
        y = x
    t = y * 3  # assigned again before any read: the branch's t is not an output
    return t


def test_a_variable_assigned_in_one_branch_only():
    with pytest.raises(ScriptError, match=f"variable 'y' is assigned only in the true branch of "
                       f"the `if` on a tensor at {at(only_in_one_branch, 'if x.sum')}"):
        script(only_in_one_branch)(vec(1, 2))
    with pytest.raises(ScriptError, match=f"variable 'y' is not assigned on every path of the "
                       f"true branch of the `if` on a tensor at {at(not_on_every_path, 'if x.')}"):
        script(not_on_every_path)(vec(1, 2), False)
    check(not_on_every_path, (vec(1, 2), True), (vec(-1, -2), False))
    check(temporary_in_one_branch, (vec(1, 2),), (vec(-1, -2),))


# -- while ---------------------------------------------------------------------
def halve_until_small(x):
    steps = 0
    while x.abs().sum() > 1:
        x = x / 2
        steps = steps + 1
    return x, steps


def test_while_on_a_tensor_is_a_while_loop(ops):
    check(halve_until_small, (vec(8, 8),), (vec(0.1, 0.2),), (vec(100, -3),))
    assert ops == {"while_loop": 3}


def count_up(x, n):
    i = 0
    while i < n:
        x = x + i
        i += 1
    return x, i


def test_while_on_python_values_stays_python(ops):
    scripted = check(count_up, (vec(1, 2), 4), (vec(1, 2), 0))
    assert scripted(vec(1, 2), 3)[1] == 3 and ops == {}
    check(count_up, (vec(1, 2), kiln.tensor(3)))  # a tensor bound: a loop in the graph
    assert ops == {"while_loop": 1}


def warm_up_then_tensor(x):
    i = 0
    while i < 2 or x.sum() < 50:  # Python for two iterations, then a tensor condition
        x = x * 2
        i += 1
    return x, i


def test_a_while_condition_that_becomes_a_tensor(ops):
    check(warm_up_then_tensor, (vec(1, 1),), (vec(30, 30),))
    assert ops == {"while_loop": 2}


def counts_with_plus_equals(x):
    i = 0
    total = kiln.zeros(())
    while x.sum() > i:  # i: a Python int the tensor loop carries, so a tensor
        prev = i
        i += 1  # rebinds i, as for an int: prev keeps its value
        total = total + prev
    return total, i


def adds_in_place(x):
    alias = x
    for _ in range(2):
        x += 1  # a tensor's `+=` writes in place: alias sees it, as in Python
    return alias


def test_plus_equals_on_a_number_the_loop_made_a_tensor():
    check(counts_with_plus_equals, (vec(2, 1),), (vec(0, 0),))
    assert_same(script(adds_in_place)(vec(1, 2)), vec(3, 4))


# -- for -----------------------------------------------------------------------
def sum_first(x, n):
    acc = kiln.zeros(())
    for i in range(n):
        acc = acc + x[i]
    return acc


def sum_range(x, start, stop, step):
    acc = kiln.zeros(())
    for i in range(start, stop, step):
        acc = acc + x[i] * i
    return acc


def test_for_over_a_tensor_range(ops):
    x = vec(1, 2, 3, 4, 5)
    check(sum_first, (x, kiln.tensor(3)), (x, kiln.tensor(0)))
    assert ops == {"fori_loop": 2}
    check(sum_range, (x, kiln.tensor(1), 5, 2), (x, 4, kiln.tensor(0), -1),
          (x, 0, 5, kiln.tensor(3)), (x, 4, 0, kiln.tensor(-2)))
    assert ops == {"fori_loop": 2, "while_loop": 4}  # a step other than 1


def test_for_over_a_python_range_stays_python(ops):
    x = vec(1, 2, 3, 4, 5)
    check(sum_first, (x, 3), (x, 0))
    check(sum_range, (x, 4, 0, -1))
    assert ops == {}


def test_for_over_a_tensor_is_a_scan(ops):
    check(rows, (kiln.arange(12.0).reshape(4, 3),), (kiln.ones(1, 3),))
    assert ops == {"scan": 2}


def pairs(xs, ys):
    acc = kiln.zeros(())
    for k, (x, y) in enumerate(zip(xs, ys)):
        acc = acc + x * y * k
    return acc


def test_for_over_other_iterables_stays_python(ops):
    check(pairs, ([vec(1), vec(2), vec(3)], [vec(4), vec(5), vec(6)]))
    assert ops == {}


def last_value(x, n):
    last = x[0]
    i = kiln.tensor(0)
    while i < n:
        last = x[i] * 2  # assigned before it is read: carried because it is read after
        i = i + 1
    first = x[0]
    for j in range(n):
        first = x[j] + 1
    return last, first


def test_a_loop_carries_what_is_read_after_it(ops):
    x = vec(1, 2, 3, 4)
    check(last_value, (x, kiln.tensor(3)), (x, 3))
    assert ops == {"while_loop": 2, "fori_loop": 1}


# -- break, continue, else -------------------------------------------------------

def skip_negative(x, n):
    acc = kiln.zeros(())
    for i in range(n):
        if x[i] < 0:
            continue
        acc = acc + x[i]
    return acc


def while_break_continue(x):
    i = kiln.tensor(0)
    acc = kiln.zeros(())
    while i < 5:
        i = i + 1
        if x[i - 1] > 3:
            break
        if x[i - 1] < 0:
            continue
        acc = acc + x[i - 1]
    else:
        acc = acc - 1000
    return acc


five = st.lists(floats, min_size=5, max_size=5).map(lambda v: kiln.tensor(v))


@given(five)
@settings(max_examples=40, deadline=None)
def test_break_continue_and_else_in_tensor_loops(x):
    check(until_negative, (x.reshape(5, 1),))
    check(skip_negative, (x, kiln.tensor(5)), (x, 5))
    check(while_break_continue, (x,))


def python_loop_tensor_break(x):
    acc = kiln.zeros(())
    for i in range(4):
        if x[i] < 0:  # a tensor: the later iterations run under a cond on the flag
            break
        acc = acc + x[i]
    return acc


@given(st.lists(floats, min_size=4, max_size=4).map(lambda v: kiln.tensor(v)))
@settings(max_examples=30, deadline=None)
def test_a_break_under_a_tensor_condition_in_a_python_loop(x):
    check(python_loop_tensor_break, (x,))


# -- return --------------------------------------------------------------------
def early_return(x):
    if x.sum() > 0:
        return x * 2
    y = x - 1
    if y.sum() < -5:
        return y * 10
    elif y.sum() < -4:
        return
    return y


def return_in_python_loop(x, n):
    for i in range(n):
        if i == 2:
            return x * i
        x = x + 1
    return x


def test_early_return(ops):
    check(early_return, (vec(1, 2),), (vec(-3, -3),), (vec(-1, -1),))
    assert script(early_return)(vec(-1.5, -1.5)) is None
    check(return_in_python_loop, (vec(1, 2), 5), (vec(1, 2), 1))


# -- and, or, not, a if c else b ------------------------------------------------------
def python_logic(a, b):
    return (a and b), (a or b), (not a), (b if a else "no")


@given(vectors, vectors)
@settings(max_examples=30, deadline=None)
def test_and_or_not_and_conditional_expressions_on_tensors(x, y):
    check(logic, (x, y))


def test_and_or_not_on_python_values_keep_python_results():
    scripted = script(python_logic)
    for a, b in itertools.product([0, 2, "", "s", None, [1]], repeat=2):
        assert scripted(a, b) == python_logic(a, b)


# -- variables: closures, globals, methods ----------------------------------------------
SCALE = 2.0


def uses_global(x):
    if x.sum() > 0:
        x = x * SCALE
    return x


def test_globals_and_closure_cells_are_read_when_called():
    global SCALE
    scripted = script(uses_global)
    assert_same(scripted(vec(1)), vec(2))
    SCALE = 5.0
    try:
        assert_same(scripted(vec(1)), vec(5))
    finally:
        SCALE = 2.0

    offset = 1.0

    def inner(x):
        if x.sum() > offset:
            x = x - offset
        return x
    scripted = script(inner)
    assert_same(scripted(vec(3)), vec(2))
    offset = 2.5  # the scripted function reads the same cell
    assert_same(scripted(vec(3)), vec(0.5))
    assert scripted.__closure__[scripted.__code__.co_freevars.index("offset")] is \
        inner.__closure__[inner.__code__.co_freevars.index("offset")]


def test_nested_functions_are_left_as_they_are():
    def outer(x):
        def helper(v):
            if v:
                return "python"
            return "other"
        if x.sum() > 0:
            x = x + 1
        return x, helper(1)
    scripted = script(outer)
    assert "if v:" in scripted.code and "if x.sum()" not in scripted.code
    out, label = scripted(vec(1))
    assert label == "python"
    assert_same(out, vec(2))


class Base(nn.Module):
    def forward(self, x):
        return x + 1


class Net(Base):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.__scale = 2.0  # a private name: Python spells it _Net__scale
        self.steps = 3

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            h = super().forward(h) * self.__scale
        else:
            h = h - 1
        for _ in range(self.steps):
            h = h * 0.5
        return h


def test_module_forward_super_and_private_names():
    net = Net()
    x = kiln.randn(2, 3)
    want = [net(x), net(-x)]
    assert script(net) is net
    assert "if_stmt" in net.forward.code and "super(__class__, self)" in net.forward.code
    assert_same([net(x), net(-x)], want)
    assert script(net).forward.code == net.forward.code  # scripting again changes nothing
    bound = script(Net().forward)
    assert "_Net__scale" in bound.code


def test_hybridize_script_scripts_forward():
    net = Net()
    assert not hasattr(net.forward, "code")
    net.hybridize(script=True)
    assert "if_stmt" in net.forward.code


def test_the_rewritten_code_and_the_function_it_came_from():
    @script
    def decorated(x, *rest, scale=2.0, **options):
        """Doubles."""
        if x.sum() > 0:
            x = x * scale
        return x, rest, options
    assert decorated.__name__ == "decorated" and decorated.__doc__ == "Doubles."
    assert "@script" not in decorated.code and decorated.code.startswith("def decorated(")
    assert str(inspect.signature(decorated)) == "(x, *rest, scale=2.0, **options)"
    out, rest, options = decorated(vec(1), 7, scale=3.0, mode="m")
    assert_same(out, vec(3))
    assert rest == (7,) and options == {"mode": "m"}
    assert script(decorated) is decorated


def failing(x, flag):
    if flag:
        x = x / 0 + [1]  # a TypeError, raised from the true branch
    return x


def test_errors_in_the_code_point_at_its_own_lines():
    with pytest.raises(TypeError) as info:
        script(failing)(vec(1), True)
    frames = [f for f in traceback.extract_tb(info.tb) if f.filename == FILE]
    assert [f.lineno for f in frames][-1] == int(at(failing, "x = x / 0").rsplit(":", 1)[1])
    assert frames[-2].lineno == int(at(failing, "if flag").rsplit(":", 1)[1])


# -- random programs ----------------------------------------------------------------------
_SOURCES = tempfile.TemporaryDirectory(prefix="kiln_script_")  # removed at exit
_count = itertools.count()


@st.composite
def programs(draw, tensors):
    """def f(a, b, t): random nests of if/elif/else, for, while, break,
    continue and return over a and b (a tensor per loop counter keeps every
    while finite). With tensors, no `return` inside a loop (refused there)."""
    counters = itertools.count()

    def cond():
        v, w = draw(st.sampled_from("ab")), draw(st.sampled_from("ab"))
        c = draw(st.sampled_from([-2, 0, 1, 3]))
        return draw(st.sampled_from([f"{v} > {c}", f"not {v} < {c}", f"{v} > {c} and {w} < {c + 2}",
                                     f"{v} < {c} or {w} > {v}"]))

    def block(depth, in_loop, indent):
        lines = []
        for _ in range(draw(st.integers(1, 3))):
            kinds = ["assign", "assign"] + (["if", "for", "while"] if depth < 2 else [])
            kinds += ["break", "continue"] if in_loop else []
            kinds += ["return"] if not (tensors and in_loop) else []
            kind = draw(st.sampled_from(kinds))
            if kind == "assign":
                v, w = draw(st.sampled_from("ab")), draw(st.sampled_from("ab"))
                c = draw(st.sampled_from([0.5, 1, -1.5]))
                lines.append(f"{indent}{v} = {v} * 0.5 + {w} * 0.25 + {c}")
            elif kind in ("break", "continue"):
                lines.append(f"{indent}{kind}")
            elif kind == "return":
                lines.append(f"{indent}return a - b, b")
            elif kind == "if":
                lines.append(f"{indent}if {cond()}:")
                lines += block(depth + 1, in_loop, indent + "    ")
                if draw(st.booleans()):
                    lines.append(f"{indent}elif {cond()}:")
                    lines += block(depth + 1, in_loop, indent + "    ")
                if draw(st.booleans()):
                    lines.append(f"{indent}else:")
                    lines += block(depth + 1, in_loop, indent + "    ")
            elif kind == "for":
                lines.append(f"{indent}for i in range({draw(st.sampled_from(['t', '2']))}):")
                lines.append(f"{indent}    a = a + i * 0.25")
                lines += block(depth + 1, True, indent + "    ")
            else:
                k = f"k{next(counters)}"
                lines.append(f"{indent}{k} = a * 0")
                lines.append(f"{indent}while {k} < 3:")
                lines.append(f"{indent}    {k} = {k} + 1")
                lines += block(depth + 1, True, indent + "    ")
        return lines

    body = block(0, False, "    ")
    return "\n".join(["def f(a, b, t):", *body, "    return a + b, a"]) + "\n"


def _load(source):
    path = os.path.join(_SOURCES.name, f"program_{next(_count)}.py")
    with open(path, "w") as file:
        file.write(source)
    namespace = {}
    exec(compile(source, path, "exec"), namespace)
    return namespace["f"]


@given(programs(tensors=False), st.sampled_from([-3.0, -1.0, 0.5, 2.0, 4.0]),
       st.sampled_from([-2.0, 0.0, 1.5, 3.0]), st.integers(0, 3))
@settings(max_examples=150, deadline=None)
def test_random_programs_on_python_values(source, a, b, t):
    fn = _load(source)
    assert script(fn)(a, b, t) == fn(a, b, t), script(fn).code


@given(programs(tensors=True), st.sampled_from([-3.0, -1.0, 0.5, 2.0, 4.0]),
       st.sampled_from([-2.0, 0.0, 1.5, 3.0]), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_random_programs_on_tensors(source, a, b, t):
    fn = _load(source)
    args = (kiln.tensor(a), kiln.tensor(b), kiln.tensor(t))
    assert_same(script(fn)(*args), fn(*args))
