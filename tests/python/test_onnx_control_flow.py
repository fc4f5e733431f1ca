"""ONNX for control flow (issue 22), export: kiln's cond, while_loop, scan
and fori_loop and the RNN layers exported and run in ONNX Runtime, against
kiln, and round trips kiln -> ONNX -> kiln. Import and the forms kiln
refuses: test_onnx_control_flow_import.py."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln
from kiln import nn

# Functions closing over module weights trace them as constants, which kiln
# reports.
pytestmark = pytest.mark.filterwarnings("ignore:a tensor that requires grad")

RTOL, ATOL = 1e-5, 1e-5


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_run(path, *inputs):
    run = session(path)
    feeds = {i.name: np.asarray(x.numpy() if isinstance(x, kiln.Tensor) else x)
             for i, x in zip(run.get_inputs(), inputs)}
    return run.run(None, feeds)


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def assert_close(got, want, rtol=RTOL, atol=ATOL):
    got, want = flat(got), flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy() if isinstance(g, kiln.Tensor) else g
        w = w.detach().numpy() if isinstance(w, kiln.Tensor) else w
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def export(fn, example, path):
    """Exports fn traced on example, checks the file, returns its op types."""
    kiln.onnx.export(fn, example, path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    return op_types(model.graph)


def op_types(graph):
    types = []
    for node in graph.node:
        types.append(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                types += op_types(attr.g)
    return types


def check_export(fn, example, inputs, path):
    """Exports fn, then compares ONNX Runtime with kiln on each input tuple."""
    types = export(fn, example, path)
    for args in inputs:
        with kiln.no_grad():
            want = fn(*args)
        assert_close(ort_run(path, *args), want)
    return types


# ---------------------------------------------------------------- export


def branchy(x, w):
    return kiln.cond(x.sum() > 0, lambda v: (v @ w, v.sum()), lambda v: (-v @ w, v.amax()), x)


def test_cond_exports_as_if_and_takes_either_branch(tmp_path):
    w = kiln.randn(4, 3)
    x = kiln.randn(2, 4)
    inputs = [(x.abs(), w), (-x.abs(), w), (x, w)]
    types = check_export(branchy, (x, w), inputs, tmp_path / "c.onnx")
    assert types.count("If") == 1


def test_cond_reading_outer_values_and_nested_in_a_loop(tmp_path):
    def f(x, scale):
        def body(s):
            value, count = s
            step = kiln.cond(count > 1, lambda v: v * scale, lambda v: v + scale, value)
            return step, count + 1

        return kiln.while_loop(lambda s: s[1] < 5, body, (x, kiln.tensor(0)))

    x, scale = kiln.randn(3), kiln.tensor(1.5)
    types = check_export(f, (x, scale), [(x, scale), (x * 3, kiln.tensor(-0.5))],
                         tmp_path / "n.onnx")
    assert "Loop" in types and "If" in types


def doubling(x):
    return kiln.while_loop(lambda s: s[0].abs().sum() < 100, lambda s: (s[0] * 2, s[1] + 1),
                           (x, kiln.tensor(0)))


def test_while_loop_exports_as_loop_with_any_iteration_count(tmp_path):
    x = kiln.randn(4)
    # 0, 1 and many iterations
    inputs = [(x * 1000 + 200,), (x / x.abs().sum() * 60,), (x * 1e-3,)]
    types = check_export(doubling, (x,), inputs, tmp_path / "w.onnx")
    assert types.count("Loop") == 1
    counts = [int(ort_run(tmp_path / "w.onnx", *args)[1]) for args in inputs]
    assert counts[0] == 0 and counts[1] == 1 and counts[2] > 5


def test_while_loop_with_max_iterations_is_a_loop_with_a_trip_count(tmp_path):
    def f(x):
        return kiln.while_loop(lambda s: s.sum() < 10, lambda s: s + 1, x, max_iterations=20)

    x = kiln.zeros(2)
    check_export(f, (x,), [(x,), (x + 3,), (x + 9,)], tmp_path / "m.onnx")
    loop = next(n for n in onnx.load(str(tmp_path / "m.onnx")).graph.node if n.op_type == "Loop")
    assert loop.input[0] != ""  # M: the bound


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_with_ys_and_captures(tmp_path, reverse):
    def f(h0, xs, w, bias):
        def step(h, x_t):
            h = (h @ w + x_t + bias).tanh()
            return h, (h, h.sum(dim=1))

        return kiln.scan(step, h0, xs, reverse=reverse)

    h0, xs, w, bias = kiln.randn(2, 4), kiln.randn(5, 2, 4), kiln.randn(4, 4), kiln.randn(4)
    types = check_export(f, (h0, xs, w, bias), [(h0, xs, w, bias), (h0 * 0, -xs, w * 2, bias)],
                         tmp_path / "s.onnx")
    assert types.count("Scan") == 1


def test_scan_with_several_carries_and_xs(tmp_path):
    def f(a, b, xs, ys):
        def step(carry, x):
            s, p = carry
            x_t, y_t = x
            return (s + x_t * y_t, p * 0.5 + y_t), s.sum()

        return kiln.scan(step, (a, b), (xs, ys), reverse=True)

    args = (kiln.randn(3), kiln.randn(3), kiln.randn(6, 3), kiln.randn(6, 3))
    check_export(f, args, [args], tmp_path / "s2.onnx")


def test_fori_loop_with_static_and_tensor_bounds(tmp_path):
    def static(x):
        return kiln.fori_loop(0, 6, lambda i, acc: acc * 0.5 + i, x)

    def dynamic(x, n):
        return kiln.fori_loop(kiln.tensor(1), n, lambda i, acc: acc + acc.sum() * 0.1 + i, x)

    x = kiln.randn(3)
    assert "Loop" in check_export(static, (x,), [(x,), (-x,)], tmp_path / "f.onnx")
    n = kiln.tensor(4)
    check_export(dynamic, (x, n), [(x, n), (x, kiln.tensor(1)), (x, kiln.tensor(9))],
                 tmp_path / "g.onnx")


def test_a_scripted_function_exports(tmp_path):
    @kiln.jit.script
    def clip_steps(x):
        steps = 0
        while x.abs().sum() > 1:
            x = x / 2
            steps += 1
        if steps > 3:
            return x, steps
        return x * 2, steps

    x = kiln.randn(5)
    check_export(clip_steps, (x,), [(x,), (x * 100,), (x * 1e-3,)], tmp_path / "sc.onnx")


def rnn_outputs(out):
    return flat(out)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN], ids=["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
def test_rnn_layers_run_in_onnx_runtime(tmp_path, cls, batch_first, bidirectional):
    net = cls(3, 5, num_layers=2, batch_first=batch_first, bidirectional=bidirectional)
    net.eval()
    x = kiln.randn(4, 6, 3)
    path = tmp_path / "rnn.onnx"
    types = export(net, x, path)
    # LSTM and GRU layers become ONNX's own ops, one per layer and direction
    layers = 2 * (2 if bidirectional else 1)
    expected = {nn.LSTM: "LSTM", nn.GRU: "GRU", nn.RNN: "Scan"}[cls]
    assert types.count(expected) == layers
    with kiln.no_grad():
        assert_close(ort_run(path, x), rnn_outputs(net(x)))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN], ids=["LSTM", "GRU", "RNN"])
def test_rnn_layers_with_initial_states_and_dynamic_sizes(tmp_path, cls):
    net = cls(3, 5, num_layers=2, bidirectional=True, batch_first=True)
    net.eval()
    path = tmp_path / "rnn.onnx"

    def lstm(x, h0, c0):
        return net(x, (h0, c0))

    def other(x, h0):
        return net(x, h0)

    run = lstm if cls is nn.LSTM else other
    count = 2 if cls is nn.LSTM else 1
    dynamic = {"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"}, "c0": {1: "batch"}}
    x = kiln.randn(2, 7, 3)
    examples = [kiln.randn(4, 2, 5) for _ in range(count)]  # distinct: not one input twice
    kiln.onnx.export(run, (x, *examples), path, dynamic_axes=dynamic)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    for batch, seq in ((2, 7), (3, 1), (1, 12)):
        x = kiln.randn(batch, seq, 3)
        states = [kiln.randn(4, batch, 5) for _ in range(count)]
        with kiln.no_grad():
            assert_close(ort_run(path, x, *states), rnn_outputs(run(x, *states)))
    kiln.onnx.export(net, x, path, dynamic_axes={"input": {0: "batch", 1: "seq"}})
    for batch, seq in ((1, 3), (5, 9)):
        x = kiln.randn(batch, seq, 3)
        with kiln.no_grad():
            assert_close(ort_run(path, x), rnn_outputs(net(x)))


def test_opset_13_is_written_too(tmp_path):
    net = nn.GRU(3, 4, num_layers=2)
    net.eval()
    x = kiln.randn(5, 2, 3)

    def f(x):
        y, h = net(x)
        return kiln.cond(y.sum() > 0, lambda a, b: (a * 2, b), lambda a, b: (a, -b), y, h)

    kiln.onnx.export(f, (x,), tmp_path / "13.onnx", opset_version=13)
    model = onnx.load(str(tmp_path / "13.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 13
    for v in (x, -x):
        with kiln.no_grad():
            assert_close(ort_run(tmp_path / "13.onnx", v), f(v))


def test_symbolic_scan_length_exports(tmp_path):
    def f(xs):
        return kiln.scan(lambda c, x_t: (c + x_t, c * x_t), kiln.zeros(3), xs)

    traced = kiln.jit.trace(f, (kiln.randn(4, 3),), dynamic_shapes={"xs": {0: "seq"}})
    kiln.onnx.export(traced, None, tmp_path / "sym.onnx")
    for seq in (1, 4, 9):
        xs = kiln.randn(seq, 3)
        assert_close(ort_run(tmp_path / "sym.onnx", xs), f(xs))


# ---------------------------------------------------------------- round trips


def test_kiln_to_onnx_to_kiln(tmp_path):
    w = kiln.randn(4, 3)
    x = kiln.randn(2, 4)
    for name, fn, args, others in [
        ("cond", branchy, (x, w), [(-x.abs(), w), (x.abs(), w)]),
        ("while", doubling, (x[0],), [(x[0] * 500,), (x[0] * 1e-3,)]),
    ]:
        kiln.onnx.export(fn, args, tmp_path / f"{name}.onnx")
        back = kiln.onnx.load(tmp_path / f"{name}.onnx")
        for a in [args, *others]:
            with kiln.no_grad():
                assert_close(back(*a), fn(*a))
    net = nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)
    net.eval()
    seq = kiln.randn(2, 6, 3)
    kiln.onnx.export(net, seq, tmp_path / "lstm.onnx")
    back = kiln.onnx.load(tmp_path / "lstm.onnx")
    with kiln.no_grad():
        assert_close(back(seq), rnn_outputs(net(seq)))
    assert sum(n.op == "scan" for n in back.graph.nodes) == 4  # one per layer and direction
