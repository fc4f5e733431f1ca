"""ONNX import of the ops added for issue 23 (ConvTranspose, Resize, Pad,
Trilu, CumSum, TopK, Tile, Mod, the float tests and roundings, the bitwise
ops, libm's functions, Slice with negative steps, integer Div): ONNX's own
backend cases for them, and hand-written models whose modes those cases
leave out, each run in kiln and in ONNX Runtime."""
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from onnx_test_models import const, info, model_with

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402

# ONNX's backend cases the new translations pass (tests/onnx/conformance.py).
BACKEND_CASES = [
    "node/test_acos", "node/test_acosh", "node/test_asin", "node/test_asinh", "node/test_atan",
    "node/test_atanh", "node/test_ceil", "node/test_convtranspose",
    "node/test_convtranspose_dilations", "node/test_convtranspose_kernel_shape",
    "node/test_convtranspose_pad", "node/test_convtranspose_pads",
    "node/test_convtranspose_with_kernel", "node/test_cosh", "node/test_cumsum_1d_exclusive",
    "node/test_cumsum_1d_reverse_exclusive", "node/test_cumsum_2d_negative_axis",
    "node/test_edge_pad", "node/test_erf", "node/test_floor", "node/test_isinf_negative",
    "node/test_isinf_positive", "node/test_isnan", "node/test_mod_mixed_sign_float64",
    "node/test_mod_mixed_sign_int32", "node/test_mod_int64_fmod", "node/test_reflect_pad",
    "node/test_round", "node/test_sign", "node/test_sinh", "node/test_slice_neg_steps",
    "node/test_tan", "node/test_tile", "node/test_top_k_smallest", "node/test_tril_neg",
    "node/test_triu_one_row", "pytorch-converted/test_ConvTranspose2d",
    "pytorch-converted/test_ReplicationPad2d", "pytorch-operator/test_operator_repeat"]


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_onnx_backend_case_passes(name):
    status, detail = conformance.run_case(conformance.DATA / name)
    assert status == "pass", detail


def check_against_onnx_runtime(tmp_path, model, feeds, exact=False):
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        if exact or w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def image(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# (coordinate_transformation_mode, mode, nearest_mode, scales or sizes)
RESIZES = [
    ("asymmetric", "nearest", "floor", "scales", [1, 1, 2.5, 1.5]),
    ("asymmetric", "nearest", "floor", "sizes", [2, 3, 7, 3]),
    ("half_pixel", "nearest", "round_prefer_ceil", "sizes", [2, 3, 9, 8]),
    ("half_pixel", "nearest", "round_prefer_ceil", "scales", [1, 1, 0.6, 1.7]),
    ("half_pixel", "linear", "", "sizes", [2, 3, 3, 11]),
    ("pytorch_half_pixel", "linear", "", "scales", [1, 1, 2.0, 0.5]),
    ("align_corners", "linear", "", "sizes", [2, 3, 8, 2]),
]


@pytest.mark.parametrize("transform, mode, nearest, given, values", RESIZES)
def test_resize_modes_match_onnx_runtime(tmp_path, transform, mode, nearest, given, values):
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    if nearest:
        attrs["nearest_mode"] = nearest
    dtype = np.float32 if given == "scales" else np.int64
    inputs = ["x", "", "s"] if given == "scales" else ["x", "", "", "s"]
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    model = model_with([node], [info("x", [2, 3, 5, 4])], [info("y", None)],
                       [const("s", values, dtype)])
    check_against_onnx_runtime(tmp_path, model, {"x": image(2, 3, 5, 4)})


def test_resize_modes_kiln_has_no_form_for_are_named(tmp_path):
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="area")
    model = model_with([node], [info("x", [1, 1, 4, 4])], [info("y", None)],
                       [const("s", [1, 1, 2, 2], np.float32)])
    onnx.save(model, tmp_path / "area.onnx")
    with pytest.raises(RuntimeError, match="Resize with mode area"):
        kiln.onnx.load(tmp_path / "area.onnx")


