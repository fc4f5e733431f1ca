"""Sizes an ONNX model needs equal that kiln cannot prove equal for every
value of the symbols are assumed at import, as guards every call checks
(issue 24): ONNX Runtime checks such sizes when it runs, and so does kiln.
ONNX Runtime is the oracle; the models are built here with onnx.helper."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln


def pyramid_model():
    """x [N, 1, H, W]: a stride-2 path and a stride-4 path resized by 2,
    added as a feature pyramid does: (H - 1) // 2 + 1 against
    2*((H - 1) // 4) + 2, equal when H is a multiple of 4."""
    nodes = [
        helper.make_node("MaxPool", ["x"], ["by2"], kernel_shape=[1, 1], strides=[2, 2]),
        helper.make_node("MaxPool", ["x"], ["by4"], kernel_shape=[1, 1], strides=[4, 4]),
        helper.make_node("Resize", ["by4", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Add", ["by2", "up"], ["y"]),
    ]
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    graph = helper.make_graph(
        nodes, "pyramid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, "H2", "W2"])], [scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def different_symbols_model():
    """a [A, 3] + b [B, 3]: valid when A == B (or one of them is 1)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "sum",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["A", 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["B", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["A", 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def saved(model, tmp_path, name):
    model.ir_version = 8  # what the ONNX Runtime installed reads
    onnx.checker.check_model(model)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def run_both(path, feeds):
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    return got, want[0]


def test_sizes_equal_for_the_inputs_a_model_takes_are_assumed(tmp_path):
    path = saved(pyramid_model(), tmp_path, "pyramid.onnx")
    rng = np.random.RandomState(0)
    for shape in [(1, 1, 8, 12), (2, 1, 16, 4), (1, 1, 32, 32)]:
        x = rng.randn(*shape).astype(np.float32)
        got, want = run_both(path, {"x": x})
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_a_call_that_breaks_the_assumption_names_sizes_values_and_node(tmp_path):
    path = saved(pyramid_model(), tmp_path, "pyramid.onnx")
    x = np.zeros((1, 1, 6, 8), np.float32)  # H = 6: 3 rows against 4
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="3 by 4"):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    model = kiln.onnx.load(path)
    with pytest.raises(ValueError) as error:
        model(kiln.from_numpy(x))
    message = str(error.value)
    for part in ["(H - 1) // 2 + 1 == 2*((H - 1) // 4) + 2", "with H = 6",
                 "(H - 1) // 2 + 1 = 3", "2*((H - 1) // 4) + 2 = 4", "(Add)"]:
        assert part in message, message


def test_two_batch_symbols_are_assumed_equal(tmp_path):
    path = saved(different_symbols_model(), tmp_path, "sum.onnx")
    rng = np.random.RandomState(1)
    a, b = rng.randn(4, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    got, want = run_both(path, {"a": a, "b": b})
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    with pytest.raises(ValueError, match="A == B"):
        kiln.onnx.load(path)(kiln.from_numpy(a), kiln.from_numpy(b[:3]))


def test_provably_different_sizes_stay_an_import_error(tmp_path):
    # [N + 1, 3] (x and one more row) + [N, 3]: no N makes them equal
    row = helper.make_tensor("row", TensorProto.FLOAT, [1, 3], [0, 0, 0])
    graph = helper.make_graph(
        [helper.make_node("Concat", ["x", "row"], ["more"], axis=0),
         helper.make_node("Add", ["more", "x"], ["y"])], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 3])], [row])
    path = saved(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                 tmp_path, "bad.onnx")
    with pytest.raises(RuntimeError, match="cannot be broadcast: size N \\+ 1 vs N"):
        kiln.onnx.load(path)
