"""ONNX's MaxRoiPool (opset 1) and DeformConv (opset 19) imported into kiln
and run against ONNX Runtime, MaxRoiPool exported back, and the Python forms
kiln.vision.ops.roi_pool and deform_conv2d against the plain-torch
references of tests/oracle/cases_vision.py (values and gradients)."""
import io
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import kiln
from kiln.vision import ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle"))
import cases_vision as ref  # noqa: E402

RNG = np.random.default_rng(24)


def make_model(node, inputs, opset):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                                                          list(v.shape))
                                           for n, v in inputs.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def run_both(tmp_path, node, inputs, opset):
    path = tmp_path / "model.onnx"
    onnx.save(make_model(node, inputs, opset), path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, inputs)[0]
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in inputs.values()]).numpy()
    return got, want


def floats(*shape, low=None, high=None):
    if low is None:
        return RNG.standard_normal(shape).astype(np.float32)
    return RNG.uniform(low, high, shape).astype(np.float32)


def random_rois(count, batch, height, width, reach=3.0):
    """Boxes of any size, some reaching past the input, on .5 and .25 steps."""
    corners = np.round(RNG.uniform(-reach, max(height, width) + reach, (count, 4)) * 4) / 4
    index = RNG.integers(0, batch, (count, 1))
    return np.concatenate([index, corners], 1).astype(np.float32)


# ---- MaxRoiPool ----

ROI_SHAPES = [  # (x shape, pooled, spatial_scale)
    ((2, 3, 8, 9), (2, 2), 1.0),
    ((1, 4, 7, 5), (3, 3), 0.5),
    ((3, 2, 10, 12), (4, 5), 0.25),
    ((2, 5, 6, 6), (1, 1), 1.0),
    ((2, 2, 5, 4), (6, 7), 2.0),  # more bins than pixels: empty and repeated bins
]


@pytest.mark.parametrize("shape, pooled, scale", ROI_SHAPES)
def test_max_roi_pool_matches_onnx_runtime(tmp_path, shape, pooled, scale):
    x = floats(*shape)
    fixed = np.array(ref.ROIS, np.float32)
    fixed[:, 0] %= shape[0]
    rois = np.concatenate([fixed, random_rois(12, shape[0], shape[2] / scale, shape[3] / scale)])
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=list(pooled),
                            spatial_scale=scale)
    got, want = run_both(tmp_path, node, {"x": x, "rois": rois}, 17)
    np.testing.assert_array_equal(got, want)


def test_max_roi_pool_of_negative_inputs_takes_their_maximum(tmp_path):
    x = -np.abs(floats(1, 2, 5, 5)) - 1
    rois = np.array([[0, 0, 0, 4, 4], [0, 1, 2, 3, 3], [0, 9, 9, 12, 12]], np.float32)
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 2])
    got, want = run_both(tmp_path, node, {"x": x, "rois": rois}, 17)
    np.testing.assert_array_equal(got, want)
    assert (got[:2] < 0).all() and (got[2] == 0).all()  # the last roi lies outside: empty bins


def test_max_roi_pool_exports_one_to_one(tmp_path):
    x, rois = floats(2, 3, 8, 8), random_rois(6, 2, 8, 8)
    path = tmp_path / "roi_pool.onnx"
    kiln.onnx.export(lambda a, r: ops.roi_pool(a, r, (3, 2), 0.5),
                     (kiln.from_numpy(x), kiln.from_numpy(rois)), path)
    model = onnx.load(path)
    assert [n.op_type for n in model.graph.node].count("MaxRoiPool") == 1
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, dict(zip([i.name for i in session.get_inputs()], [x, rois])))[0]
    got = ops.roi_pool(kiln.from_numpy(x), kiln.from_numpy(rois), (3, 2), 0.5).numpy()
    np.testing.assert_array_equal(got, want)


def test_max_roi_pool_without_pooled_shape_is_an_error(tmp_path):
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"])
    path = tmp_path / "model.onnx"
    onnx.save(make_model(node, {"x": floats(1, 1, 4, 4), "rois": floats(1, 5)}, 17), path)
    with pytest.raises(TypeError, match="missing required attribute 'pooled_shape'"):
        kiln.onnx.load(path)


# ---- DeformConv ----

