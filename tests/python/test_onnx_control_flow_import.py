"""ONNX for control flow (issue 22), import: models with If, Loop, Scan,
LSTM, GRU and RNN (built with onnx.helper, or exported by torch.onnx)
imported into kiln and run against ONNX Runtime, and the forms kiln
refuses, named. Export: test_onnx_control_flow.py."""
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import kiln
from test_onnx_control_flow import ATOL, RTOL, assert_close, op_types, ort_run

# torch's legacy exporter says that it is, and warns about what it traces.
pytestmark = [pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript"),
              pytest.mark.filterwarnings("ignore:::torch")]


# ---------------------------------------------------------------- import


def float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save_model(path, nodes, inputs, outputs, initializers=(), opset=17, check=True):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    if check:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def load_and_compare(path, *inputs, rtol=RTOL, atol=ATOL):
    model = kiln.onnx.load(path)
    got = model(*[kiln.from_numpy(np.asarray(x)) for x in inputs])
    assert_close(got, ort_run(path, *inputs), rtol=rtol, atol=atol)
    return model


def if_model(path):
    """y = x * w + 1 if sum(x) > 0 else x - w; the branches read x and w
    from the outer graph."""
    w = numpy_helper.from_array(np.array([2.0, -1.0, 0.5], np.float32), "w")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "one"], ["t"])],
        "then", [], [float_info("t", [3])])
    else_branch = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"])], "else", [],
                                    [float_info("e", [3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], then_branch=then_branch,
                              else_branch=else_branch)]
    return save_model(path, nodes, [float_info("x", [3])], [float_info("y", [3])], [w, zero, one])


def test_if_imports_as_cond(tmp_path):
    path = if_model(tmp_path / "if.onnx")
    x = np.array([1.0, 2.0, -0.5], np.float32)
    model = load_and_compare(path, x)
    load_and_compare(path, -x)
    assert "cond" in [n.op for n in model.graph.nodes]


def test_if_with_a_condition_known_at_import_is_its_branch(tmp_path):
    flag = numpy_helper.from_array(np.array(False), "flag")
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                                    [float_info("t", [2])])
    else_branch = helper.make_graph([helper.make_node("Exp", ["x"], ["e"])], "else", [],
                                    [float_info("e", [2])])
    path = save_model(tmp_path / "c.onnx", [
        helper.make_node("If", ["flag"], ["y"], then_branch=then_branch, else_branch=else_branch)
    ], [float_info("x", [2])], [float_info("y", [2])], [flag])
    model = load_and_compare(path, np.array([0.5, -1.0], np.float32))
    assert "cond" not in [n.op for n in model.graph.nodes]


def bool_info(name):
    return helper.make_tensor_value_info(name, TensorProto.BOOL, [])


def counting_loop(path, trip_input=False):
    """for i in range(M): acc = acc * 0.5 + x * i; ys[i] = acc (+ a scan
    output): M a constant, or the input `m`."""
    i_in = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    cond_in = helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "i_f"], ["xi"]),
         helper.make_node("Mul", ["acc", "half"], ["scaled"]),
         helper.make_node("Add", ["scaled", "xi"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["y"])],
        "body", [i_in, cond_in, float_info("acc", [3])],
        [bool_info("cond_out"), float_info("acc_out", [3]),
         float_info("y", [3])])
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.array(True), "true")]
    inputs = [float_info("x", [3]), float_info("acc0", [3])]
    if trip_input:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.array(5, np.int64), "m"))
    node = helper.make_node("Loop", ["m", "true", "acc0"], ["acc_final", "ys"], body=body)
    return save_model(path, [node], inputs,
                      [float_info("acc_final", [3]), float_info("ys", ["steps", 3])], inits)


def test_loop_with_a_trip_count_imports_as_a_scan(tmp_path):
    path = counting_loop(tmp_path / "loop.onnx")
    x = np.array([1.0, -2.0, 0.5], np.float32)
    model = load_and_compare(path, x, np.ones(3, np.float32))
    assert "scan" in [n.op for n in model.graph.nodes]


