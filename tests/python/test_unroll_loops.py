"""unroll_loops (src/kiln/jit/passes/unroll.cpp): a compiled scan with a
small static trip count runs as its step once per iteration (in the plan:
lowered_graph; graph keeps the loop), and gives
eager's results bit for bit, as the loop (KILN_UNROLL=0) does, at the
rule's bounds (length <= 64, length x step nodes <= 256, length x bytes of
step results <= 256 KiB)."""
import numpy as np
import pytest

import kiln
from kiln import nn

TELLING = np.array([-0.0, 0.5, np.nan, 1.25, np.inf, -2.0, 0.0, -np.inf, 3.0], dtype=np.float32)


def telling(*shape, scale=1.0):
    """Signed zeros, NaN and infinities, which tell a changed rounding apart."""
    n = int(np.prod(shape))
    values = np.resize(TELLING, n) * np.float32(scale) + (np.arange(n) % 7) * np.float32(0.125)
    return kiln.tensor(values.reshape(shape).astype(np.float32))


def scans(graph):
    return [node.op for node in graph.nodes].count("scan")


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [] if out is None else [out]


def trace_both(fn, args, monkeypatch):
    """fn traced with the default pipeline, and with unrolling off."""
    with kiln.no_grad():
        unrolled = kiln.jit.trace(fn, args)
        with monkeypatch.context() as m:
            m.setenv("KILN_UNROLL", "0")
            loop = kiln.jit.trace(fn, args)
    return unrolled, loop


def check(fn, args, monkeypatch, unrolls):
    unrolled, loop = trace_both(fn, args, monkeypatch)
    assert scans(unrolled.lowered_graph) == (0 if unrolls else 1), str(unrolled.lowered_graph)
    assert scans(loop.lowered_graph) == 1
    assert scans(unrolled.graph) == 1  # what prints, saves and exports keeps the loop
    with kiln.no_grad():
        want = [t.numpy() for t in flat(fn(*args))]
        for compiled in (unrolled, loop):
            got = [t.numpy() for t in flat(compiled(*args))]
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                assert g.tobytes() == w.tobytes()
    return unrolled


def two_by_two(reverse):
    """Two carries, two xs, two ys, a weight from outside (a constant) and an
    input the step reads (a capture)."""
    w = kiln.tensor(np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3))

    def fn(h, g, xs, zs, bias):
        def step(carry, x):
            h, g = carry
            x_t, z_t = x
            a = h @ w + x_t + bias
            b = g * z_t
            return (a.tanh(), b - h.sum()), (a, b.exp())
        return kiln.scan(step, (h, g), (xs, zs), reverse=reverse)
    return fn


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length,unrolls", [(1, True), (5, True), (16, True), (65, False)])
def test_scan_unrolls_with_eagers_bits(monkeypatch, length, unrolls, reverse):
    args = (telling(2, 3), telling(2, 3, scale=0.5), telling(length, 2, 3, scale=0.25),
            telling(length, 2, 3, scale=-0.5), telling(3))
    check(two_by_two(reverse), args, monkeypatch, unrolls)


@pytest.mark.parametrize("length,unrolls", [(64, True), (65, False)])
def test_length_at_the_bound_unrolls_and_one_more_stays(monkeypatch, length, unrolls):
    def fn(h, xs):
        return kiln.scan(lambda c, x: (c + x,) * 2, h, xs)
    check(fn, (telling(3), telling(length, 3)), monkeypatch, unrolls)


def test_scan_of_length_zero_is_its_init(monkeypatch):
    def fn(h, xs):
        return kiln.scan(lambda c, x: (c * x + 1, None), h, xs)[0]
    unrolled = check(fn, (telling(3), telling(0, 3)), monkeypatch, True)
    assert "unroll a scan of length 0" in str(unrolled.report())


def test_result_bytes_at_the_bound_unroll_and_more_stay(monkeypatch):
    def fn(h, xs):  # carry and y: 2 x 4 bytes x n a step, 4 steps
        return kiln.scan(lambda c, x: ((c * x).sin(), (c + x).cos()), h, xs)
    check(fn, (telling(8192), telling(4, 8192)), monkeypatch, True)  # 256 KiB
    check(fn, (telling(8193), telling(4, 8193)), monkeypatch, False)


def test_static_fori_loop_unrolls_and_its_counter_folds(monkeypatch):
    def fn(x, a):
        return kiln.fori_loop(0, 6, lambda i, v: v * a + i.float(), x)
    unrolled = check(fn, (telling(4), telling(4, scale=0.5)), monkeypatch, True)
    ops = [node.op for node in unrolled.lowered_graph.nodes]
    # All in one fused op.
    assert "cast" not in ops and "add" not in ops, str(unrolled.lowered_graph)


def test_environment_switch_keeps_or_unrolls_every_loop(monkeypatch):
    def fn(h, xs):
        return kiln.scan(lambda c, x: (c + x,) * 2, h, xs)
    args = (telling(2), telling(100, 2))
    with kiln.no_grad():
        assert scans(kiln.jit.trace(fn, args).lowered_graph) == 1
        monkeypatch.setenv("KILN_UNROLL", "all")
        traced = kiln.jit.trace(fn, args)
        assert scans(traced.lowered_graph) == 0
        for got, want in zip(traced(*args), fn(*args)):
            assert got.numpy().tobytes() == want.numpy().tobytes()
        monkeypatch.setenv("KILN_UNROLL", "yes")
        with pytest.raises(ValueError, match="KILN_UNROLL takes 0, 1 or all, got 'yes'"):
            kiln.jit.trace(fn, args)


def test_gradients_through_an_unrolled_scan_equal_eagers():
    w = kiln.tensor(np.linspace(-1, 1, 9).reshape(3, 3))

    def fn(h, xs):
        h_n, hs = kiln.scan(lambda h, x: ((h @ w + x).tanh(),) * 2, h, xs, reverse=True)
        return h_n.sum() + (hs * hs).sum()

    h = kiln.tensor(np.linspace(-0.5, 0.5, 6).reshape(2, 3))
    xs = kiln.tensor(np.linspace(-2, 2, 24).reshape(4, 2, 3))
    traced = kiln.jit.trace(fn, (h, xs))
    assert scans(traced.lowered_graph) == 0

    def grads(f):
        leaves = [t.detach().clone().requires_grad_() for t in (h, xs)]
        f(*leaves).backward()
        return [leaf.grad.numpy() for leaf in leaves]

    # Gradient plans keep the loop: its backward recomputes the carries and
    # may round differently from eager's tape.
    for got, want in zip(grads(traced), grads(fn)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_hybridized_lstm_over_a_short_sequence(monkeypatch):
    kiln.manual_seed(0)
    lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True).eval()
    x = telling(5, 3, 4, scale=0.25)
    with kiln.no_grad():
        want = [t.numpy() for t in flat(lstm(x))]
        unrolled, loop = trace_both(lstm, x, monkeypatch)
        assert scans(unrolled.lowered_graph) == 0 and scans(loop.lowered_graph) == 4
        for compiled in (unrolled, loop):
            got = [t.numpy() for t in flat(compiled(x))]
            for g, w in zip(got, want):
                assert g.tobytes() == w.tobytes()