# ONNX pads every dim; kiln's border modes pad the last 1 to 3 of a 1 or 2
# dims bigger input, so pads of one dim of a 4-D input are widened to two.
@pytest.mark.parametrize("mode, pads", [
    ("edge", [0, 0, 0, 2, 0, 0, 0, 1]),
    ("reflect", [0, 0, 1, 2, 0, 0, 2, 1]),
    ("constant", [0, 1, -1, 0, 0, 0, 2, -2]),
])
def test_pad_modes_match_onnx_runtime(tmp_path, mode, pads):
    constant = mode == "constant"
    node = helper.make_node("Pad", ["x", "p", "v"] if constant else ["x", "p"], ["y"], mode=mode)
    inits = [const("p", pads)] + ([const("v", 0.25, np.float32)] if constant else [])
    model = model_with([node], [info("x", [2, 3, 4, 5])], [info("y", None)], inits)
    check_against_onnx_runtime(tmp_path, model, {"x": image(2, 3, 4, 5)}, exact=True)


def test_wrap_pad_of_opset_19_is_circular(tmp_path):
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")
    model = model_with([node], [info("x", [1, 2, 3, 4])], [info("y", None)],
                       [const("p", [0, 0, 2, 1, 0, 0, 1, 3])], opset=19)
    model.ir_version = 9
    check_against_onnx_runtime(tmp_path, model, {"x": image(1, 2, 3, 4)}, exact=True)


def test_cumsum_topk_slice_tile_and_division_of_integers(tmp_path):
    ints = info("i", [3, 5], TensorProto.INT64)
    nodes = [
        helper.make_node("CumSum", ["i", "axis"], ["cumsum"], exclusive=1, reverse=1),
        helper.make_node("TopK", ["i", "k"], ["values", "indices"], axis=0, largest=0),
        helper.make_node("Slice", ["i", "starts", "ends", "axes", "steps"], ["sliced"]),
        helper.make_node("Tile", ["i", "repeats"], ["tiled"]),
        helper.make_node("Div", ["i", "d"], ["quotient"]),
        helper.make_node("Mod", ["i", "d"], ["rest"]),
        helper.make_node("Trilu", ["i", "k"], ["lower"], upper=0),
    ]
    outputs = [info(n, None, TensorProto.INT64)
               for n in ("cumsum", "values", "indices", "sliced", "tiled", "quotient", "rest",
                         "lower")]
    inits = [const("axis", 1), const("k", [2]), const("starts", [-1, 4]), const("ends", [-10, 0]),
             const("axes", [0, 1]), const("steps", [-2, -3]), const("repeats", [2, 1]),
             const("d", [[3, -2, 5, -4, 7]])]
    model = model_with(nodes, [ints], outputs, inits)
    values = np.array([[7, -7, 3, -9, 0], [5, 0, -4, 8, 11], [-13, 2, 6, -1, 4]], np.int64)
    check_against_onnx_runtime(tmp_path, model, {"i": values})


def test_float_tests_roundings_and_bitwise_ops(tmp_path):
    special = np.array([[1.5, -2.5, np.nan, np.inf], [-np.inf, 0.5, -0.0, 2.5]], np.float32)
    nodes = [helper.make_node("IsNaN", ["x"], ["nan"]),
             helper.make_node("IsInf", ["x"], ["pos"], detect_negative=0),
             helper.make_node("Round", ["x"], ["round"]),
             helper.make_node("Sign", ["x"], ["sign"]),
             helper.make_node("Ceil", ["x"], ["ceil"]),
             helper.make_node("BitwiseXor", ["a", "b"], ["xor"]),
             helper.make_node("BitwiseNot", ["a"], ["not"])]
    outputs = [info("nan", None, TensorProto.BOOL), info("pos", None, TensorProto.BOOL),
               info("round", None), info("sign", None), info("ceil", None),
               info("xor", None, TensorProto.INT32), info("not", None, TensorProto.INT32)]
    model = model_with(nodes, [info("x", [2, 4]), info("a", [3], TensorProto.INT32),
                               info("b", [3], TensorProto.INT32)], outputs, opset=18)
    model.ir_version = 8
    feeds = {"x": special, "a": np.array([5, -3, 12], np.int32),
             "b": np.array([3, 6, -1], np.int32)}
    check_against_onnx_runtime(tmp_path, model, feeds)