def test_loop_with_a_trip_count_from_a_shape_has_a_symbolic_length(tmp_path):
    """M = Shape(xs)[0]: the scan's length is the symbol `seq`."""
    i_in = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    cond_in = helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["acc", "i_f"], ["acc_out"]),
         helper.make_node("Mul", ["acc_out", "acc"], ["y"]),
         helper.make_node("Constant", [], ["cond_out"],
                          value=numpy_helper.from_array(np.array(True)))],
        "body", [i_in, cond_in, float_info("acc", [2])],
        [bool_info("cond_out"), float_info("acc_out", [2]),
         float_info("y", [2])])
    nodes = [helper.make_node("Shape", ["xs"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["m"], axis=0),
             helper.make_node("Loop", ["m", "", "acc0"], ["acc_final", "ys"], body=body)]
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    path = save_model(tmp_path / "sym.onnx", nodes,
                      [float_info("xs", ["seq", 2]), float_info("acc0", [2])],
                      [float_info("acc_final", [2]), float_info("ys", ["seq", 2])], [zero])
    model = kiln.onnx.load(path)
    for seq in (1, 3, 8):
        xs = np.random.randn(seq, 2).astype(np.float32)
        acc0 = np.random.randn(2).astype(np.float32)
        got = model(kiln.from_numpy(xs), kiln.from_numpy(acc0))
        assert_close(got, ort_run(path, xs, acc0))


def while_style_loop(path, size=2):
    """while sum(v) < limit and i < m: v = v * 2 (the condition computed in
    the body; m an input)."""
    i_in = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    cond_in = helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])
    body = helper.make_graph(
        [helper.make_node("Mul", ["v", "two"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["cond_out"])],
        "body", [i_in, cond_in, float_info("v", [size])],
        [bool_info("cond_out"),
         float_info("v_out", [size])])
    nodes = [helper.make_node("ReduceSum", ["v0"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "limit"], ["go"]),
             helper.make_node("Loop", ["m", "go", "v0"], ["v_final"], body=body)]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    inputs = [float_info("v0", [size]), float_info("limit", []),
              helper.make_tensor_value_info("m", TensorProto.INT64, [])]
    return save_model(path, nodes, inputs, [float_info("v_final", [size])], inits)


@pytest.mark.parametrize("size", [2, "n"], ids=["static", "symbolic"])
def test_loop_with_a_condition_imports_as_a_while_loop(tmp_path, size):
    path = while_style_loop(tmp_path / "while.onnx", size)
    model = None
    for v0, limit, m in [([1, 1], 100, 50), ([1, 1], 100, 3), ([60, 60], 100, 50), ([1, 2], 10, 0),
                         ([1, 2, 3], 40, 50)][:5 if size == "n" else 4]:
        args = (np.array(v0, np.float32), np.array(limit, np.float32), np.array(m, np.int64))
        model = load_and_compare(path, *args)
    assert "while_loop" in [n.op for n in model.graph.nodes]


def test_loop_with_a_trip_count_given_at_run_time(tmp_path):
    """M an input: with a scan output, the model specializes on M's value;
    without one, the loop is a while_loop bounded by M."""
    path = counting_loop(tmp_path / "m.onnx", trip_input=True)
    x, y = np.array([1.0, 2.0, 3.0], np.float32), np.ones(3, np.float32)
    for m in (0, 1, 7):
        load_and_compare(path, x, y, np.array(m, np.int64))
    model = onnx.load(str(path))  # drop the scan output
    model.graph.node[0].output.pop()
    model.graph.node[0].attribute[0].g.output.pop()
    model.graph.output.pop()
    onnx.save(model, str(path))
    for m in (0, 1, 7):
        load_and_compare(path, x, y, np.array(m, np.int64))


def scan_model(path, directions=(0, 0), output_direction=0, input_axes=(0, 1)):
    """Scan over xs [T, 3] and zs [3, T] (axis 1): s = s * 0.9 + x_t * z_t,
    y_t = s + x_t; w read from the outer graph."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "z_t"], ["xz"]),
         helper.make_node("Mul", ["s", "w"], ["sw"]),
         helper.make_node("Add", ["sw", "xz"], ["s_out"]),
         helper.make_node("Add", ["s_out", "x_t"], ["y_t"])],
        "body", [float_info("s", [3]), float_info("x_t", [3]), float_info("z_t", [3])],
        [float_info("s_out", [3]), float_info("y_t", [3])])
    node = helper.make_node("Scan", ["s0", "xs", "zs"], ["s_final", "ys"], body=body,
                            num_scan_inputs=2, scan_input_directions=list(directions),
                            scan_output_directions=[output_direction],
                            scan_input_axes=list(input_axes), scan_output_axes=[1])
    w = numpy_helper.from_array(np.full(3, 0.9, np.float32), "w")
    return save_model(path, [node],
                      [float_info("s0", [3]), float_info("xs", [5, 3]), float_info("zs", [3, 5])],
                      [float_info("s_final", [3]), float_info("ys", [3, 5])], [w])


@pytest.mark.parametrize("directions, output_direction", [((0, 0), 0), ((1, 1), 1), ((0, 1), 0),
                                                          ((1, 1), 0)],
                         ids=["forward", "reverse", "mixed_inputs", "reversed_inputs_only"])
def test_scan_imports_with_directions_and_axes(tmp_path, directions, output_direction):
    path = scan_model(tmp_path / "scan.onnx", directions, output_direction)
    rng = np.random.RandomState(0)
    model = load_and_compare(path, rng.randn(3).astype(np.float32),
                             rng.randn(5, 3).astype(np.float32), rng.randn(3, 5).astype(np.float32))
    assert "scan" in [n.op for n in model.graph.nodes]


class Loopy(torch.nn.Module):
    def forward(self, x):
        y = x
        for i in range(x.size(0)):
            y = y * 0.5 + x[i]
        n = 0
        while y.sum() < 100:
            y = y * 2 + 1
            n += 1
        if y.mean() > 150:
            y = y - 1
        return y, n


def export_loopy(path, dynamic):
    x = torch.rand(4, 3) + 0.5
    torch.onnx.export(torch.jit.script(Loopy()), (x,), str(path), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "n"}} if dynamic else None)
    assert op_types(onnx.load(str(path)).graph).count("Loop") == 2
    return x.numpy()


def test_a_torch_scripted_module_with_loops_and_a_branch_imports(tmp_path):
    """torch.onnx's for (a Loop over x.size(0) reading x[i]), while (a Loop
    with M = INT64_MAX and a condition) and if."""
    x = export_loopy(tmp_path / "loopy.onnx", dynamic=False)
    model = None
    for v in (x, x * 40, x * 0.01):
        model = load_and_compare(tmp_path / "loopy.onnx", v)
    assert [n.op for n in model.graph.nodes if n.op in ("scan", "while_loop", "cond")] == [
        "scan", "while_loop", "cond"]


def test_a_torch_scripted_module_with_a_symbolic_size_imports(tmp_path):
    x = export_loopy(tmp_path / "loopy.onnx", dynamic=True)
    for v in (x, np.concatenate([x, x * 2])):
        load_and_compare(tmp_path / "loopy.onnx", v)


def export_torch(module, x, path):
    torch.onnx.export(module, (x,), str(path), dynamo=False, input_names=["x"])


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN],
                         ids=["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
def test_torch_rnn_layers_import(tmp_path, cls, batch_first, bidirectional):
    torch.manual_seed(0)
    module = cls(3, 5, num_layers=2, batch_first=batch_first, bidirectional=bidirectional).eval()
    x = torch.randn(4, 6, 3)
    export_torch(module, x, tmp_path / "t.onnx")
    load_and_compare(tmp_path / "t.onnx", x.numpy())


def rnn_weights(rng, directions, gates, hidden, features):
    w = rng.randn(directions, gates * hidden, features).astype(np.float32) * 0.5
    r = rng.randn(directions, gates * hidden, hidden).astype(np.float32) * 0.5
    b = rng.randn(directions, 2 * gates * hidden).astype(np.float32) * 0.5
    return w, r, b


@pytest.mark.parametrize("op, extra", [
    ("LSTM", {}), ("GRU", {"linear_before_reset": 0}), ("GRU", {"linear_before_reset": 1}),
    ("RNN", {"activations": ["Relu", "Tanh"]})], ids=["LSTM", "GRU_lbr0", "GRU_lbr1", "RNN_relu"])
@pytest.mark.parametrize("layout", [0, 1])
def test_onnx_rnn_ops_with_states_layout_and_lengths(tmp_path, op, extra, layout):
    rng = np.random.RandomState(3)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    hidden, features, batch, steps = 4, 3, 2, 5
    w, r, b = rnn_weights(rng, 2, gates, hidden, features)
    inputs = ["x", "W", "R", "B", "lens", "h0"] + (["c0"] if op == "LSTM" else [])
    outputs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])

    def model(path, layout):
        state_shape = [2, batch, hidden] if layout == 0 else [batch, 2, hidden]
        x_shape = [steps, batch, features] if layout == 0 else [batch, steps, features]
        y_shape = [steps, 2, batch, hidden] if layout == 0 else [batch, steps, 2, hidden]
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
                 numpy_helper.from_array(b, "B"),
                 numpy_helper.from_array(np.full(batch, steps, np.int32), "lens")]
        node = helper.make_node(op, inputs, outputs, hidden_size=hidden,
                                direction="bidirectional", layout=layout, **extra)
        states_in = [float_info(n, state_shape) for n in inputs[5:]]
        states_out = [float_info(n, state_shape) for n in outputs[1:]]
        return save_model(path, [node], [float_info("x", x_shape)] + states_in,
                          [float_info("y", y_shape)] + states_out, inits)

    args = [rng.randn(steps, batch, features).astype(np.float32)]
    args += [rng.randn(2, batch, hidden).astype(np.float32) for _ in inputs[5:]]
    reference = model(tmp_path / "layout0.onnx", 0)
    if layout == 0:
        load_and_compare(reference, *args)
        return
    # ONNX Runtime refuses layout=1: the reference is the layout-0 model
    want = ort_run(reference, *args)
    want = [want[0].transpose(2, 0, 1, 3)] + [s.transpose(1, 0, 2) for s in want[1:]]
    batch_first = kiln.onnx.load(model(tmp_path / "layout1.onnx", 1))
    got = batch_first(kiln.from_numpy(args[0].transpose(1, 0, 2).copy()),
                      *[kiln.from_numpy(s.transpose(1, 0, 2).copy()) for s in args[1:]])
    assert_close(got, want)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_onnx_lstm_without_bias_or_states(tmp_path, direction):
    rng = np.random.RandomState(4)
    w, r, _ = rnn_weights(rng, 1, 4, 4, 3)
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y", "", "y_c"], hidden_size=4,
                            direction=direction)
    path = save_model(tmp_path / "l.onnx", [node], [float_info("x", ["seq", "batch", 3])],
                      [float_info("y", ["seq", 1, "batch", 4]), float_info("y_c", [1, "batch", 4])],
                      [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")])
    model = kiln.onnx.load(path)  # symbolic seq and batch
    for seq, batch in ((5, 2), (1, 3)):
        x = rng.randn(seq, batch, 3).astype(np.float32)
        assert_close(model(kiln.from_numpy(x)), ort_run(path, x))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_onnx_lstm_with_peepholes(tmp_path, direction):
    rng = np.random.RandomState(6)
    directions = 2 if direction == "bidirectional" else 1
    w, r, b = rnn_weights(rng, directions, 4, 4, 3)
    p = rng.randn(directions, 12).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "W"), (r, "R"), (b, "B"), (p, "P"))]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "", "", "P"], ["y", "y_h", "y_c"],
                            hidden_size=4, direction=direction)
    state = [directions, 2, 4]
    path = save_model(tmp_path / "p.onnx", [node], [float_info("x", [5, 2, 3])],
                      [float_info("y", [5, directions, 2, 4]), float_info("y_h", state),
                       float_info("y_c", state)], inits)
    load_and_compare(path, rng.randn(5, 2, 3).astype(np.float32))


# ---------------------------------------------------------------- refused


def test_importable_ops_lists_control_flow_and_rnn():
    ops = kiln.onnx.importable_ops()
    for name in ("If", "Loop", "Scan", "LSTM", "GRU", "RNN"):
        assert name in ops


def lstm_node_model(path, **changes):
    rng = np.random.RandomState(5)
    w, r, b = rnn_weights(rng, 1, 4, 2, 3)
    inputs = changes.pop("inputs", ["x", "W", "R", "B"])
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
             numpy_helper.from_array(b, "B")]
    node = helper.make_node("LSTM", inputs, ["y"], name="the_lstm", hidden_size=2, **changes)
    return save_model(path, [node], [float_info("x", [4, 2, 3])], [float_info("y", [4, 1, 2, 2])],
                      inits)


@pytest.mark.parametrize("changes, message", [
    ({"activations": ["Sigmoid", "Relu", "Tanh"]}, "attribute 'activations'"),
    ({"clip": 3.0}, "attribute 'clip'"),
    ({"input_forget": 1}, "attribute 'input_forget'"),
], ids=["activations", "clip", "input_forget"])
def test_unsupported_rnn_forms_name_the_node_and_attribute(tmp_path, changes, message):
    path = lstm_node_model(tmp_path / "bad.onnx", **changes)
    with pytest.raises(RuntimeError, match=f"node 'the_lstm' \\(LSTM\\).*{message}"):
        kiln.onnx.load(path)


def test_branches_of_different_shapes_are_refused(tmp_path):
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                    [float_info("t", [2])])
    else_branch = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else",
                                    [], [float_info("e", [4])])
    path = save_model(tmp_path / "if.onnx", [
        helper.make_node("If", ["flag"], ["y"], name="pick", then_branch=then_branch,
                         else_branch=else_branch)
    ], [float_info("x", [2]), helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [float_info("y", ["n"])], check=False)
    with pytest.raises(RuntimeError, match=r"node 'pick' \(If\).*f32\[2\] in then_branch and "
                                           r"f32\[4\] in else_branch"):
        kiln.onnx.load(path)


def test_a_loop_changing_a_carried_shape_is_refused(tmp_path):
    i_in = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    cond_in = helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])
    body = helper.make_graph(
        [helper.make_node("Concat", ["v", "v"], ["v_out"], axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [i_in, cond_in, float_info("v", ["n"])],
        [bool_info("cond_out"),
         float_info("v_out", ["n"])])
    m = numpy_helper.from_array(np.array(3, np.int64), "m")
    path = save_model(tmp_path / "grow.onnx", [
        helper.make_node("Loop", ["m", "", "v0"], ["v_final"], name="grow", body=body)
    ], [float_info("v0", [2])], [float_info("v_final", ["n"])], [m], check=False)
    with pytest.raises(RuntimeError, match=r"node 'grow' \(Loop\).*changes the loop-carried value "
                                           r"'v0' from f32\[2\] to f32\[4\]"):
        kiln.onnx.load(path)


# ---------------------------------------------------------------- pass-through carried values


def test_loop_carrying_weights_it_returns_unchanged(tmp_path):
    """A Loop that carries its weights as loop-carried values and returns them
    unchanged, as Paddle's exports do (SLANet's decoder): the while_loop keeps
    one buffer for such a value instead of copying it every iteration. The
    state, the weights after the loop (also after no iteration at all) and a
    carried value that swaps places with another must all be what ONNX
    Runtime gives."""
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((6, 6)) * 0.4).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w_in"], ["hw"]),
         helper.make_node("Tanh", ["hw"], ["h_out"]),
         helper.make_node("Identity", ["w_in"], ["w_same"]),
         helper.make_node("Identity", ["c_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         float_info("h_in", [2, 6]), float_info("w_in", [6, 6]),
         float_info("a_in", [2, 6]), float_info("b_in", [2, 6])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         float_info("h_out", [2, 6]), float_info("w_in", [6, 6]),
         float_info("b_in", [2, 6]), float_info("a_in", [2, 6])])
    loop = helper.make_node("Loop", ["trips", "", "h0", "w", "a0", "b0"],
                            ["h", "w_after", "a", "b"], body=body)
    path = save_model(tmp_path / "loop.onnx", [loop],
                      [helper.make_tensor_value_info("trips", TensorProto.INT64, []),
                       float_info("h0", [2, 6]), float_info("a0", [2, 6]),
                       float_info("b0", [2, 6])],
                      [float_info("h", [2, 6]), float_info("w_after", [6, 6]),
                       float_info("a", [2, 6]), float_info("b", [2, 6])],
                      [numpy_helper.from_array(w, "w")], check=False)
    for trips in (0, 1, 5, 6):
        h0, a0, b0 = (rng.standard_normal((2, 6)).astype(np.float32) for _ in range(3))
        load_and_compare(path, np.array(trips, np.int64), h0, a0, b0)
