"""ONNX import and export of convolution, pooling, batch normalization and
dropout in the forms kiln's ops do not take directly: 1-D and 3-D inputs,
pads that differ at the two ends or exceed half a window, negative
ConvTranspose pads, auto_pad, global pools of any rank, BatchNormalization
and Dropout in training mode, MaxPool's indices, LpPool. ONNX's own backend cases for them, then
hand-written models run in kiln and in ONNX Runtime, and kiln's 3-D layers
exported and run in ONNX Runtime."""
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln import nn
from onnx_test_models import info, model_with

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402

BACKEND_CASES = [
    "node/test_averagepool_2d_pads", "node/test_averagepool_2d_pads_count_include_pad",
    "node/test_averagepool_2d_same_lower", "node/test_averagepool_2d_same_upper",
    "node/test_averagepool_3d_default", "node/test_batchnorm_epsilon_training_mode",
    "node/test_batchnorm_example_training_mode", "node/test_convtranspose_1d",
    "node/test_convtranspose_3d", "node/test_convtranspose_autopad_same",
    "node/test_convtranspose_output_shape", "node/test_maxpool_2d_pads",
    "node/test_maxpool_2d_same_lower", "node/test_maxpool_2d_same_upper",
    "node/test_maxpool_3d_default", "node/test_training_dropout_zero_ratio",
    "node/test_training_dropout_zero_ratio_mask", "pytorch-converted/test_AvgPool3d",
    "pytorch-converted/test_AvgPool3d_stride",
    "pytorch-converted/test_AvgPool3d_stride1_pad0_gpu_input",
    "pytorch-converted/test_Conv3d", "pytorch-converted/test_Conv3d_dilated",
    "pytorch-converted/test_Conv3d_dilated_strided", "pytorch-converted/test_Conv3d_groups",
    "pytorch-converted/test_Conv3d_no_bias", "pytorch-converted/test_Conv3d_stride",
    "pytorch-converted/test_Conv3d_stride_padding", "pytorch-converted/test_MaxPool3d",
    "pytorch-converted/test_MaxPool3d_stride", "pytorch-converted/test_MaxPool3d_stride_padding",
    "node/test_maxpool_with_argmax_2d_precomputed_pads",
    "node/test_maxpool_with_argmax_2d_precomputed_strides"]


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_onnx_backend_case_passes(name):
    status, detail = conformance.run_case(conformance.DATA / name)
    assert status == "pass", detail


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(sum(shape) + seed).standard_normal(shape).astype(dtype)


def run_both(tmp_path, model, feeds):
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    got = [g.numpy() for g in (got if isinstance(got, tuple) else [got])]
    return got, want


def check(tmp_path, model, feeds, rtol=1e-5, atol=1e-5):
    got, want = run_both(tmp_path, model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def one_node(tmp_path, op, x, attrs, extra=(), n_outputs=1, opset=17):
    """`op` over input x (and extra inputs), run in kiln and ONNX Runtime
    (MaxPool's second output: int64 indices)."""
    names = ["x"] + [f"in{i}" for i in range(len(extra))]
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_outputs)], **attrs)
    feeds = dict(zip(names, [x, *extra], strict=True))
    types = [TensorProto.INT64 if op == "MaxPool" and i == 1 else TensorProto.FLOAT
             for i in range(n_outputs)]
    model = model_with([node], [info(n, list(v.shape)) for n, v in feeds.items()],
                       [info(f"y{i}", None, t) for i, t in enumerate(types)], opset=opset)
    check(tmp_path, model, feeds)


POOL_FORMS = [
    # (input shape, attributes): 1-D, 2-D and 3-D; pads unlike at the two
    # ends, over half the window, auto_pad with strides, ceil_mode, dilations.
    ((2, 3, 9), {"kernel_shape": [3], "pads": [0, 2]}),
    ((2, 3, 9), {"kernel_shape": [2], "strides": [2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "pads": [0, 1, 2, 0]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1],
                    "ceil_mode": 1}),
    ((2, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2],
                       "pads": [1, 0, 1, 1, 1, 0], "ceil_mode": 1}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2],
                       "auto_pad": "SAME_UPPER"}),
]


