"""ONNX import of the quantization ops (QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
QLinearConv) and of BitShift: ONNX's backend cases, then hand-written
models run in kiln and in ONNX Runtime (the oracle) on random data with
values that round half way, saturate, and use per-axis parameters."""
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from onnx_test_models import info, model_with

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402

BACKEND_CASES = [
    "test_quantizelinear", "test_quantizelinear_axis", "test_dequantizelinear",
    "test_dequantizelinear_axis", "test_dynamicquantizelinear",
    "test_dynamicquantizelinear_max_adjusted", "test_dynamicquantizelinear_min_adjusted",
    "test_matmulinteger", "test_qlinearmatmul_2D", "test_qlinearmatmul_3D",
    "test_basic_convinteger", "test_convinteger_with_padding",
    "test_convinteger_without_padding", "test_qlinearconv", "test_bitshift_left_uint8",
    "test_bitshift_right_uint8", "test_maxpool_2d_uint8", "test_mod_mixed_sign_int8",
    "test_clip_default_int8_min"]

ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8,
             np.int32: TensorProto.INT32, np.float32: TensorProto.FLOAT}


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_onnx_backend_case_passes(name):
    status, detail = conformance.run_case(conformance.DATA / "node" / name)
    assert status == "pass", detail


def run(tmp_path, op, inputs, constants, out_types, **attrs):
    """`op` over graph inputs `inputs` and initializers `constants` (dicts
    of name -> array, in the node's input order by `order`), in kiln and in
    ONNX Runtime; returns both outputs."""
    names = list(inputs) + list(constants)
    order = attrs.pop("order", names)
    node = helper.make_node(op, order, [f"y{i}" for i in range(len(out_types))], **attrs)
    model = model_with(
        [node], [info(n, list(v.shape), ONNX_TYPE[v.dtype.type]) for n, v in inputs.items()],
        [info(f"y{i}", None, ONNX_TYPE[t]) for i, t in enumerate(out_types)],
        [numpy_helper.from_array(v, n) for n, v in constants.items()])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in inputs.values()])
    got = [g.numpy() for g in (got if isinstance(got, tuple) else [got])]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def rng(seed):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_linear(tmp_path, dtype, per_axis):
    x = rng(0).uniform(-300, 300, (2, 3, 5)).astype(np.float32)
    x[0, 0, :4] = [0.5, 1.5, -2.5, 2.5]  # ties round to even
    scale = np.array([0.5, 2.0, 1.0], np.float32) if per_axis else np.float32(1.0)
    zero = np.array([3, -1 if dtype == np.int8 else 9, 0], dtype) if per_axis else dtype(7)
    run(tmp_path, "QuantizeLinear", {"x": x}, {"s": np.asarray(scale), "z": np.asarray(zero)},
        [dtype], axis=1)


def test_quantize_linear_of_opset_21_without_a_zero_point_takes_output_dtype(tmp_path):
    # Regression: the type fell back to uint8 when no zero point said it.
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.INT8)
    model = model_with([node], [info("x", [4]), info("s", [])],
                       [info("y", None, TensorProto.INT8)], opset=21)
    model.ir_version = 9  # opset 21 wants a newer IR than onnx_test_models' default
    path = tmp_path / "q21.onnx"
    onnx.save(model, path)
    feeds = {"x": np.array([-126.5, 0.0, 128.5, 3.0], np.float32), "s": np.array(2.0, np.float32)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = kiln.onnx.load(path)(*[kiln.from_numpy(np.asarray(v)) for v in feeds.values()]).numpy()
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_blocked_quantization_is_refused_by_name(tmp_path):
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=0, block_size=2,
                            name="blocks")
    model = model_with([node], [info("x", [4], TensorProto.INT8), info("s", [2])],
                       [info("y", None)], opset=21)
    model.ir_version = 9
    onnx.save(model, tmp_path / "b.onnx")
    with pytest.raises(RuntimeError, match=r"'blocks' quantizes in blocks \(block_size 2\)"):
        kiln.onnx.load(tmp_path / "b.onnx")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_dequantize_linear(tmp_path, dtype):
    info_ = np.iinfo(dtype)
    x = rng(1).integers(max(info_.min, -1000), min(info_.max, 1000), (4, 3)).astype(dtype)
    scale = np.array([0.25, 3.0, 0.1], np.float32)
    zero = np.array([1, 0, 2], dtype)
    run(tmp_path, "DequantizeLinear", {"x": x}, {"s": scale, "z": zero}, [np.float32], axis=-1)


@pytest.mark.parametrize("low,high", [(-3.0, 5.0), (0.5, 4.0), (-6.0, -1.0), (0.0, 0.0)])
def test_dynamic_quantize_linear(tmp_path, low, high):
    x = rng(2).uniform(low, high, (3, 7)).astype(np.float32)
    run(tmp_path, "DynamicQuantizeLinear", {"x": x}, {}, [np.uint8, np.float32, np.uint8])


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.uint8, np.int8)])
def test_matmul_integer(tmp_path, a_type, b_type):
    a = rng(3).integers(0, 256, (2, 4, 5)).astype(a_type)
    b = rng(4).integers(-128 if b_type == np.int8 else 0, 128, (5, 3)).astype(b_type)
    run(tmp_path, "MatMulInteger", {"a": a, "b": b},
        {"az": np.array(200, a_type), "bz": np.array([2, 0, 7], b_type)}, [np.int32],
        order=["a", "b", "az", "bz"])


def test_qlinear_matmul(tmp_path):
    a = rng(5).integers(0, 256, (3, 6)).astype(np.uint8)
    b = rng(6).integers(0, 256, (6, 4)).astype(np.uint8)
    constants = {"as": np.array(0.02, np.float32), "az": np.array(120, np.uint8),
                 "bs": np.array(0.03, np.float32), "bz": np.array(130, np.uint8),
                 "ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8)}
    run(tmp_path, "QLinearMatMul", {"a": a, "b": b}, constants, [np.uint8],
        order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 0, 2, 1], "strides": [2, 1]},
                                   {"group": 2, "dilations": [2, 1]}])
def test_conv_integer(tmp_path, attrs):
    x = rng(7).integers(0, 256, (1, 4, 7, 6)).astype(np.uint8)
    w = rng(8).integers(0, 256, (2, 4 // attrs.get("group", 1), 3, 2)).astype(np.uint8)
    run(tmp_path, "ConvInteger", {"x": x, "w": w},
        {"xz": np.array(5, np.uint8), "wz": np.array(128, np.uint8)}, [np.int32],
        order=["x", "w", "xz", "wz"], **attrs)


def test_qlinear_conv_per_channel_with_bias(tmp_path):
    x = rng(9).integers(0, 256, (1, 3, 6, 6)).astype(np.uint8)
    w = rng(10).integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    constants = {"xs": np.array(0.01, np.float32), "xz": np.array(100, np.uint8),
                 "ws": np.array([0.02, 0.005, 0.01, 0.03], np.float32),
                 "wz": np.zeros(4, np.int8), "ys": np.array(0.1, np.float32),
                 "yz": np.array(90, np.uint8), "b": np.array([5, -300, 0, 1000], np.int32)}
    run(tmp_path, "QLinearConv", {"x": x, "w": w}, constants, [np.uint8],
        order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(tmp_path, direction):
    x = rng(11).integers(0, 256, (3, 8)).astype(np.uint8)
    y = rng(12).integers(0, 8, (8,)).astype(np.uint8)
    run(tmp_path, "BitShift", {"x": x, "y": y}, {}, [np.uint8], direction=direction)
