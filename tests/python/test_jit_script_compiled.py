"""kiln.jit.script, compiled: a scripted function recorded once (kiln.jit.trace
in strict mode, kiln.compile, hybridize(script=True)) gives the eager result
for inputs that take other branches and other trip counts than the inputs it
was recorded with: the graph holds the branch or loop, not the path of one
run. Also what only a recording can see: a value that is not a tensor and
differs between the branches of an `if` on a tensor."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln
from kiln import nn
from kiln.jit import ScriptError, script
from script_helpers import assert_same, floats, vec, vectors
from script_programs import branch, chain, logic, nested, rows, until_negative


def traced(fn, example):
    """fn scripted and traced on `example` in strict mode: a Python decision
    on a traced tensor would be an error, not a path baked in."""
    return kiln.jit.trace(script(fn), example, strict=True)


def check_traced(fn, example, *inputs):
    compiled = traced(fn, example)
    for args in inputs:
        assert_same(compiled(*args), fn(*args))
    return compiled


_traced = {}


def traced_once(fn, example):
    """traced(fn, example), recorded on first use (hypothesis calls a test
    many times; the point is one recording serving every input)."""
    if fn not in _traced:
        _traced[fn] = traced(fn, example)
    return _traced[fn]


# -- if ------------------------------------------------------------------------
def test_if_else():
    check_traced(branch, (vec(1, 2, 3),), (vec(1, 2, 3),), (vec(-1, -2, 0),))
    check_traced(branch, (vec(-1, -2, -3),), (vec(1, 2, 3),), (vec(-1, -2, 0),))


@given(vectors, vectors)
@settings(max_examples=40, deadline=None)
def test_elif_chains_and_nested_ifs(x, y):
    assert_same(traced_once(chain, (vec(1, 1, 1),))(x), chain(x))
    assert_same(traced_once(nested, (vec(1, 1, 1), vec(1, 1, 1)))(x, y), nested(x, y))


def early_return(x):
    if x.sum() > 0:
        return x * 2
    y = x - 1
    if y.sum() < -5:
        return y * 10
    return y


def test_early_return():
    check_traced(early_return, (vec(1, 2),), (vec(1, 2),), (vec(-3, -3),), (vec(-1, -1),))


@given(vectors, vectors)
@settings(max_examples=30, deadline=None)
def test_and_or_not_and_conditional_expressions(x, y):
    assert_same(traced_once(logic, (vec(1, 1, 1), vec(1, 1, 1)))(x, y), logic(x, y))


# -- loops ---------------------------------------------------------------------
def halve_until_small(x):
    steps = kiln.tensor(0)
    while x.abs().sum() > 1:
        x = x / 2
        steps = steps + 1
    return x, steps


def test_while():
    check_traced(halve_until_small, (vec(8, 8),), (vec(8, 8),), (vec(0.1, 0.2),),
                 (vec(100, -3),))


def count_halvings(x):
    steps = 0  # a Python int the loop carries (as a tensor): `+=` on it
    while x.abs().sum() > 1:
        x = x / 2
        steps += 1
    return x, steps


def test_augmented_assignment_in_a_loop():
    check_traced(count_halvings, (vec(8, 8),), (vec(8, 8),), (vec(0.1, 0.2),), (vec(100, -3),))


def up_to(x, n):
    acc = kiln.zeros(x.shape)
    for i in range(n):
        acc = acc + x * i
    return acc


def odd_up_to(x, n):
    acc = kiln.zeros(x.shape)
    for i in range(1, n, 2):
        acc = acc + x * i
    return acc


def down_from(x, n):
    acc = kiln.zeros(x.shape)
    for i in range(n, -1, -1):
        acc = acc + x * i
    return acc


def test_for_over_a_tensor_range():
    x, zero, two = vec(1, 2, 3), kiln.tensor(0), kiln.tensor(2)
    compiled = check_traced(up_to, (x, two), (x, two), (x, kiln.tensor(5)), (x, zero))
    assert_same(compiled(x, kiln.tensor(4)), x * 6)
    check_traced(odd_up_to, (x, two), (x, kiln.tensor(6)), (x, zero))
    check_traced(down_from, (x, two), (x, kiln.tensor(4)), (x, zero))


def sum_first(x, n):
    acc = kiln.zeros(())
    for i in range(n):
        acc = acc + x[i]  # indexed by the loop's own (traced) index
    return acc


def test_indexing_with_the_loop_index():
    x = vec(1, 2, 3, 4, 5)
    check_traced(sum_first, (x, kiln.tensor(2)), (x, kiln.tensor(2)), (x, kiln.tensor(5)),
                 (x, kiln.tensor(0)))


def test_for_over_a_tensor():
    t = kiln.arange(12.0).reshape(4, 3)
    check_traced(rows, (t,), (t,), (-t * 2,))



def skip_negative(x):
    acc = kiln.zeros(())
    for v in x:
        if v < 0:
            continue
        acc = acc + v
    return acc


def while_break_continue(x):
    acc = kiln.zeros(())
    v = x.sum()
    while v > -100:
        v = v - 1
        if v > 3:
            continue
        acc = acc + v
        if acc < -5:
            break
    else:
        acc = acc + 1000
    return acc, v


def python_loop_tensor_break(x):
    acc = kiln.zeros(())
    for i in range(4):
        if x[i] < 0:
            break
        acc = acc + x[i]
    return acc


five = st.lists(floats, min_size=5, max_size=5).map(lambda v: kiln.tensor(v))


@given(five)
@settings(max_examples=30, deadline=None)
def test_break_continue_and_else(x):
    column = x.reshape(5, 1)
    assert_same(traced_once(until_negative, (kiln.ones(5, 1),))(column), until_negative(column))
    assert_same(traced_once(skip_negative, (kiln.ones(5),))(x), skip_negative(x))
    assert_same(traced_once(while_break_continue, (kiln.ones(5),))(x), while_break_continue(x))
    assert_same(traced_once(python_loop_tensor_break, (kiln.ones(5),))(x),
                python_loop_tensor_break(x))


# -- compile and hybridize --------------------------------------------------------
def test_compile_of_a_scripted_function_records_once():
    compiled = kiln.compile(script(halve_until_small))
    for x in (vec(8, 8), vec(0.1, 0.2), vec(100, -3)):
        assert_same(compiled(x), halve_until_small(x))
    info = compiled.cache_info()
    assert "1 entries" in str(info), info


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        steps = kiln.tensor(0)
        while h.abs().sum() > 1:
            h = h * 0.5
            steps = steps + 1
        if steps > 2:
            h = h + 1
        return h, steps


def test_hybridize_script():
    net = Gate()
    x = kiln.randn(2, 3)
    inputs = [x, x * 0.01, x * 100]
    with kiln.no_grad():
        want = [net(v) for v in inputs]
        net.hybridize(script=True)
        got = [net(v) for v in inputs]
    assert_same(got, want)
    assert "1 entries" in str(net.cache_info()), net.cache_info()


MODE = "double"


def by_mode(x):
    if MODE == "double":  # a Python value: decided while recording, and guarded
        return x * 2
    return x + 1


def test_python_conditions_stay_python_and_are_guarded():
    global MODE
    compiled = kiln.compile(script(by_mode))
    assert_same(compiled(vec(1, 2)), vec(2, 4))
    MODE = "add"
    try:
        assert_same(compiled(vec(1, 2)), vec(2, 3))
    finally:
        MODE = "double"
    assert "global MODE" in str(compiled.cache_info()), compiled.cache_info()


# -- what only a recording sees -----------------------------------------------------------
def python_value_differs(x):
    if x.sum() > 0:
        k = 1
    else:
        k = 2
    return x * k


def tensor_or_number(x):
    if x.sum() > 0:
        y = x
    else:
        y = 0.0
    return y


def test_values_that_differ_between_the_branches():
    with pytest.raises(ScriptError, match="variable 'k' is 1 after the true branch and 2 after "
                       "the false branch of the `if` on a tensor at .*test_jit_script_compiled"):
        traced(python_value_differs, (vec(1),))
    with pytest.raises(ScriptError, match="variable 'y' is a tensor after the true branch but a "
                       "float after the false branch"):
        traced(tensor_or_number, (vec(1),))