@pytest.mark.parametrize("shape, attrs", POOL_FORMS)
def test_max_pool(tmp_path, shape, attrs):
    one_node(tmp_path, "MaxPool", rand(*shape), attrs)


@pytest.mark.parametrize("shape, attrs", POOL_FORMS)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(tmp_path, shape, attrs, include_pad):
    one_node(tmp_path, "AveragePool", rand(*shape), {**attrs, "count_include_pad": include_pad})


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [0, 1, 2, 2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 2], "strides": [1, 2, 1],
                       "pads": [1, 1, 1, 1, 1, 1]}),
])
def test_max_pool_with_dilations(tmp_path, shape, attrs):
    one_node(tmp_path, "MaxPool", rand(*shape), attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 1, 1, 1],
                    "dilations": [1, 2], "ceil_mode": 1}),
])
def test_max_pool_indices(tmp_path, shape, attrs, storage_order):
    """Indices over the whole tensor (row- or column-major within a plane),
    ties and all: integer inputs rounded to tie often."""
    x = np.round(rand(*shape) * 2).astype(np.float32)
    one_node(tmp_path, "MaxPool", x, {**attrs, "storage_order": storage_order}, n_outputs=2,
             opset=12)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((2, 4, 9), (6, 2, 3), {"group": 2, "pads": [2, 0], "strides": [2]}),
    ((1, 3, 7, 8), (4, 3, 3, 2), {"pads": [0, 1, 2, 1], "dilations": [2, 1]}),
    ((1, 4, 5, 6, 7), (6, 2, 3, 2, 3), {"group": 2, "strides": [2, 1, 2],
                                        "auto_pad": "SAME_LOWER"}),
    ((2, 3, 5, 6, 5), (4, 3, 2, 3, 2), {"pads": [1, 0, 1, 0, 2, 1], "dilations": [1, 2, 1]}),
])
def test_conv(tmp_path, x_shape, w_shape, attrs):
    b = rand(w_shape[0], seed=3)
    one_node(tmp_path, "Conv", rand(*x_shape), attrs, extra=(rand(*w_shape, seed=1), b))


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((2, 4, 6), (4, 3, 3), {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"strides": [2, 3], "pads": [0, 1, 2, 0]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"strides": [3, 2], "output_shape": [12, 11]}),
    ((1, 2, 4, 5), (2, 2, 3, 2), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 4, 3, 4, 3), (4, 2, 2, 3, 2), {"group": 2, "strides": [2, 1, 2],
                                        "pads": [1, 0, 0, 0, 1, 1], "dilations": [1, 2, 1]}),
    ((1, 2, 3, 3, 4), (2, 3, 3, 2, 2), {"strides": [2, 2, 2], "output_padding": [1, 1, 0]}),
])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_transpose(tmp_path, x_shape, w_shape, attrs, with_bias):
    extra = [rand(*w_shape, seed=1)]
    if with_bias:
        extra.append(rand(w_shape[1] * attrs.get("group", 1), seed=2))
    one_node(tmp_path, "ConvTranspose", rand(*x_shape), attrs, extra=tuple(extra))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_global_pools_of_any_rank(tmp_path, op, shape):
    one_node(tmp_path, op, rand(*shape), {})


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "pads": [0, 1, 1, 1, 0, 1]}),
])
def test_lp_pool(tmp_path, p, shape, attrs):
    one_node(tmp_path, "LpPool", rand(*shape), {**attrs, "p": p}, opset=11)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_global_lp_pool(tmp_path, p, shape):
    one_node(tmp_path, "GlobalLpPool", rand(*shape), {"p": p})


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4)])
def test_batch_norm_in_training_mode(tmp_path, shape):
    stats = [rand(shape[1], seed=s) for s in range(4)]
    stats[3] = np.abs(stats[3]) + 0.5  # a variance
    one_node(tmp_path, "BatchNormalization", rand(*shape),
             {"training_mode": 1, "momentum": 0.7, "epsilon": 1e-3}, extra=tuple(stats),
             n_outputs=3, opset=15)