DEFORM_SHAPES = [  # x shape, weight shape, attributes, with bias, with mask, offset spread
    ((1, 3, 6, 6), (4, 3, 3, 3), {}, False, False, 1.0),
    ((2, 4, 9, 8), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True, False, 2.0),
    ((2, 4, 8, 8), (4, 2, 3, 2), {"dilations": [2, 1], "group": 2}, False, True, 1.5),
    ((1, 6, 7, 7), (6, 2, 3, 3), {"group": 3, "offset_group": 3, "pads": [1, 1, 1, 1]}, True,
     True, 3.0),
    ((2, 4, 6, 7), (5, 4, 2, 2), {"offset_group": 2, "strides": [1, 2]}, True, True, 6.0),
    ((1, 2, 5, 6), (3, 2, 3, 3), {"pads": [2, 0, 1, 1], "kernel_shape": [3, 3]}, True, False,
     2.0),  # asymmetric pads
    ((2, 3, 5, 5), (2, 3, 1, 1), {"strides": [2, 1], "dilations": [1, 1]}, False, True, 0.7),
]


def deform_inputs(x_shape, w_shape, attrs, bias, mask, spread):
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    kh, kw = w_shape[2:]
    out = [(x_shape[2 + d] + pads[d] + pads[d + 2] - dilations[d] * (w_shape[2 + d] - 1) - 1)
           // strides[d] + 1 for d in (0, 1)]
    taps = kh * kw * attrs.get("offset_group", 1)
    inputs = {"x": floats(*x_shape), "w": floats(*w_shape),
              "offset": floats(x_shape[0], 2 * taps, *out, low=-spread, high=spread)}
    if bias:
        inputs["b"] = floats(w_shape[0])
    if mask:
        inputs["mask"] = floats(x_shape[0], taps, *out, low=0, high=1)
    return inputs


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias, mask, spread", DEFORM_SHAPES)
def test_deform_conv_matches_onnx_runtime(tmp_path, x_shape, w_shape, attrs, bias, mask, spread):
    inputs = deform_inputs(x_shape, w_shape, attrs, bias, mask, spread)
    names = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    while not names[-1]:
        names.pop()
    node = helper.make_node("DeformConv", names, ["y"], **attrs)
    got, want = run_both(tmp_path, node, inputs, 19)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("attrs, inputs, message", [
    ({}, {"x": floats(1, 2, 6), "w": floats(3, 2, 3), "offset": floats(1, 6, 4)},
     "kiln reads the 2-D form"),
    ({"kernel_shape": [2, 2]}, {"x": floats(1, 2, 6, 6), "w": floats(3, 2, 3, 3),
                                "offset": floats(1, 18, 4, 4)}, "differs from W's kernel"),
    ({"pads": [1, 1]}, {"x": floats(1, 2, 6, 6), "w": floats(3, 2, 3, 3),
                        "offset": floats(1, 18, 4, 4)}, "pads must be four"),
    ({}, {"x": floats(1, 2, 6, 6), "w": floats(3, 2, 3, 3), "offset": floats(1, 16, 4, 4)},
     r"expected offset of shape \[N, 2 \* offset_groups \* kh \* kw, OH, OW\] = \[1, 18, 4, 4\]"),
])
def test_deform_conv_import_errors_name_the_problem(tmp_path, attrs, inputs, message):
    node = helper.make_node("DeformConv", list(inputs), ["y"], **attrs)
    path = tmp_path / "model.onnx"
    onnx.save(make_model(node, inputs, 19), path)
    with pytest.raises(RuntimeError, match=message):
        kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in inputs.values()])


# ---- the Python forms, against the plain-torch references ----

def both(array, requires_grad=False):
    k = kiln.from_numpy(array.copy())
    t = torch.from_numpy(array.copy())
    if requires_grad:
        k.requires_grad_(True)
        t.requires_grad_(True)
    return k, t


def test_roi_pool_values_and_gradient_match_the_reference():
    x_np = RNG.standard_normal((2, 3, 9, 8))
    rois_np = random_rois(10, 2, 9, 8).astype(np.float64)
    (x, tx), (rois, trois) = both(x_np, True), both(rois_np)
    out = ops.roi_pool(x, rois, 3, spatial_scale=1.0)
    want = ref.roi_pool_ref(tx, trois, (3, 3), 1.0)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=0, atol=0)
    seed = RNG.standard_normal(want.shape)
    out.backward(kiln.from_numpy(seed))
    want.backward(torch.from_numpy(seed))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_roi_pool_takes_a_list_of_boxes_per_image():
    x = kiln.from_numpy(floats(2, 2, 6, 6))
    first, second = floats(2, 4, low=0, high=5), floats(1, 4, low=0, high=5)
    listed = ops.roi_pool(x, [kiln.from_numpy(first), kiln.from_numpy(second)], (2, 2))
    rois = np.concatenate([np.c_[np.zeros(2), first], np.c_[np.ones(1), second]]).astype(np.float32)
    np.testing.assert_array_equal(listed.numpy(), ops.roi_pool(x, kiln.from_numpy(rois), 2).numpy())


