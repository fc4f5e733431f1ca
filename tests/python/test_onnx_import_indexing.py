"""ONNX import of the gather, scatter and rearranging ops (GatherND,
ScatterND, ScatterElements, Scatter, OneHot, ReverseSequence, DepthToSpace,
SpaceToDepth, MaxUnpool, Range, Einsum, GridSample, RoiAlign,
TfIdfVectorizer): ONNX's own backend cases for them, and hand-written
models with the variants those cases leave out (batch dims, negative
indices, reductions, symbolic sizes, broadcasting equations, every
GridSample, RoiAlign and TfIdfVectorizer mode), each run in kiln and in
ONNX Runtime."""
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from onnx_test_models import const, info, model_with

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402

BACKEND_CASES = [
    "node/test_depthtospace_crd_mode", "node/test_depthtospace_crd_mode_example",
    "node/test_depthtospace_dcr_mode", "node/test_depthtospace_example",
    "node/test_einsum_batch_diagonal", "node/test_einsum_batch_matmul",
    "node/test_einsum_inner_prod", "node/test_einsum_sum", "node/test_einsum_transpose",
    "node/test_gathernd_example_float32", "node/test_gathernd_example_int32",
    "node/test_gathernd_example_int32_batch_dim1", "node/test_gridsample",
    "node/test_gridsample_aligncorners_true", "node/test_gridsample_bicubic",
    "node/test_gridsample_bilinear", "node/test_gridsample_border_padding",
    "node/test_gridsample_nearest", "node/test_gridsample_reflection_padding",
    "node/test_gridsample_zeros_padding", "node/test_maxunpool_export_with_output_shape",
    "node/test_maxunpool_export_without_output_shape", "node/test_onehot_negative_indices",
    "node/test_onehot_with_axis", "node/test_onehot_with_negative_axis",
    "node/test_onehot_without_axis", "node/test_range_float_type_positive_delta",
    "node/test_range_int32_type_negative_delta",
    "node/test_reversesequence_batch", "node/test_roialign_aligned_false",
    "node/test_roialign_aligned_true", "node/test_reversesequence_time",
    "node/test_scatter_elements_with_axis", "node/test_scatter_elements_with_duplicate_indices",
    "node/test_scatter_elements_with_negative_indices", "node/test_scatter_elements_without_axis",
    "node/test_scatter_with_axis", "node/test_scatter_without_axis", "node/test_scatternd",
    "node/test_scatternd_add", "node/test_scatternd_multiply", "node/test_spacetodepth",
    "node/test_spacetodepth_example", "node/test_tfidfvectorizer_tf_batch_onlybigrams_skip0",
    "node/test_tfidfvectorizer_tf_batch_onlybigrams_skip5",
    "node/test_tfidfvectorizer_tf_batch_uniandbigrams_skip5",
    "node/test_tfidfvectorizer_tf_only_bigrams_skip0",
    "node/test_tfidfvectorizer_tf_onlybigrams_levelempty",
    "node/test_tfidfvectorizer_tf_onlybigrams_skip5",
    "node/test_tfidfvectorizer_tf_uniandbigrams_skip5"]


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_onnx_backend_case_passes(name):
    status, detail = conformance.run_case(conformance.DATA / name)
    assert status == "pass", detail


