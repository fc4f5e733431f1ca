"""ONNX import of the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss),
the reductions between pointwise steps (ReduceL1, ReduceL2, ReduceSumSquare,
ReduceLogSum, ReduceLogSumExp), the activations and normalizations kiln
composes (Hardmax, Shrink, ..., LRN, InstanceNormalization) and the
generators (EyeLike, CastLike, windows, random ops): hand-written models
with the attributes, dtypes and opsets ONNX's backend cases leave out, each
run in kiln and in ONNX Runtime."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

FLOAT, DOUBLE, INT32, INT64 = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32,
                               TensorProto.INT64)


def one_node_model(node, feeds, opset=17, initializers=(), symbolic=()):
    """A model of one node whose graph inputs are `feeds` (names, dtypes and
    shapes); dimensions listed in `symbolic` as (input, axis) get a name."""
    inputs = []
    for name, value in feeds.items():
        shape = list(value.shape)
        for input_name, axis, symbol in symbolic:
            if input_name == name:
                shape[axis] = symbol
        dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
        inputs.append(helper.make_tensor_value_info(name, dtype, shape))
    outputs = [helper.make_value_info(name, onnx.TypeProto()) for name in node.output if name]
    graph = helper.make_graph([node], "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def run_both(tmp_path, model, feeds):
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    return [g.numpy() for g in got], want


def check(tmp_path, node, feeds, opset=17, initializers=(), symbolic=(), rtol=1e-5, atol=1e-6):
    model = one_node_model(node, feeds, opset, initializers, symbolic)
    got, want = run_both(tmp_path, model, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def normal(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- losses ----

def class_targets(shape, classes, ignore=None, dtype=np.int64, seed=1):
    target = np.random.default_rng(seed).integers(0, classes, shape).astype(dtype)
    if ignore is not None:
        target.flat[::3] = ignore  # every third target ignored
    return target


# (reduction, spatial dims, with weight, ignore_index, target dtype, input dtype)
NLL_FORMS = [
    ("mean", (), True, None, np.int64, np.float64),
    ("mean", (), False, 2, np.int32, np.float32),
    ("sum", (4,), True, -7, np.int64, np.float64),
    ("mean", (3, 2), True, 0, np.int64, np.float32),
    ("none", (3, 2), True, 100, np.int32, np.float32),
    ("none", (2,), False, -1, np.int64, np.float64),
    ("mean", (2, 2, 2), False, None, np.int64, np.float32),
]


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("form", NLL_FORMS, ids=[str(i) for i in range(len(NLL_FORMS))])
def test_losses_match_onnx_runtime(tmp_path, op, form):
    reduction, spatial, weighted, ignore, target_dtype, dtype = form
    classes = 5
    feeds = {"input": normal(4, classes, *spatial, dtype=dtype),
             "target": class_targets((4, *spatial), classes, ignore, target_dtype)}
    if weighted:
        feeds["weight"] = np.random.default_rng(2).uniform(0.2, 2, classes).astype(dtype)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    outputs = ["loss", "log_prob"] if op == "SoftmaxCrossEntropyLoss" else ["loss"]
    node = helper.make_node(op, list(feeds), outputs, **attrs)
    check(tmp_path, node, feeds, opset=13)


def test_loss_with_a_symbolic_batch_runs_at_several_sizes(tmp_path):
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["input", "target", "weight"], ["loss"],
                            reduction="mean", ignore_index=1)
    weight = np.linspace(0.5, 2, 3).astype(np.float32)
    feeds = {"input": normal(2, 3, 4), "target": class_targets((2, 4), 3),
             "weight": weight}
    model = one_node_model(node, feeds, 13, symbolic=[("input", 0, "N"), ("target", 0, "N")])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (2, 5, 1):
        feeds = {"input": normal(batch, 3, 4, seed=batch),
                 "target": class_targets((batch, 4), 3, seed=batch), "weight": weight}
        got = loaded(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
        np.testing.assert_allclose(got, session.run(None, feeds)[0], rtol=1e-5, atol=1e-6)


# ---- reductions ----

REDUCTIONS = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
# (axes, keepdims, noop_with_empty_axes)
REDUCE_FORMS = [([1], 1, 0), ([0, 2], 0, 0), ([-1], 0, 0), ([], 1, 0), ([], 0, 0),
                ([], 1, 1), ([-3, -2], 1, 0)]


def reduce_input(op, dtype):
    x = normal(3, 4, 2, dtype=dtype)
    return np.abs(x) + 0.1 if op == "ReduceLogSum" else x  # log of a positive sum


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("form", REDUCE_FORMS, ids=[str(f) for f in REDUCE_FORMS])
def test_reductions_with_axes_as_input_opset_18(tmp_path, op, form):
    axes, keepdims, noop = form
    feeds = {"x": reduce_input(op, np.float32)}
    axes_init = numpy_helper.from_array(np.array(axes, np.int64), "axes")
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims,
                            noop_with_empty_axes=noop)
    check(tmp_path, node, feeds, opset=18, initializers=[axes_init])


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("form", [([1], 1), ([0, -1], 0), (None, 0)])
def test_reductions_with_axes_as_attribute_float64(tmp_path, op, form):
    axes, keepdims = form
    feeds = {"x": reduce_input(op, np.float64)}
    attrs = {"keepdims": keepdims} | ({"axes": axes} if axes is not None else {})
    check(tmp_path, helper.make_node(op, ["x"], ["y"], **attrs), feeds, opset=13)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions_keep_their_dtype(tmp_path, op, dtype):
    # ReduceLogSum: the log of a positive sum. ReduceLogSumExp: ONNX Runtime
    # adds the integer max to the truncated log of the shifted sum, which
    # truncates -2.56 to -3 where ONNX's reference (and kiln) give -2; they
    # agree on positive results.
    low = 1 if op in ("ReduceLogSum", "ReduceLogSumExp") else -6
    feeds = {"x": np.arange(low, low + 12).reshape(3, 4).astype(dtype)}
    check(tmp_path, helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0), feeds, opset=13)


def test_log_sum_exp_of_large_values_does_not_overflow(tmp_path):
    feeds = {"x": np.array([[1000.0, 1000.0], [-1000.0, 0.0]], np.float32)}
    node = helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1], keepdims=0)
    model = one_node_model(node, feeds, 13)
    got, _ = run_both(tmp_path, model, feeds)
    np.testing.assert_allclose(got[0], [1000.0 + np.log(2.0), 0.0], rtol=1e-6)


# ---- activations and normalizations ----

ACTIVATIONS = [
    ("Hardmax", {"axis": 0}, 13), ("Hardmax", {"axis": -2}, 13), ("Hardmax", {}, 13),
    ("Hardmax", {"axis": 1}, 11), ("Hardmax", {}, 11),
    ("Shrink", {"lambd": 0.3, "bias": 0.2}, 17), ("Shrink", {}, 17),
    ("ThresholdedRelu", {"alpha": 0.4}, 17), ("ThresholdedRelu", {"alpha": -0.5}, 17),
    ("Softsign", {}, 17), ("Celu", {"alpha": 2.0}, 17), ("Celu", {}, 17),
    ("HardSwish", {}, 17), ("Mish", {}, 18),
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("MeanVarianceNormalization", {"axes": [1]}, 13),
    ("MeanVarianceNormalization", {"axes": [0, 1, 2]}, 13),
    ("MeanVarianceNormalization", {}, 13),
    ("LRN", {"size": 3, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, 13), ("LRN", {"size": 5}, 13),
    ("LpNormalization", {"p": 1, "axis": 0}, 13), ("LpNormalization", {}, 13),
    ("LpNormalization", {"axis": 1}, 13),
]


# ONNX Runtime's CPU provider runs these in float64 too; the others are
# checked in float64 in kiln against ONNX Runtime in float32.
ORT_FLOAT64 = {"Shrink", "Mish", "LpNormalization"}


def check_float64_against_float32(tmp_path, node, feeds, opset, rtol=1e-4, atol=1e-5):
    """kiln in float64 against ONNX Runtime in float32 on the same values."""
    single = {k: v.astype(np.float32) for k, v in feeds.items()}
    path = tmp_path / "float32.onnx"
    onnx.save(one_node_model(node, single, opset), path)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, single)
    path = tmp_path / "float64.onnx"
    onnx.save(one_node_model(node, feeds, opset), path)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
    assert got.dtype == np.float64 and got.shape == want[0].shape
    np.testing.assert_allclose(got, want[0], rtol=rtol, atol=atol)


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS,
                         ids=[f"{op}-{attrs}-{opset}" for op, attrs, opset in ACTIVATIONS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_match_onnx_runtime(tmp_path, op, attrs, opset, dtype):
    x = normal(3, 4, 2, 3, dtype=dtype)
    if op == "LpNormalization":
        x[0, 0] = 0  # a zero norm: 0, not NaN
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    if dtype == np.float64 and op not in ORT_FLOAT64:
        return check_float64_against_float32(tmp_path, node, {"x": x}, opset)
    check(tmp_path, node, {"x": x}, opset=opset)


def test_hardmax_picks_the_first_of_equal_maxima(tmp_path):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, -1, -9]], np.float32)
    check(tmp_path, helper.make_node("Hardmax", ["x"], ["y"]), {"x": x}, opset=13)


def test_shrink_of_integers(tmp_path):
    x = np.arange(-4, 5).astype(np.int32)
    check(tmp_path, helper.make_node("Shrink", ["x"], ["y"], lambd=1.5, bias=1.0), {"x": x})


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 2, 3, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_normalization(tmp_path, shape, dtype):
    feeds = {"x": normal(*shape, dtype=dtype), "scale": normal(shape[1], dtype=dtype, seed=3),
             "bias": normal(shape[1], dtype=dtype, seed=4)}
    node = helper.make_node("InstanceNormalization", list(feeds), ["y"], epsilon=1e-3)
    if dtype == np.float64:
        return check_float64_against_float32(tmp_path, node, feeds, 17)
    check(tmp_path, node, feeds, rtol=1e-4, atol=1e-5)


# ONNX Runtime runs LRN of odd sizes over 4-D inputs only. ONNX's reference
# implementation is the oracle for even sizes (4-D only too), PyTorch's
# LocalResponseNorm (the same window for odd sizes) for other ranks.
@pytest.mark.parametrize("size", [1, 2, 4, 6])
def test_lrn_of_even_sizes_matches_onnx_reference(tmp_path, size):
    from onnx.reference import ReferenceEvaluator
    x = normal(6, 6, 3, 2)  # N == C: the reference loops over range(N) for the channels
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.5, beta=0.6, bias=1.5)
    model = one_node_model(node, {"x": x}, 13)
    onnx.save(model, tmp_path / "model.onnx")
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = kiln.onnx.load(tmp_path / "model.onnx")(kiln.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [1, 3, 5])
@pytest.mark.parametrize("shape", [(2, 5, 3), (1, 6, 2, 2, 2)])
def test_lrn_of_other_ranks_matches_pytorch(tmp_path, size, shape):
    torch = pytest.importorskip("torch")
    x = normal(*shape)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.5, beta=0.6, bias=1.5)
    onnx.save(one_node_model(node, {"x": x}, 13), tmp_path / "model.onnx")
    norm = torch.nn.LocalResponseNorm(size, alpha=0.5, beta=0.6, k=1.5)
    want = norm(torch.from_numpy(x)).numpy()
    got = kiln.onnx.load(tmp_path / "model.onnx")(kiln.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_lrn_with_a_symbolic_batch(tmp_path):
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.1)
    model = one_node_model(node, {"x": normal(2, 5, 3, 2)}, 13, symbolic=[("x", 0, "N")])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (2, 4):
        x = normal(batch, 5, 3, 2, seed=batch)
        np.testing.assert_allclose(loaded(kiln.from_numpy(x)).numpy(),
                                   session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


# ---- generators ----

@pytest.mark.parametrize("attrs", [{}, {"k": 1}, {"k": -2}, {"k": 5}, {"dtype": DOUBLE},
                                   {"dtype": INT32, "k": 1}])
@pytest.mark.parametrize("shape,dtype", [((3, 3), np.float32), ((2, 5), np.int64),
                                         ((4, 2), np.float64)])
def test_eye_like(tmp_path, attrs, shape, dtype):
    feeds = {"x": np.zeros(shape, dtype)}
    check(tmp_path, helper.make_node("EyeLike", ["x"], ["y"], **attrs), feeds)


@pytest.mark.parametrize("types", [(np.float32, np.float64), (np.float64, np.float32),
                                   (np.float32, np.int64), (np.int32, np.float32),
                                   (np.int64, np.int32)])
def test_cast_like(tmp_path, types):
    source, like = types
    feeds = {"x": (normal(3, 4) * 10).astype(source), "like": np.zeros(1, like)}
    check(tmp_path, helper.make_node("CastLike", ["x", "like"], ["y"]), feeds, opset=15)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size,periodic,datatype", [(10, 1, FLOAT), (7, 0, DOUBLE),
                                                    (1, 1, FLOAT), (2, 0, FLOAT)])
def test_windows(tmp_path, op, size, periodic, datatype):
    size_init = numpy_helper.from_array(np.array(size, np.int64), "size")
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic, output_datatype=datatype)
    check(tmp_path, node, {}, opset=17, initializers=[size_init], atol=1e-6)


RANDOM_OPS = [("RandomUniformLike", {"low": -2.0, "high": 3.0}, "x"),
              ("RandomUniformLike", {"dtype": DOUBLE}, "x"),
              ("RandomNormalLike", {"mean": 5.0, "scale": 0.5}, "x"),
              ("Bernoulli", {}, "p"), ("Bernoulli", {"dtype": DOUBLE}, "p")]


@pytest.mark.parametrize("op,attrs,input_name", RANDOM_OPS,
                         ids=[f"{op}-{attrs}" for op, attrs, _ in RANDOM_OPS])
def test_random_ops_draw_the_shape_dtype_and_range_onnx_runtime_draws(tmp_path, op, attrs,
                                                                      input_name):
    x = np.random.default_rng(0).uniform(0, 1, (200, 50)).astype(np.float32)
    node = helper.make_node(op, [input_name], ["y"], **attrs)
    model = one_node_model(node, {input_name: x}, 15)
    got, want = run_both(tmp_path, model, {input_name: x})
    got, want = got[0], want[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    if op == "RandomUniformLike":
        low, high = attrs.get("low", 0.0), attrs.get("high", 1.0)
        assert got.min() >= low and got.max() < high
        assert abs(got.mean() - (low + high) / 2) < 0.05 * (high - low)
    elif op == "RandomNormalLike":
        assert abs(got.mean() - attrs["mean"]) < 0.05 and abs(got.std() - attrs["scale"]) < 0.05
    else:
        assert set(np.unique(got)) <= {0.0, 1.0}
        assert abs(got.mean() - x.mean()) < 0.03  # each a draw of probability x


def test_random_ops_draw_anew_on_every_call(tmp_path):
    # The input is a Constant node: known at import, yet the draw must not be.
    shape = helper.make_node("Constant", [], ["x"],
                             value=numpy_helper.from_array(np.zeros(100, np.float32)))
    draws = [helper.make_node("RandomUniformLike", ["x"], ["u"]),
             helper.make_node("RandomNormalLike", ["x"], ["n"]),
             helper.make_node("Bernoulli", ["half"], ["b"])]
    half = helper.make_node("Constant", [], ["half"],
                            value=numpy_helper.from_array(np.full(100, 0.5, np.float32)))
    outputs = [helper.make_tensor_value_info(name, FLOAT, [100]) for name in "unb"]
    graph = helper.make_graph([shape, half, *draws], "g", [], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "model.onnx")
    loaded = kiln.onnx.load(tmp_path / "model.onnx")
    first, second = loaded(), loaded()
    for a, b in zip(first, second):
        assert not np.array_equal(a.numpy(), b.numpy())


# ---- symbolic sizes ----

# (node, opset, {input: (make(n) -> array, [(axis, symbol)])}): each input
# made at two sizes n, its listed axes symbolic in the file.
SYMBOLIC = [
    (helper.make_node("Hardmax", ["x"], ["y"], axis=0), 13,
     {"x": (lambda n: normal(n, 4, seed=n), [(0, "N")])}),
    (helper.make_node("Hardmax", ["x"], ["y"], axis=1), 11,
     {"x": (lambda n: normal(3, n, 2, seed=n), [(1, "N")])}),
    (helper.make_node("EyeLike", ["x"], ["y"], k=-1), 13,
     {"x": (lambda n: normal(n, n + 1), [(0, "N"), (1, "M")])}),
    (helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]), 13,
     {"x": (lambda n: normal(2, 3, n, seed=n), [(2, "N")]),
      "s": (lambda n: normal(3, seed=7), []), "b": (lambda n: normal(3, seed=8), [])}),
    (helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), 13,
     {"x": (lambda n: normal(n, 3, 2, n, seed=n), [(0, "N"), (3, "M")])}),
    (helper.make_node("LpNormalization", ["x"], ["y"], p=1), 13,
     {"x": (lambda n: normal(n, 3, seed=n), [(0, "N")])}),
    (helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], reduction="none",
                      ignore_index=1), 13,
     {"x": (lambda n: normal(n, 3, n + 1, seed=n), [(0, "N"), (2, "D")]),
      "t": (lambda n: class_targets((n, n + 1), 3, seed=n), [(0, "N"), (1, "D")]),
      "w": (lambda n: np.linspace(0.5, 1.5, 3).astype(np.float32), [])}),
    (helper.make_node("ReduceLogSumExp", ["x"], ["y"], keepdims=1), 13,
     {"x": (lambda n: normal(n, 3, seed=n), [(0, "N")])}),
    (helper.make_node("ReduceLogSumExp", ["x"], ["y"], keepdims=0), 13,
     {"x": (lambda n: normal(n, n, seed=n), [(0, "N"), (1, "M")])}),
    (helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[0, 2], keepdims=0), 13,
     {"x": (lambda n: normal(n, 2, n, seed=n), [(0, "N"), (2, "M")])}),
    (helper.make_node("ReduceL2", ["x"], ["y"], keepdims=1), 13,
     {"x": (lambda n: normal(n, 3, seed=n), [(0, "N")])}),
]


@pytest.mark.parametrize("node,opset,inputs", SYMBOLIC,
                         ids=[f"{n.op_type}-{i}" for i, (n, _, _) in enumerate(SYMBOLIC)])
def test_symbolic_sizes_import_once_and_run_at_several(tmp_path, node, opset, inputs):
    symbolic = [(name, axis, symbol) for name, (_, axes) in inputs.items()
                for axis, symbol in axes]
    feeds = {name: make(2) for name, (make, _) in inputs.items()}
    path = tmp_path / "model.onnx"
    onnx.save(one_node_model(node, feeds, opset, symbolic=symbolic), path)
    loaded = kiln.onnx.load(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (2, 5):
        feeds = {name: make(n) for name, (make, _) in inputs.items()}
        got = loaded(*[kiln.from_numpy(v) for v in feeds.values()]).numpy()
        want = session.run(None, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape, groups", [((2, 6, 5, 3), 3), ((1, 4, 7), 1), ((3, 8, 2, 2), 8)])
def test_group_normalization(tmp_path, opset, shape, groups):
    # Opset 18 scales and shifts per group, 21 per channel.
    params = groups if opset == 18 else shape[1]
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"],
                            num_groups=groups, epsilon=1e-3)
    model = one_node_model(node, {"x": normal(*shape)}, opset=opset, initializers=[
        numpy_helper.from_array(normal(params, seed=1), "scale"),
        numpy_helper.from_array(normal(params, seed=2), "bias")])
    model.ir_version = 10 if opset == 21 else 8
    got, want = run_both(tmp_path, model, {"x": normal(*shape)})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, attrs", [("RandomUniform", {"low": -2.0, "high": 3.0}),
                                       ("RandomNormal", {"mean": 1.0, "scale": 2.0})])
def test_random_draws_of_a_given_shape(tmp_path, op, attrs):
    # Random draws: ONNX Runtime's values cannot be reproduced, so the
    # check is the shape, the dtype, the distribution and fresh draws per call.
    node = helper.make_node(op, [], ["y"], shape=[200, 50], dtype=TensorProto.DOUBLE, **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_value_info("y", onnx.TypeProto())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "r.onnx")
    loaded = kiln.onnx.load(tmp_path / "r.onnx")
    first, second = loaded().numpy(), loaded().numpy()
    assert first.shape == (200, 50) and first.dtype == np.float64
    assert not np.array_equal(first, second)
    if op == "RandomUniform":
        assert first.min() >= -2.0 and first.max() < 3.0
        assert abs(first.mean() - 0.5) < 0.1
    else:
        assert abs(first.mean() - 1.0) < 0.1 and abs(first.std() - 2.0) < 0.1


def test_multinomial_draws_classes_by_their_log_probabilities(tmp_path):
    logits = np.log(np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]], np.float32) + 1e-30)
    node = helper.make_node("Multinomial", ["x"], ["y"], sample_size=400)
    model = one_node_model(node, {"x": logits})
    onnx.save(model, tmp_path / "m.onnx")
    drawn = kiln.onnx.load(tmp_path / "m.onnx")(kiln.from_numpy(logits)).numpy()
    assert drawn.shape == (2, 400) and drawn.dtype == np.int32  # ONNX's default dtype
    assert (drawn[0] == 1).all()
    assert set(np.unique(drawn[1])) == {0, 2} and abs((drawn[1] == 0).mean() - 0.5) < 0.1