@pytest.mark.parametrize("mask, bias", [(False, False), (True, True), (True, False)])
def test_deform_conv2d_values_and_gradients_match_the_reference(mask, bias):
    x_np = RNG.standard_normal((2, 4, 6, 5))
    w_np = RNG.standard_normal((6, 2, 3, 3))
    off_np = RNG.uniform(-2.5, 2.5, (2, 2 * 2 * 9, 3, 2))
    m_np = RNG.uniform(0, 1, (2, 2 * 9, 3, 2)) if mask else None
    b_np = RNG.standard_normal(6) if bias else None
    pairs = [both(a, True) if a is not None else (None, None)
             for a in (x_np, off_np, w_np, b_np, m_np)]
    (x, tx), (off, toff), (w, tw), (b, tb), (m, tm) = pairs
    out = ops.deform_conv2d(x, off, w, b, stride=2, padding=(1, 0), dilation=1, mask=m)
    want = ref.deform_conv_ref(tx, tw, toff, tb, tm, (2, 2), (1, 0), (1, 1), 2, 2)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)
    seed = RNG.standard_normal(want.shape)
    out.backward(kiln.from_numpy(seed))
    want.backward(torch.from_numpy(seed))
    for k, t in pairs:
        if k is not None:
            np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_deform_conv2d_passes_gradcheck():
    inputs = [kiln.from_numpy(a).requires_grad_(True) for a in (
        RNG.standard_normal((1, 2, 4, 4)), RNG.uniform(-1.5, 1.5, (1, 8, 3, 3)),
        RNG.standard_normal((3, 2, 2, 2)), RNG.standard_normal(3), RNG.uniform(0, 1, (1, 4, 3, 3)))]
    assert kiln.autograd.gradcheck(
        lambda x, off, w, b, m: ops.deform_conv2d(x, off, w, b, padding=0, mask=m), inputs)


def test_deform_conv2d_with_zero_offsets_is_conv2d():
    x, w = kiln.from_numpy(floats(2, 4, 7, 6)), kiln.from_numpy(floats(6, 2, 3, 3))
    offset = kiln.zeros(2, 18, 4, 3)
    got = ops.deform_conv2d(x, offset, w, stride=(2, 2), padding=1)
    want = kiln.nn.functional.conv2d(x, w, stride=2, padding=1, groups=2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_deform_conv2d_errors_name_the_shapes():
    x, w = kiln.from_numpy(floats(1, 3, 5, 5)), kiln.from_numpy(floats(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"deform_conv2d: expected offset of shape .* got "
                                           r"\[1, 20, 3, 3\]"):
        ops.deform_conv2d(x, kiln.zeros(1, 20, 3, 3), w)
    with pytest.raises(RuntimeError, match=r"deform_conv2d: expected mask of shape"):
        ops.deform_conv2d(x, kiln.zeros(1, 18, 3, 3), w, mask=kiln.zeros(1, 9, 2, 3))
    with pytest.raises(RuntimeError, match=r"max_roi_pool: expected rois of shape \[R, 5\]"):
        ops.roi_pool(x, kiln.zeros(2, 4), 2)


def test_deform_conv2d_export_is_refused_naming_the_op_and_why():
    x, w = kiln.from_numpy(floats(1, 2, 5, 5)), kiln.from_numpy(floats(3, 2, 3, 3))
    offset = kiln.from_numpy(floats(1, 18, 3, 3))
    with pytest.raises(RuntimeError, match="op 'deform_conv2d' has no ONNX translation") as info:
        kiln.onnx.export(lambda a, o: ops.deform_conv2d(a, o, w), (x, offset), io.BytesIO())
    assert "DeformConv is opset 19" in str(info.value)


def test_deform_conv_then_max_roi_pool_with_symbolic_batch_and_rois(tmp_path):
    """One model, imported once with N and R symbolic, run at two sizes."""
    nodes = [helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"],
                              pads=[1, 1, 1, 1], offset_group=2),
             helper.make_node("MaxRoiPool", ["y", "rois"], ["z"], pooled_shape=[2, 2],
                              spatial_scale=0.5)]
    shapes = {"x": ["N", 4, 6, 6], "w": [3, 4, 3, 3], "offset": ["N", 36, 6, 6], "b": [3],
              "mask": ["N", 18, 6, 6], "rois": ["R", 5]}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in shapes.items()],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9),
              path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = kiln.onnx.load(path)
    for batch, count in ((1, 3), (3, 5)):
        feeds = {"x": floats(batch, 4, 6, 6), "w": floats(3, 4, 3, 3),
                 "offset": floats(batch, 36, 6, 6, low=-2, high=2), "b": floats(3),
                 "mask": floats(batch, 18, 6, 6, low=0, high=1),
                 "rois": random_rois(count, batch, 12, 12)}
        want = session.run(None, feeds)[0]
        got = model(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
        assert got.shape == want.shape == (count, 3, 2, 2)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
