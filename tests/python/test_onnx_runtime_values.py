"""ONNX models whose shapes, axes, k, pads, repeats or trip counts come from
graph inputs, called as ONNX Runtime calls them: every input given at call
time (onnx::Model, kiln.onnx.SpecializedModel). Each model runs on several
values of those inputs and is compared with ONNX Runtime; the cache of
specialized graphs stays bounded, and what cannot be saved as one graph says
so."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from onnx_test_models import matches_onnx_runtime

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(24)


def model_file(tmp_path, nodes, inputs, outputs, opset=17, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def vec(*values):
    return np.array(values, dtype=np.int64)


def x_input(shape, name="x", dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def int_input(name, shape):
    return helper.make_tensor_value_info(name, I64, shape)


def out(name="y", dtype=F):
    return helper.make_tensor_value_info(name, dtype, None)


def floats(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_reshape_shape_from_an_input(tmp_path):
    path = model_file(tmp_path, [helper.make_node("Reshape", ["x", "shape"], ["y"])],
                      [x_input([2, 3, 4]), int_input("shape", [None])], [out()])
    x = floats(2, 3, 4)
    model = matches_onnx_runtime(path, [(x, vec(6, 4)), (x, vec(4, -1)), (x, vec(2, 0, 4)),
                                     (x, vec(24)), (x, vec(6, 4))], rtol=1e-5)
    assert isinstance(model, kiln.onnx.SpecializedModel)
    assert model.value_inputs == ["shape"]
    assert model.num_specializations == 4  # the repeated shape hit the cache


def test_shape_ops_from_inputs(tmp_path):
    """Expand's shape, Tile's repeats, Unsqueeze's and Squeeze's axes,
    ConstantOfShape's shape."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),
             helper.make_node("Tile", ["e", "repeats"], ["t"]),
             helper.make_node("Unsqueeze", ["t", "axes"], ["u"]),
             helper.make_node("Squeeze", ["u", "axes"], ["y"]),
             helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=helper.make_tensor("v", F, [1], [2.5]))]
    path = model_file(tmp_path, nodes,
                      [x_input([3, 1]), int_input("shape", [2]), int_input("repeats", [2]),
                       int_input("axes", [1])], [out(), out("c")])
    x = floats(3, 1)
    matches_onnx_runtime(path, [(x, vec(3, 4), vec(1, 2), vec(0)),
                             (x, vec(1, 5), vec(2, 1), vec(-1)),
                             (x, vec(3, 1), vec(3, 3), vec(1))], rtol=1e-5)


def test_slice_split_and_pad_from_inputs(tmp_path):
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Pad", ["s", "pads", "fill"], ["y"]),
             helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)]
    path = model_file(tmp_path, nodes,
                      [x_input([4, 6]), int_input("starts", [1]), int_input("ends", [1]),
                       int_input("axes", [1]), int_input("steps", [1]), int_input("pads", [4]),
                       x_input([], "fill"), int_input("sizes", [2])], [out(), out("a"), out("b")])
    x = floats(4, 6)
    fill, other_fill = np.array(1.5, dtype=np.float32), np.array(-2.0, dtype=np.float32)
    model = matches_onnx_runtime(path, [
        (x, vec(1), vec(5), vec(1), vec(1), vec(0, 1, 0, 1), fill, vec(2, 4)),
        (x, vec(-1), vec(-7), vec(0), vec(-1), vec(1, 1, 1, 1), other_fill, vec(5, 1)),
        (x, vec(0), vec(6), vec(-1), vec(2), vec(2, 0, 0, 2), fill, vec(3, 3))], rtol=1e-5)
    assert model.value_inputs == ["starts", "ends", "axes", "steps", "pads", "fill", "sizes"]


