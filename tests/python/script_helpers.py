"""What the kiln.jit.script tests share: comparing results, and finding a
function's line."""
import inspect

import numpy as np
from hypothesis import strategies as st

import kiln
from kiln.jit import script


def plain(value):
    """Tensors as NumPy arrays, containers as lists, for comparing."""
    if isinstance(value, kiln.Tensor):
        return value.detach().numpy()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def assert_same(got, want):
    """Equal structure and values (a tensor equals the number it holds)."""
    got, want = plain(got), plain(want)
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64),
                               np.asarray(want, dtype=np.float64), rtol=1e-5, atol=1e-6)


def at(fn, text):
    """'file:line' of the line of fn's source that starts with `text`."""
    lines, start = inspect.getsourcelines(fn)
    matches = [start + i for i, line in enumerate(lines) if line.strip().startswith(text)]
    assert len(matches) == 1, (text, matches)
    return f"{fn.__code__.co_filename}:{matches[0]}"


def check(fn, *inputs):
    """script(fn) gives what fn gives on each input tuple."""
    scripted = script(fn)
    for args in inputs:
        assert_same(scripted(*args), fn(*args))
    return scripted


def vec(*values):
    return kiln.tensor([float(v) for v in values])


floats = st.floats(-4, 4, allow_nan=False, width=32)
vectors = st.lists(floats, min_size=3, max_size=3).map(lambda v: kiln.tensor(v))
