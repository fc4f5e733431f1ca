"""Every known way a traced graph can diverge from the eager code it was
recorded from, from Python. Each reported case must warn with a
TracerWarning naming this file and the offending line, and raise TraceError
under strict=True. The cases kiln cannot see are listed at the end, each
with what happens instead, so that a change in behaviour shows up here."""
import inspect
import random
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn

HERE = __file__


def line_of(fn, marker):
    """The line number, in this file, of the line of `fn` holding `marker`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def trace_reports(fn, inputs, marker, pattern):
    """Traces fn twice: once collecting warnings, once strict."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kiln.jit.trace(fn, inputs)
    reported = [w for w in caught if issubclass(w.category, kiln.jit.TracerWarning)]
    assert reported, f"no TracerWarning for {fn.__name__}"
    source = fn.forward if isinstance(fn, nn.Module) else fn
    where = f"{HERE}:{line_of(source, marker)}"
    texts = [str(w.message) for w in reported]
    assert any(pattern in t and where in t for t in texts), (where, texts)
    assert any(w.filename == HERE and w.lineno == line_of(source, marker) for w in reported)
    with pytest.raises(kiln.jit.TraceError, match=pattern.replace("(", r"\(").replace(")", r"\)")):
        kiln.jit.trace(fn, inputs, strict=True)


X = kiln.randn(3)


def test_item_on_a_traced_value():
    def f(x):
        scale = (x * 2).sum().item()  # HERE
        return x * scale
    trace_reports(f, X, "# HERE", "item() on a traced value")


def test_python_if_on_a_tensor():
    def f(x):
        if (x * 2).sum() > 0:  # HERE
            return x
        return -x
    trace_reports(f, X, "# HERE", "bool() (a Python `if` or `while`) on a traced value")


def test_float_and_int_of_a_tensor():
    def f(x):
        return x * float((x + 1).sum())  # HERE
    trace_reports(f, X, "# HERE", "float() on a traced value")

    def g(x):
        return x * int((x + 1).sum())  # HERE
    trace_reports(g, X, "# HERE", "int() on a traced value")


def test_numpy_tolist_array_buffer_and_dlpack_reads():
    def f(x):
        return x * float((x + 1).numpy().sum())  # HERE
    trace_reports(f, X, "# HERE", "numpy() on a traced value")

    def g(x):
        return x * sum((x + 1).tolist())  # HERE
    trace_reports(g, X, "# HERE", "on a traced value")

    def h(x):
        return x * float(np.asarray(x + 1).sum())  # HERE
    trace_reports(h, X, "# HERE", "on a traced value")

    def m(x):
        return x * memoryview(x + 1)[0]  # HERE
    trace_reports(m, X, "# HERE", "memoryview() on a traced value")

    def d(x):
        return x * float(np.from_dlpack(x + 1).sum())  # HERE
    trace_reports(d, X, "# HERE", "__dlpack__() on a traced value")


def test_printing_a_traced_value():
    def f(x):
        y = x * 2
        print(y)  # HERE
        return y
    trace_reports(f, X, "# HERE", "print()/repr() on a traced value")

    def g(x):
        y = x * 2
        _ = f"{y}"  # HERE
        return y
    trace_reports(g, X, "# HERE", "print()/repr() on a traced value")


def test_reading_an_input_or_a_parameter():
    def f(x):
        return x * x.item()  # HERE
    trace_reports(f, kiln.randn(1), "# HERE", "its value at trace time was frozen")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(kiln.ones(1))
        def forward(self, x):  # noqa: E301
            return x * self.scale.item()  # HERE
    trace_reports(Net(), X, "# HERE", "its value at trace time was frozen")


def test_random_ops_inside_traced_code_draw_anew_unreported():
    def f(x):
        return x + kiln.randn(3) + kiln.rand_like(x)  # ops: the graph draws on every call
    with warnings.catch_warnings():
        warnings.simplefilter("error", kiln.jit.TracerWarning)
        traced = kiln.jit.trace(f, X, strict=True)
    assert not kiln.equal(traced(X), traced(X))


OUTSIDE = kiln.zeros(3)


def test_in_place_write_into_a_tensor_from_outside():
    def f(x):
        OUTSIDE.add_(x)  # HERE
        return x * 2
    trace_reports(f, X, "# HERE", "from outside")


def test_in_place_write_through_a_view():
    def f(x):
        y = x * 2
        first = y[0:2]
        first.mul_(3)
        return y + 1  # HERE: y is used after a write through its view
    trace_reports(f, X, "# HERE", "was changed by an in-place write into a view or base of it")


def test_weight_that_requires_grad_captured_as_a_constant():
    w = kiln.randn(3, requires_grad=True)

    def f(x):
        return x * w  # HERE
    trace_reports(f, X, "# HERE", "requires grad")


def test_batch_norm_statistics_of_a_module_the_function_closes_over():
    bn = nn.BatchNorm1d(3).requires_grad_(False)

    def f(x):
        return bn(x)  # HERE
    # Both of the module's state writes are reported: its batch counter
    # (strict mode stops at that first one) and its running statistics.
    trace_reports(f, kiln.randn(4, 3), "# HERE", "in-place add into a tensor from outside")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kiln.jit.trace(f, kiln.randn(4, 3))
    assert any("updates its input 3 in place" in str(w.message) for w in caught)


def test_output_that_ignores_the_inputs_only_warns():
    def f(x):
        return kiln.ones(3) * 2
    with pytest.warns(kiln.jit.TracerWarning, match="does not depend on"):
        kiln.jit.trace(f, X)
    with pytest.warns(kiln.jit.TracerWarning, match="does not depend on"):
        kiln.jit.trace(f, X, strict=True)  # right result, suspicious use: never an error


def test_a_cache_that_keeps_growing_warns_once_naming_the_guard():
    f = kiln.compile(lambda x: x * 2, dynamic=False)  # else one symbolic entry serves all
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            f(kiln.ones(n))
    growth = [str(w.message) for w in caught if "entries" in str(w.message)]
    assert len(growth) == 1 and "input 0 dim 0" in growth[0], growth


# -- what tracing cannot see ---------------------------------------------------
# Python values are read while recording and frozen into the graph without a
# report: kiln records tensor ops, not Python bytecode.

def test_unseen_shape_dependent_control_flow_is_guarded_by_the_cache():
    # Shapes are part of the signature: a new shape records again, so the
    # branch taken always matches the shape.
    f = kiln.compile(lambda x: x * 2 if x.shape[0] > 2 else x * 3)
    assert kiln.equal(f(kiln.ones(3)), kiln.full([3], 2.0))
    assert kiln.equal(f(kiln.ones(2)), kiln.full([2], 3.0))


def test_unseen_python_numbers_and_flags_are_frozen():
    # Module attributes, globals and closure variables are guarded
    # (test_jit_values.py); a number inside a container is not.
    settings = {"scale": 2.0}
    f = kiln.compile(lambda x: x * settings["scale"])
    f(X)
    settings["scale"] = 5.0
    assert kiln.equal(f(X), X * 2.0)  # not X * 5: the number was frozen, unreported


def test_unseen_python_randomness_is_frozen():
    f = kiln.compile(lambda x: x * random.random())
    first = f(X)
    assert kiln.equal(f(X), first)  # the same draw on every call, unreported