def test_reductions_and_selections_from_inputs(tmp_path):
    """ReduceSum's axes, CumSum's axis, TopK's k, Trilu's k."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["r"], keepdims=0),
             helper.make_node("CumSum", ["x", "axis"], ["c"]),
             helper.make_node("TopK", ["x", "k"], ["v", "i"]),
             helper.make_node("Trilu", ["x", "diagonal"], ["t"], upper=0)]
    path = model_file(tmp_path, nodes,
                      [x_input([3, 5]), int_input("axes", [None]), int_input("axis", []),
                       int_input("k", [1]), int_input("diagonal", [])],
                      [out("r"), out("c"), out("v"), out("i", I64), out("t")])
    x = floats(3, 5)
    matches_onnx_runtime(path, [(x, vec(1), np.array(0), vec(2), np.array(0)),
                             (x, vec(0, 1), np.array(1), vec(5), np.array(-1)),
                             (x, vec(-2), np.array(-1), vec(1), np.array(2))], rtol=1e-5)


def test_sizes_combined_with_an_input(tmp_path):
    """A shape built from a symbolic size (Shape(x)[0]) and an input's values."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["batch"]),
             helper.make_node("Concat", ["batch", "rest"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [helper.make_tensor("zero", I64, [1], [0]), helper.make_tensor("one", I64, [1], [1])]
    graph = helper.make_graph(nodes, "g", [x_input(["n", 12]), int_input("rest", [2])], [out()],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "sizes.onnx"
    onnx.save(model, str(path))
    matches_onnx_runtime(path, [(floats(2, 12), vec(3, 4)), (floats(5, 12), vec(3, 4)),
                             (floats(5, 12), vec(6, -1))], rtol=1e-5)


def test_loop_trip_count_from_inputs_stacks_scan_outputs(tmp_path):
    """A Loop with a scan output whose trip count and first condition are
    graph inputs (Range's expansion does this)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc", "step"], ["acc_out"]),
         helper.make_node("Identity", ["acc"], ["seen"])],
        "body", [int_input("i", []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 x_input([2], "acc")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), x_input([2], "acc_out"),
         x_input([2], "seen")])
    loop = helper.make_node("Loop", ["trip", "cond", "start"], ["last", "ys"], body=body)
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    path = model_file(tmp_path, [loop],
                      [int_input("trip", []), cond, x_input([2], "start"), x_input([2], "step")],
                      [out("last"), out("ys")])
    start, step = floats(2), floats(2)
    model = matches_onnx_runtime(path, [(np.array(3), np.array(True), start, step),
                                     (np.array(5), np.array(True), start, step),
                                     (np.array(3), np.array(True), step, start)], rtol=1e-5)
    assert model.value_inputs == ["trip", "cond"]


def test_loop_slicing_at_its_iteration_number(tmp_path):
    """A Loop body that slices a tensor at its iteration number (starts =
    i, ends = i + 2): the slice reads its rows at run time (its length, 2,
    is known), and the trip count, an input, is specialized on."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start"]),
         helper.make_node("Add", ["start", "two"], ["end"]),
         helper.make_node("Slice", ["table", "start", "end", "zero"], ["rows"]),
         helper.make_node("ReduceSum", ["rows", "zero"], ["row_sum"], keepdims=0),
         helper.make_node("Add", ["acc", "row_sum"], ["acc_out"])],
        "body", [int_input("i", []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 x_input([3], "acc")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), x_input([3], "acc_out"),
         x_input([3], "row_sum")],
        initializer=[helper.make_tensor("zero", I64, [1], [0]),
                     helper.make_tensor("two", I64, [1], [2])])
    loop = helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "sums"], body=body)
    path = model_file(tmp_path, [loop],
                      [int_input("trip", []), x_input([3], "acc0"), x_input([8, 3], "table")],
                      [out("acc"), out("sums")])
    acc0, table = floats(3), floats(8, 3)
    feeds = [(np.array(n), acc0, table) for n in (1, 4, 7, 4, 0)]
    model = matches_onnx_runtime(path, feeds, rtol=1e-5)
    assert model.value_inputs == ["trip"] and model.num_specializations == 4


