"""kiln.jit.script refuses what it cannot turn into the same program in a
graph, and each refusal names the construct or variable and the file and
line: while scripting (`global` assigned in a branch, a jump out of a
`with`, generators, lambdas, ...) or when the statement turns out to be on
a tensor (a list changed in the loop, `try`, `raise`, `return` in a loop,
a value a loop cannot carry)."""
import functools

import pytest

import kiln
from kiln.jit import ScriptError, script
from script_helpers import assert_same, at, vec
from script_programs import branch

FILE = __file__


def return_in_tensor_loop(x, n):
    for i in range(n):
        if i > 2:
            return x - 1
        x = x + 1
    return x


def test_return_inside_a_tensor_loop_is_refused():
    fn = return_in_tensor_loop
    with pytest.raises(ScriptError, match=f"the `return` at {at(fn, 'return x - 1')} is inside the "
                       f"`for` loop on a tensor at {at(fn, 'for i')}; .*cannot return early"):
        script(fn)(vec(1, 2), kiln.tensor(5))


def return_in_python_loop_under_tensor_if(x):
    for i in range(3):
        if x[i] > 0:
            return x[i]
    return x[0]


def test_return_in_a_loop_under_a_tensor_if_is_refused():
    fn = return_in_python_loop_under_tensor_if
    with pytest.raises(ScriptError, match=f"the `return` at {at(fn, 'return x[i]')} is inside a "
                       f"loop and under the `if` on a tensor at {at(fn, 'if x[i]')}"):
        script(fn)(vec(1, 2, 3))


# -- what script refuses ----------------------------------------------------------------
def appends_in_loop(x, n):
    outs = []
    for i in range(n):
        outs.append(x[i])
    return outs


def changes_dict_in_if(x, cache):
    if x.sum() > 0:
        cache["hit"] = x
    return x


def catches(x):
    if x.sum() > 0:
        try:
            x = x * 2
        except RuntimeError:
            pass
    return x


def raises(x):
    while x.sum() > 0:
        x = x - 1
        if x.sum() > 100:
            raise ValueError("too big")
    return x


def test_what_a_graph_cannot_repeat():
    with pytest.raises(ScriptError, match=f"list 'outs' is changed \\(outs.append\\(...\\) at "
                       f"{at(appends_in_loop, 'outs.append')}\\) inside the `for` loop on a "
                       f"tensor at {at(appends_in_loop, 'for i')}"):
        script(appends_in_loop)(vec(1, 2), kiln.tensor(2))
    assert script(appends_in_loop)(vec(1, 2), 2)[1].item() == 2  # a Python loop appends
    with pytest.raises(ScriptError, match=f"dict 'cache' is changed \\(cache\\[...\\] = at "
                       f"{at(changes_dict_in_if, 'cache[')}\\) inside the `if` on a tensor"):
        script(changes_dict_in_if)(vec(1), {})
    with pytest.raises(ScriptError, match=f"`try` at {at(catches, 'try:')} is inside the `if` on a "
                       f"tensor at {at(catches, 'if x')}"):
        script(catches)(vec(1))
    with pytest.raises(ScriptError, match=f"`raise` at {at(raises, 'raise')} is inside the `while` "
                       f"loop on a tensor at {at(raises, 'while')}"):
        script(raises)(vec(1))


COUNTER = 0


def assigns_global(x):
    global COUNTER
    if x.sum() > 0:
        COUNTER += 1
    return x


def assigns_nonlocal():
    total = 0

    def add(x):
        nonlocal total
        for _ in range(2):
            total = total + 1
        return x
    return add


def yields(x):
    if x.sum() > 0:
        yield x


def break_in_with(x):
    for i in range(3):
        with kiln.no_grad():
            if i == 1:
                break
            x = x + 1
        x = x * 2
    return x


def walrus_in_while(x):
    while (n := x.sum()) > 1:
        x = x / 2
    return x, n


def test_what_script_refuses_to_convert():
    with pytest.raises(ScriptError, match=f"`global COUNTER` \\(line "
                       f"{at(assigns_global, 'global').rsplit(':')[1]}\\) is assigned inside the "
                       f"`if` at {at(assigns_global, 'if x')}"):
        script(assigns_global)
    with pytest.raises(ScriptError, match="`nonlocal total` .* is assigned inside the `for`"):
        script(assigns_nonlocal())
    with pytest.raises(ScriptError, match=f"yields .*{FILE}:.* is a generator"):
        script(yields)
    with pytest.raises(ScriptError, match=f"the `break` at {at(break_in_with, 'break')}: it leaves "
                       "the `with` at line .* from inside the `if`"):
        script(break_in_with)
    with pytest.raises(ScriptError, match=f"`:=` in the condition of the `while` loop at "
                       f"{at(walrus_in_while, 'while')}"):
        script(walrus_in_while)
    with pytest.raises(ScriptError, match="is a lambda"):
        script(lambda x: x)
    with pytest.raises(ScriptError, match="wrapped by a decorator"):
        script(_wrapped(branch))
    with pytest.raises(TypeError, match="expected a function, a method or a Module"):
        script(len)
    namespace = {}
    exec("def made(x):\n    return x\n", namespace)
    with pytest.raises(ScriptError, match="cannot read the source of made"):
        script(namespace["made"])


def _wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


def loop_variable_after(x, n):
    for i in range(n):
        x = x + i
    return x, i


def first_assigned_in_loop(x, n):
    for _ in range(n):
        y = x * 2
    return y


def carries_a_string(x, n):
    name = "a"
    for _ in range(n):
        name = name + "b"
        x = x + 1
    return x, name


def float_then_float64(x, n):
    total = 0.0
    for i in range(n):
        total = total + x[i]
    return total


def test_what_a_tensor_loop_cannot_carry():
    n = kiln.tensor(2)
    with pytest.raises(ScriptError, match=f"loop variable 'i' of the `for` loop on a tensor at "
                       f"{at(loop_variable_after, 'for i')} is used after the loop"):
        script(loop_variable_after)(vec(1), n)
    with pytest.raises(ScriptError, match=f"variable 'y' is first assigned inside the `for` loop "
                       f"on a tensor at {at(first_assigned_in_loop, 'for _')} and used after it"):
        script(first_assigned_in_loop)(vec(1), n)
    with pytest.raises(ScriptError, match=f"variable 'name' is carried through the `for` loop on "
                       f"a tensor at {at(carries_a_string, 'for _')} but is a str"):
        script(carries_a_string)(vec(1), n)
    with pytest.raises(ScriptError, match="variable 'total' starts as the Python float 0.0 .* "
                       f"at {at(float_then_float64, 'for i')} makes it kiln.float64"):
        script(float_then_float64)(vec(1, 2).to(kiln.float64), n)
    assert_same(script(float_then_float64)(vec(1, 2), n), 3.0)  # float32: a Python float fits