def dropout_model(with_mask=True):
    outputs = ["y", "mask"] if with_mask else ["y"]
    node = helper.make_node("Dropout", ["x", "ratio", "training"], outputs)
    return model_with([node], [info("x", [50, 40]), info("ratio", []),
                               info("training", [], TensorProto.BOOL)],
                      [info("y", None), info("mask", None, TensorProto.BOOL)][:len(outputs)],
                      opset=13)


@pytest.mark.parametrize("ratio, training", [(0.0, True), (0.4, False), (0.0, False)])
def test_dropout_that_keeps_everything_matches_exactly(tmp_path, ratio, training):
    feeds = {"x": rand(50, 40), "ratio": np.array(ratio, np.float32),
             "training": np.array(training)}
    got, want = run_both(tmp_path, dropout_model(), feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_dropout_in_training_drops_at_the_ratio_and_rescales(tmp_path):
    """Random masks can only be checked statistically: the kept fraction is
    1 - ratio (2000 draws: within 5 standard deviations), kept elements are
    scaled by 1 / (1 - ratio), dropped ones are 0, and two runs differ."""
    onnx.save(dropout_model(), tmp_path / "d.onnx")
    model = kiln.onnx.load(tmp_path / "d.onnx")
    x = rand(50, 40) + 3.0
    args = [kiln.from_numpy(x), kiln.from_numpy(np.array(0.3, np.float32)),
            kiln.from_numpy(np.array(True))]
    y, mask = (t.numpy() for t in model(*args))
    kept = mask.mean()
    assert abs(kept - 0.7) < 5 * np.sqrt(0.7 * 0.3 / mask.size)
    np.testing.assert_allclose(y[mask], x[mask] / np.float32(0.7), rtol=1e-6)
    assert np.all(y[~mask] == 0)
    _, mask2 = (t.numpy() for t in model(*args))
    assert not np.array_equal(mask, mask2)


def test_export_of_3d_layers_runs_in_onnx_runtime(tmp_path):
    kiln.manual_seed(0)
    net = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1, stride=(1, 2, 1)), nn.ReLU(),
                        nn.MaxPool3d(2, ceil_mode=True), nn.AvgPool3d((1, 2, 2), padding=(0, 1, 1)),
                        nn.ConvTranspose3d(4, 3, 2, stride=2, groups=1))
    x = kiln.randn(2, 2, 6, 8, 7)
    want = net(x).detach().numpy()
    path = tmp_path / "net.onnx"
    kiln.onnx.export(net, x, path)
    onnx.checker.check_model(onnx.load(path))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {ort.InferenceSession(str(path)).get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    back = kiln.onnx.load(path)(x).detach().numpy()
    np.testing.assert_allclose(back, want, rtol=1e-5, atol=1e-6)


def test_3d_pads_in_a_model_with_initializers(tmp_path):
    """Weights as initializers (as exporters write them) and a Conv chained
    into a pool with pads unlike at the two ends."""
    w = numpy_helper.from_array(rand(3, 2, 2, 2, 2, seed=5), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[0, 1, 0, 1, 0, 1]),
             helper.make_node("AveragePool", ["c"], ["y"], kernel_shape=[2, 2, 2],
                              pads=[1, 0, 0, 0, 1, 1], strides=[2, 2, 2])]
    model = model_with(nodes, [info("x", [1, 2, 4, 5, 6])], [info("y", None)], [w])
    check(tmp_path, model, {"x": rand(1, 2, 4, 5, 6)})