@pytest.mark.parametrize("directions", [[0], [1]], ids=["forward", "reverse"])
def test_scan_of_opset_8_with_sequence_lens_from_an_input(tmp_path, directions):
    """Scan-8: a batch axis first, per-element lengths (an input, so
    specialized on); outputs past a length are zeros, as ONNX Runtime's."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x"], ["y"])], "body",
        [x_input([2], "s"), x_input([2], "x")], [x_input([2], "s_out"), x_input([2], "y")])
    scan = helper.make_node("Scan", ["lens", "init", "xs"], ["final", "ys"], body=body,
                            num_scan_inputs=1, directions=directions)
    graph = helper.make_graph([scan], "g", [int_input("lens", [3]), x_input([3, 2], "init"),
                                            x_input([3, 4, 2], "xs")], [out("final"), out("ys")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    path = tmp_path / "scan8.onnx"
    onnx.save(model, str(path))
    init, xs = floats(3, 2), floats(3, 4, 2)
    matches_onnx_runtime(path, [(vec(4, 2, 1), init, xs), (vec(4, 4, 4), init, xs),
                             (vec(1, 3, 4), init, xs)], rtol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_recurrent_sequence_lens_from_an_input(tmp_path, op):
    """sequence_lens shorter than the sequence, given at call time: each
    sequence stops at its length in both directions, Y zeros past it."""
    steps, batch, size, hidden = 4, 3, 2, 3
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    weights = [helper.make_tensor(name, F, shape, floats(*shape).ravel() * 0.5)
               for name, shape in [("w", [2, gates * hidden, size]),
                                   ("r", [2, gates * hidden, hidden]),
                                   ("b", [2, 2 * gates * hidden])]]
    outputs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ["x", "w", "r", "b", "lens"], outputs, hidden_size=hidden,
                            direction="bidirectional")
    graph = helper.make_graph([node], "g", [x_input([steps, batch, size]),
                                            helper.make_tensor_value_info("lens", TensorProto.INT32,
                                                                          [batch])],
                              [out(name) for name in outputs], initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    path = tmp_path / "rnn.onnx"
    onnx.save(model, str(path))
    x = floats(steps, batch, size)
    lens = [np.array(v, dtype=np.int32) for v in ([4, 2, 1], [4, 4, 4], [1, 3, 4])]
    model = matches_onnx_runtime(path, [(x, v) for v in lens], rtol=1e-4, atol=1e-5)
    assert model.value_inputs == ["lens"]


def test_cache_is_bounded(tmp_path):
    path = model_file(tmp_path, [helper.make_node("Reshape", ["x", "shape"], ["y"])],
                      [x_input([4, 6]), int_input("shape", [2])], [out()])
    model = kiln.onnx.load(path, max_specializations=2)
    x = floats(4, 6)
    shapes = [vec(2, 12), vec(3, 8), vec(6, 4), vec(2, 12)]
    for shape in shapes:
        got = model(kiln.from_numpy(x), kiln.from_numpy(shape)).numpy()
        np.testing.assert_array_equal(got, x.reshape(shape))
        assert model.num_specializations <= 2
    assert model.num_specializations == 2 and model.max_specializations == 2
    with pytest.raises(ValueError, match="at least 1"):
        kiln.onnx.load(path, max_specializations=0)


def test_value_inputs_have_a_size_limit(tmp_path):
    path = model_file(tmp_path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
                      [x_input([4]), int_input("axes", [None])], [out()])
    model = kiln.onnx.load(path)
    with pytest.raises(ValueError, match="input 'axes' decides the graph.*at most 256"):
        model(kiln.from_numpy(floats(4)), kiln.from_numpy(np.zeros(300, dtype=np.int64)))


def test_a_specialized_model_saves_one_specialization(tmp_path):
    path = model_file(tmp_path, [helper.make_node("Reshape", ["x", "shape"], ["y"])],
                      [x_input([4, 6]), int_input("shape", [2])], [out()])
    model = kiln.onnx.load(path)
    x, shape = kiln.from_numpy(floats(4, 6)), kiln.from_numpy(vec(3, 8))
    with pytest.raises(RuntimeError, match=r"save refused.*shape.*specialize\(\*inputs\)"):
        model.save(tmp_path / "m.kiln")
    with pytest.raises(TypeError, match="no one graph holds it"):
        kiln.onnx.export(model, (x, shape), tmp_path / "again.onnx")
    single = model.specialize(x, shape)
    single.save(tmp_path / "m.kiln", (x,))
    loaded = kiln.jit.load(tmp_path / "m.kiln")
    np.testing.assert_array_equal(loaded(x).numpy(), model(x, shape).numpy())
    assert list(loaded(x).shape) == [3, 8]


def test_a_model_without_value_inputs_is_one_traced_module(tmp_path):
    path = model_file(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [x_input([2, 3])],
                      [out()])
    model = kiln.onnx.load(path)
    assert isinstance(model, kiln.jit.TracedModule)


def test_a_value_computed_at_run_time_is_still_refused(tmp_path):
    """A shape computed from a float tensor's data is no input's value."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("Cast", ["m"], ["n"], to=I64),
             helper.make_node("Reshape", ["n", "one"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x_input([2, 3])], [out()],
                              initializer=[helper.make_tensor("one", I64, [1], [1])])
    path = tmp_path / "data.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(RuntimeError, match="must be known when the model is imported"):
        kiln.onnx.load(path)