def check(tmp_path, model, feeds, rtol=1e-5):
    """kiln's outputs equal ONNX Runtime's (exactly for integers)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def rand(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape) + 7).standard_normal(shape).astype(dtype)


# ---- GatherND ----

# (data shape, indices, batch_dims): more batch dims, negative indices,
# indices naming whole slices and single elements.
GATHER_ND = [
    ((2, 3, 4, 5), [[[[1, -1]], [[0, 2]], [[-2, 0]]], [[[2, 4]], [[1, 1]], [[0, -5]]]], 2),
    ((3, 4, 5), [[-1, 0], [2, 3], [0, -4]], 0),
    ((3, 4, 5), [[[2, 3, 4], [-3, 0, -1]]], 0),
    ((3, 4), [[[1], [0]], [[2], [-1]], [[0], [3]]], 1),
]


@pytest.mark.parametrize("shape, indices, batch_dims", GATHER_ND)
def test_gather_nd(tmp_path, shape, indices, batch_dims):
    indices = np.array(indices, dtype=np.int64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    model = model_with([node], [info("x", list(shape)), info("i", list(indices.shape),
                                                               TensorProto.INT64)],
                       [info("y", None)])
    check(tmp_path, model, {"x": rand(*shape), "i": indices})


def test_gather_nd_with_a_symbolic_batch(tmp_path):
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    model = model_with([node], [info("x", ["n", 4, 5]), info("i", ["n", 2, 1], TensorProto.INT64)],
                       [info("y", None)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (3, 1, 4):
        x = rand(n, 4, 5)
        i = np.random.default_rng(n).integers(-4, 4, size=(n, 2, 1)).astype(np.int64)
        want = session.run(None, {"x": x, "i": i})[0]
        np.testing.assert_array_equal(loaded(kiln.from_numpy(x), kiln.from_numpy(i)).numpy(), want)


@pytest.mark.parametrize("op", ["GatherND", "ScatterND"])
@pytest.mark.parametrize("index", [[0, 7], [3, 0], [-4, 1]])
def test_nd_index_outside_its_axis_is_an_error(tmp_path, op, index):
    # [0, 7] of a [3, 4] would land inside the flattened data: still refused,
    # as ONNX Runtime refuses it.
    names = ["x", "i"] if op == "GatherND" else ["x", "i", "u"]
    inputs = [info("x", [3, 4]), info("i", [1, 2], TensorProto.INT64)]
    if op == "ScatterND":
        inputs.append(info("u", [1]))
    model = model_with([helper.make_node(op, names, ["y"])], inputs, [info("y", None)])
    onnx.save(model, tmp_path / "m.onnx")
    loaded = kiln.onnx.load(tmp_path / "m.onnx")
    args = [kiln.randn(3, 4), kiln.from_numpy(np.array([index]))] + (
        [kiln.randn(1)] if op == "ScatterND" else [])
    with pytest.raises(IndexError, match="out of"):
        loaded(*args)


# ---- ScatterND, ScatterElements, Scatter ----

@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_nd_slices_with_negative_indices(tmp_path, reduction):
    indices = np.array([[[0, -1]], [[2, 1]], [[0, -1]]], dtype=np.int64)
    if reduction == "none":
        indices = indices[:2]
    updates = rand(indices.shape[0], 1, 5)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    model = model_with([node], [info("x", [3, 4, 5]), info("i", list(indices.shape),
                                                             TensorProto.INT64),
                                info("u", list(updates.shape))], [info("y", None)], opset=16)
    check(tmp_path, model, {"x": rand(3, 4, 5), "i": indices, "u": updates})


def test_scatter_nd_on_int64_elements(tmp_path):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    model = model_with([node], [info("x", [2, 3], TensorProto.INT64),
                                info("i", [2, 2], TensorProto.INT64),
                                info("u", [2], TensorProto.INT64)],
                       [info("y", None, TensorProto.INT64)])
    check(tmp_path, model, {"x": np.arange(6, dtype=np.int64).reshape(2, 3),
                            "i": np.array([[1, -1], [0, 0]], dtype=np.int64),
                            "u": np.array([40, 50], dtype=np.int64)})


@pytest.mark.parametrize("op, axis, reduction, opset", [
    ("ScatterElements", -1, "add", 16), ("ScatterElements", 0, "mul", 16),
    ("ScatterElements", 1, "none", 16), ("ScatterElements", -2, None, 13),
    ("Scatter", 1, None, 10)])
def test_scatter_elements(tmp_path, op, axis, reduction, opset):
    indices = np.array([[0, -1, 1], [-3, 2, 2]], dtype=np.int64)
    kwargs = {"axis": axis} if opset < 16 else {"axis": axis, "reduction": reduction}
    if reduction == "none" or reduction is None:
        indices = np.array([[0, -1, 1], [-3, 2, 0]], dtype=np.int64)  # no duplicates
    node = helper.make_node(op, ["x", "i", "u"], ["y"], **kwargs)
    model = model_with([node], [info("x", [3, 3]), info("i", [2, 3], TensorProto.INT64),
                                info("u", [2, 3])], [info("y", None)], opset=opset)
    check(tmp_path, model, {"x": rand(3, 3), "i": indices, "u": rand(2, 3)})


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_max_and_min_of_opset_18(tmp_path, op, reduction):
    if op == "ScatterElements":
        indices = np.array([[0, -1, 1], [-3, 2, 2], [0, 0, 2]], dtype=np.int64)  # duplicates
        updates, axis = rand(3, 3) * 3, {"axis": -2}
    else:
        indices = np.array([[[0, -1]], [[2, 1]], [[0, 3]]], dtype=np.int64)  # (0, 3) twice
        updates, axis = rand(3, 1, 5) * 3, {}
    node = helper.make_node(op, ["x", "i", "u"], ["y"], reduction=reduction, **axis)
    shape = [3, 3] if op == "ScatterElements" else [3, 4, 5]
    model = model_with([node], [info("x", shape), info("i", list(indices.shape),
                                                      TensorProto.INT64),
                                info("u", list(updates.shape))], [info("y", None)], opset=18)
    check(tmp_path, model, {"x": rand(*shape), "i": indices, "u": updates})


# ---- OneHot ----

# (axis, indices' type, depth's type, values' type): the combinations ONNX
# Runtime's CPU provider implements.
ONE_HOTS = [(0, np.float32, np.int64, np.int64), (1, np.int64, np.float32, np.int32),
            (-1, np.int32, np.float32, np.float32), (-3, np.int64, np.int64, np.float32)]
ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64,
              np.int32: TensorProto.INT32}


@pytest.mark.parametrize("axis, index_type, depth_type, value_type", ONE_HOTS)
def test_one_hot_out_of_range_indices_and_types(tmp_path, axis, index_type, depth_type,
                                                value_type):
    indices = np.array([[0, 2, -1], [5, -4, 3]]).astype(index_type)  # 5, -4: all off
    if index_type == np.float32:
        indices[0, 1] = 2.7  # hot nowhere, as ONNX Runtime compares it
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)
    model = model_with([node], [info("i", [2, 3], ONNX_TYPES[index_type]),
                                info("values", [2], ONNX_TYPES[value_type])],
                       [info("y", None, ONNX_TYPES[value_type])],
                       [const("depth", 4, depth_type)], opset=11)
    check(tmp_path, model, {"i": indices, "values": np.array([-2, 9], dtype=value_type)})


# ---- ReverseSequence ----

@pytest.mark.parametrize("batch_axis, time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_rank_3_with_a_symbolic_time(tmp_path, batch_axis, time_axis):
    shape = ["b", "t", 2] if batch_axis == 0 else ["t", "b", 2]
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis,
                            time_axis=time_axis)
    model = model_with([node], [info("x", shape), info("lens", ["b"], TensorProto.INT64)],
                       [info("y", None)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for t in (5, 3):
        x = rand(3, t, 2) if batch_axis == 0 else rand(t, 3, 2)
        lens = np.array([t, 1, 2], dtype=np.int64)
        want = session.run(None, {"x": x, "lens": lens})[0]
        np.testing.assert_array_equal(
            loaded(kiln.from_numpy(x), kiln.from_numpy(lens)).numpy(), want)


# ---- DepthToSpace, SpaceToDepth ----

@pytest.mark.parametrize("op, attrs", [("DepthToSpace", {"mode": "DCR"}),
                                       ("DepthToSpace", {"mode": "CRD"}),
                                       ("SpaceToDepth", {})])
def test_depth_and_space_with_symbolic_sizes(tmp_path, op, attrs):
    node = helper.make_node(op, ["x"], ["y"], blocksize=2, **attrs)
    shape = ["n", 8, "h", "w"] if op == "DepthToSpace" else ["n", 3, "h", "w"]
    model = model_with([node], [info("x", shape)], [info("y", None)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n, h, w in ((2, 4, 6), (1, 2, 2)):
        x = rand(n, shape[1], h, w)
        np.testing.assert_array_equal(loaded(kiln.from_numpy(x)).numpy(),
                                      session.run(None, {"x": x})[0])


# ---- MaxUnpool ----

def test_max_unpool_of_max_pool_indices_with_pads(tmp_path):
    # ONNX Runtime's MaxPool gives the indices; kiln unpools them.
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    pool_model = model_with([pool], [info("x", [2, 3, 7, 7])],
                            [info("p", None), info("i", None, TensorProto.INT64)])
    x = rand(2, 3, 7, 7)
    pooled, indices = ort.InferenceSession(pool_model.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(
                                               None, {"x": x})
    unpool = helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1])
    model = model_with([unpool], [info("p", list(pooled.shape)),
                                  info("i", list(indices.shape), TensorProto.INT64)],
                       [info("y", None)])
    check(tmp_path, model, {"p": pooled, "i": indices})


# ---- Range ----

@pytest.mark.parametrize("start, limit, delta, dtype, onnx_type", [
    (10, 2, -3, np.int64, TensorProto.INT64), (0.5, 3.2, 0.7, np.float32, TensorProto.FLOAT),
    (-1.0, 4.0, 0.25, np.float64, TensorProto.DOUBLE), (3, 3, 1, np.int32, TensorProto.INT32)])
def test_range_of_constants(tmp_path, start, limit, delta, dtype, onnx_type):
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    x_node = helper.make_node("Identity", ["x"], ["x2"])
    model = model_with([node, x_node], [info("x", [1])], [info("y", None, onnx_type),
                                                           info("x2", None)],
                       [const("s", start, dtype), const("l", limit, dtype),
                        const("d", delta, dtype)], opset=11)
    check(tmp_path, model, {"x": rand(1)})


def test_range_up_to_a_symbolic_size(tmp_path):
    # Position ids as transformers export them: Range(0, Shape(x)[1], 1).
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["len"], axis=0),
             helper.make_node("Range", ["zero", "len", "one"], ["positions"]),
             helper.make_node("Cast", ["positions"], ["p"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "p"], ["y"])]
    model = model_with(nodes, [info("x", ["b", "seq"])], [info("y", None)],
                       [const("zero", 0), const("one", 1)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for b, seq in ((2, 5), (1, 9)):
        x = rand(b, seq)
        np.testing.assert_allclose(loaded(kiln.from_numpy(x)).numpy(),
                                   session.run(None, {"x": x})[0])


def test_range_of_runtime_bounds_specializes_on_their_values(tmp_path):
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    model = model_with([node], [info(n, [], TensorProto.DOUBLE) for n in "sld"],
                       [info("y", None, TensorProto.DOUBLE)], opset=11)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for bounds in ((1.0, 2.5, 0.5), (4.0, -1.0, -1.5), (0.0, 0.0, 1.0), (1.0, 2.5, 0.5)):
        feeds = {n: np.array(v) for n, v in zip("sld", bounds)}
        got = loaded(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
        np.testing.assert_allclose(got, session.run(None, feeds)[0])


# ---- Einsum ----

EINSUMS = [
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,kj->ik", [(3, 1), (2, 4)]),
    ("bii,bj->bij", [(2, 3, 3), (2, 4)]),
    ("i,j->ij", [(3,), (4,)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUMS)
def test_einsum(tmp_path, equation, shapes):
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    model = model_with([node], [info(n, list(s)) for n, s in zip(names, shapes)],
                       [info("y", None)], opset=12)
    check(tmp_path, model, {n: rand(*s) for n, s in zip(names, shapes)}, rtol=1e-4)


def test_einsum_with_a_symbolic_batch(tmp_path):
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
    model = model_with([node], [info("a", ["n", 3, 4]), info("b", ["n", 4, 2])], [info("y", None)],
                       opset=12)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (2, 5):
        a, b = rand(n, 3, 4), rand(n, 4, 2)
        np.testing.assert_allclose(loaded(kiln.from_numpy(a), kiln.from_numpy(b)).numpy(),
                                   session.run(None, {"a": a, "b": b})[0], rtol=1e-5, atol=1e-6)


# ---- GridSample ----

@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_against_onnx_runtime(tmp_path, mode, padding, align_corners):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align_corners)
    model = model_with([node], [info("x", ["n", 3, 5, 6]), info("grid", ["n", 4, 7, 2])],
                       [info("y", None)], opset=16)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for n in (2, 1):
        x = rng.standard_normal((n, 3, 5, 6)).astype(np.float32)
        grid = rng.uniform(-1.6, 1.6, (n, 4, 7, 2)).astype(np.float32)
        want = session.run(None, {"x": x, "grid": grid})[0]
        got = loaded(kiln.from_numpy(x), kiln.from_numpy(grid)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---- RoiAlign ----

@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_against_onnx_runtime(tmp_path, mode, transform):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode,
                            coordinate_transformation_mode=transform, output_height=3,
                            output_width=2, sampling_ratio=2, spatial_scale=0.5)
    model = model_with([node], [info("x", [2, 3, 8, 10]), info("rois", ["r", 4]),
                                info("batch", ["r"], TensorProto.INT64)], [info("y", None)],
                       opset=16)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = rand(2, 3, 8, 10)
    # Regions inside, reaching past the borders, tiny, and far outside.
    rois = np.array([[0, 0, 19, 15], [-6, 3, 8, 30], [5, 5, 5.5, 6], [30, 30, 40, 44],
                     [2.2, 1.1, 11.7, 9.4]], dtype=np.float32)
    for count in (5, 2):
        feeds = {"x": x, "rois": rois[:count], "batch": np.array([1, 0, 1, 0, 1][:count])}
        want = session.run(None, feeds)[0]
        got = loaded(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_roi_align_with_adaptive_sampling_is_refused_by_name(tmp_path):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"])
    model = model_with([node], [info("x", [1, 1, 4, 4]), info("rois", [1, 4]),
                                info("batch", [1], TensorProto.INT64)], [info("y", None)],
                       opset=16)
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(RuntimeError, match="sampling_ratio 0"):
        kiln.onnx.load(tmp_path / "m.onnx")


# ---- TfIdfVectorizer ----

# (mode, min and max n-gram length, max_skip_count, ngram_counts, pool,
# ngram_indexes, weights): trigrams, weights, an output index order of its own.
TFIDFS = [
    ("TFIDF", 1, 3, 2, [0, 3, 7], [4, 9, 2, 9, 9, 4, 2, 7, 4, 9, 9, 2, 7],
     [6, 0, 2, 1, 3, 5, 4], [0.5, 2.0, 1.0, 3.0, 0.25, 1.5, 4.0]),
    ("IDF", 2, 2, 1, [0, 2], [4, 9, 9, 4, 2, 7], [1, 0, 3, 2], [1.0, 2.0, 3.0, 4.0]),
    ("TF", 1, 1, 3, [0, 2], [7, 2, 2, 7], [0, 1, 2], None),
]


@pytest.mark.parametrize("mode, min_n, max_n, skip, counts, pool, indexes, weights", TFIDFS)
@pytest.mark.parametrize("rows", [False, True])
def test_tfidf_vectorizer_against_onnx_runtime(tmp_path, mode, min_n, max_n, skip, counts, pool,
                                               indexes, weights, rows):
    attrs = {"mode": mode, "min_gram_length": min_n, "max_gram_length": max_n,
             "max_skip_count": skip, "ngram_counts": counts, "pool_int64s": pool,
             "ngram_indexes": indexes}
    if weights is not None:
        attrs["weights"] = weights
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    shape = [3, "c"] if rows else ["c"]
    model = model_with([node], [info("x", shape, TensorProto.INT32)], [info("y", None)], opset=9)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    for c in (12, 2):  # rows shorter than a trigram's span too
        x = rng.choice([2, 4, 7, 9, 11], size=(3, c) if rows else (c,)).astype(np.int32)
        want = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(loaded(kiln.from_numpy(x)).numpy(), want)


# ---- export back ----

# Imported models whose translations are kiln ops ONNX holds: exported
# again, ONNX Runtime runs them to kiln's results.
ROUND_TRIPS = ["test_gathernd_example_int32_batch_dim1", "test_scatternd_add",
               "test_scatter_elements_with_negative_indices", "test_depthtospace_crd_mode",
               "test_spacetodepth_example", "test_einsum_batch_diagonal", "test_gridsample_bicubic",
               "test_roialign_aligned_true", "test_reversesequence_batch",
               "test_tfidfvectorizer_tf_uniandbigrams_skip5"]


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_imported_model_exports_back(tmp_path, name):
    folder = conformance.DATA / "node" / name
    data_set = sorted(folder.glob("test_data_set_*"))[0]
    paths = sorted(data_set.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
    inputs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in paths]
    model = kiln.onnx.load(folder / "model.onnx")
    args = tuple(kiln.from_numpy(np.array(a, copy=True)) for a in inputs)
    want = model(*args)
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    kiln.onnx.export(model, args, tmp_path / "back.onnx")
    session = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), inputs)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
