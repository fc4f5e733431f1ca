"""Sizes the data decides (Note [Data-dependent output shapes] in
src/kiln/ops/data_dependent.h): ONNX models with NonZero, Compress, Unique
and NonMaxSuppression against ONNX Runtime, one import run on inputs with
different counts; traced functions against eager, and torch as the oracle
of kiln.nonzero and kiln.unique."""
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import kiln
from onnx_test_models import const, info, matches_onnx_runtime, model_with


def check(model, tmp_path, feeds_list):
    """One kiln import and one ONNX Runtime session, equal on every feed."""
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return matches_onnx_runtime(path, feeds_list)

def test_nonzero_feeds_gather_reshape_and_shape_arithmetic(tmp_path):
    # idx = NonZero(x) [2, n]; picked = x[idx[0], idx[1]]; reshaped to
    # [n, 1] by a shape computed from Shape(idx); doubled; and a concat that
    # makes the rows 2*n.
    nodes = [
        helper.make_node("NonZero", ["x"], ["idx"]),
        helper.make_node("Transpose", ["idx"], ["idx_t"]),
        helper.make_node("GatherND", ["x", "idx_t"], ["picked"]),
        helper.make_node("Shape", ["idx"], ["s"]),
        helper.make_node("Slice", ["s", "one", "two"], ["n"]),
        helper.make_node("Concat", ["n", "one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["picked", "shape"], ["column"]),
        helper.make_node("Mul", ["column", "two_f"], ["doubled"]),
        helper.make_node("Concat", ["column", "doubled"], ["both"], axis=0),
        helper.make_node("Gather", ["idx", "one_scalar"], ["cols"], axis=0),
    ]
    model = model_with(nodes, [info("x", [3, 4])],
                       [info("both", None), info("cols", None, TensorProto.INT64)],
                       [const("one", [1]), const("two", [2]), const("one_scalar", 1),
                        const("two_f", [2.0], np.float32)])
    rng = np.random.RandomState(0)
    feeds = []
    for keep in (0.5, 0.0, 1.0, 0.2):
        x = rng.randn(3, 4).astype(np.float32)
        x[rng.rand(3, 4) >= keep] = 0
        feeds.append([x])
    check(model, tmp_path, feeds)


def test_nonzero_of_a_symbolic_input(tmp_path):
    nodes = [helper.make_node("NonZero", ["x"], ["idx"]),
             helper.make_node("ReduceSum", ["idx"], ["total"], keepdims=0)]
    model = model_with(nodes, [info("x", ["batch", 3], TensorProto.INT32)],
                       [info("idx", None, TensorProto.INT64),
                        info("total", None, TensorProto.INT64)])
    rng = np.random.RandomState(1)
    check(model, tmp_path, [[rng.randint(0, 2, (b, 3)).astype(np.int32)] for b in (1, 5, 0, 8)])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(tmp_path, axis):
    kwargs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Compress", ["x", "condition"], ["y"], **kwargs)]
    model = model_with(nodes, [info("x", [3, 4]), info("condition", [3], TensorProto.BOOL)],
                       [info("y", None)], opset=11)
    rng = np.random.RandomState(2)
    check(model, tmp_path, [[rng.randn(3, 4).astype(np.float32), np.array(c)]
                            for c in ([True, False, True], [False] * 3, [True] * 3)])


@pytest.mark.parametrize("attrs", [{}, {"sorted": 0}, {"axis": 0}, {"axis": 1, "sorted": 0},
                                   {"axis": -1}])
def test_unique_all_outputs(tmp_path, attrs):
    nodes = [helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)]
    outputs = [info("y", None, TensorProto.INT64)] + [
        info(name, None, TensorProto.INT64) for name in ("indices", "inverse", "counts")]
    model = model_with(nodes, [info("x", [4, 3], TensorProto.INT64)], outputs, opset=11)
    rng = np.random.RandomState(3)
    feeds = [[rng.randint(0, high, (4, 3)).astype(np.int64)] for high in (2, 3, 100)]
    feeds.append([np.array([[1, 2, 1], [3, 4, 3], [1, 2, 1], [0, 0, 0]], dtype=np.int64)])
    check(model, tmp_path, feeds)


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(tmp_path, center):
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"],
                              ["selected"], center_point_box=center)]
    model = model_with(nodes, [info("boxes", [2, 8, 4]), info("scores", [2, 3, 8]),
                               info("max", [1], TensorProto.INT64), info("iou", [1]),
                               info("score", [1])],
                       [info("selected", None, TensorProto.INT64)], opset=11)
    rng = np.random.RandomState(4)
    feeds = []
    for limit, iou, score in ((3, 0.5, 0.2), (10, 0.1, 0.0), (0, 0.5, 0.0), (2, 0.9, 0.95)):
        boxes = rng.rand(2, 8, 4).astype(np.float32) * 4
        scores = rng.rand(2, 3, 8).astype(np.float32)
        feeds.append([boxes, scores, np.array([limit]), np.array([iou], np.float32),
                      np.array([score], np.float32)])
    check(model, tmp_path, feeds)


def test_kiln_nonzero_and_unique_match_torch():
    rng = np.random.RandomState(5)
    x = rng.randint(-2, 3, (4, 5)).astype(np.float32)
    np.testing.assert_array_equal(kiln.nonzero(kiln.tensor(x)).numpy(),
                                  torch.nonzero(torch.from_numpy(x)).numpy())
    got = kiln.unique(kiln.tensor(x), return_inverse=True, return_counts=True)
    want = torch.unique(torch.from_numpy(x), return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def nonzero_then_unique(x):
    idx = kiln.nonzero(x)  # [n, 2]
    rows = idx[:, 0]
    values, counts = kiln.unique(rows, return_counts=True)
    return idx * 2, values, counts


def inputs_with_counts():
    rng = np.random.RandomState(6)
    out = []
    for keep in (0.5, 0.0, 1.0, 0.3):
        x = rng.randn(4, 3).astype(np.float32)
        x[rng.rand(4, 3) >= keep] = 0
        out.append(kiln.tensor(x))
    return out


def test_traced_nonzero_and_unique_match_eager_at_every_count():
    xs = inputs_with_counts()
    traced = kiln.jit.trace(nonzero_then_unique, xs[0])
    assert "nonzero" in str(traced.graph) and "unique" in str(traced.graph)
    for x in xs:
        for got, want in zip(traced(x), nonzero_then_unique(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_compiled_nonzero_serves_every_count_from_one_entry():
    compiled = kiln.compile(nonzero_then_unique)
    for x in inputs_with_counts():
        for got, want in zip(compiled(x), nonzero_then_unique(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert len(compiled.cache_info().misses) == 1, compiled.cache_info()


def sum_of_nonzero_squares(x):
    flat = x.reshape(-1)
    picked = kiln.index_select(flat, 0, kiln.nonzero(flat).reshape(-1))
    return (picked * picked).sum()


def test_traced_graph_gives_eager_gradients_and_saves(tmp_path):
    traced = kiln.jit.trace(sum_of_nonzero_squares, inputs_with_counts()[0])
    path = tmp_path / "model.kiln"
    traced.save(str(path))
    loaded = kiln.jit.load(str(path))
    for x in inputs_with_counts():
        got_x = x.detach().clone().requires_grad_()
        want_x = x.detach().clone().requires_grad_()
        got, want = traced(got_x), sum_of_nonzero_squares(want_x)
        got.backward()
        want.backward()
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(got_x.grad.numpy(), want_x.grad.numpy())
        np.testing.assert_array_equal(loaded(x).numpy(), want.detach().numpy())


def test_an_assumption_on_two_counts_is_checked_when_they_are_known(tmp_path):
    # Add of two Compress results: the import assumes their counts agree (a
    # guard nz0 == nz1), as ONNX Runtime requires when it runs.
    nodes = [helper.make_node("Compress", ["x", "c1"], ["a"], axis=0),
             helper.make_node("Compress", ["x", "c2"], ["b"], axis=0),
             helper.make_node("Add", ["a", "b"], ["y"])]
    model = model_with(nodes, [info("x", [4]), info("c1", [4], TensorProto.BOOL),
                               info("c2", [4], TensorProto.BOOL)], [info("y", None)], opset=11)
    x = np.arange(4, dtype=np.float32)
    two = [x, np.array([1, 0, 1, 0], bool), np.array([0, 1, 0, 1], bool)]
    loaded = check(model, tmp_path, [two])
    assert "guard nz0 == nz1" in str(loaded.graph)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    three = [x, np.array([1, 0, 1, 0], bool), np.array([0, 1, 1, 1], bool)]
    with pytest.raises(Exception):  # noqa: B017  (ONNX Runtime's own error type)
        session.run(None, dict(zip(["x", "c1", "c2"], three)))
    with pytest.raises(ValueError, match=r"guard nz0 == nz1 .*nz0 = 2, nz1 = 3"):
        loaded(*[kiln.from_numpy(a) for a in three])


def test_symbolic_input_sizes_and_counts_share_one_entry():
    def columns_hit(x):
        idx = kiln.nonzero(x)
        values, counts = kiln.unique(idx[:, 1], return_counts=True)
        return idx.float().sum(0), values, counts
    compiled = kiln.compile(columns_hit, dynamic=True)
    rng = np.random.RandomState(7)
    for rows in (3, 5, 1, 8, 0):
        x = kiln.tensor(rng.randint(0, 2, (rows, 4)).astype(np.float32))
        for got, want in zip(compiled(x), columns_hit(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert len(compiled.cache_info().misses) == 1, compiled.cache_info()


def test_a_branch_counting_its_own_nonzeros_keeps_the_outer_count(tmp_path):
    # Regression: an If branch is built apart from the graph around it, and
    # its NonZero took the outer NonZero's symbol name; the branch's count
    # then stood for the outer one in the sizes the branch read (ORT 5, kiln 1).
    ones = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    then = helper.make_graph(
        [helper.make_node("NonZero", ["y"], ["j"]),
         helper.make_node("Shape", ["idx"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["ones"], value=ones),
         helper.make_node("ReduceSum", ["ones"], ["outer_count"], keepdims=0),
         helper.make_node("ReduceSum", ["j"], ["inner_sum"], keepdims=0)],
        "then", [], [info("outer_count", None), info("inner_sum", None, TensorProto.INT64)])
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["outer_count"],
                          value=helper.make_tensor("a", TensorProto.FLOAT, [], [0.0])),
         helper.make_node("Constant", [], ["inner_sum"],
                          value=helper.make_tensor("b", TensorProto.INT64, [], [0]))],
        "else", [], [info("outer_count", None), info("inner_sum", None, TensorProto.INT64)])
    model = model_with(
        [helper.make_node("NonZero", ["x"], ["idx"]),
         helper.make_node("If", ["c"], ["outer_count", "inner_sum"], then_branch=then,
                          else_branch=other)],
        [info("x", [6]), info("y", [6]), info("c", [], TensorProto.BOOL)],
        [info("outer_count", None), info("inner_sum", None, TensorProto.INT64)])
    x = np.array([1, 1, 1, 1, 1, 0], np.float32)
    y = np.array([1, 0, 0, 0, 0, 0], np.float32)
    check(model, tmp_path, [(x, y, np.array(True)), (y, x, np.array(True)),
                            (x, y, np.array(False))])


def test_a_factory_sized_by_a_count_is_not_reported_as_constant():
    # Regression: kiln.ones(n) with n a count the data decides was reported
    # as "does not depend on the inputs", though each call sizes it anew.
    def f(x):
        x[x > 0.5]  # a masked read before: its count's symbol is then known
        return kiln.ones(kiln.nonzero(x > 0.5).shape[0]).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = kiln.jit.trace(f, (kiln.tensor([1.0, -1.0, 2.0]),))
    for x in (kiln.tensor([1.0, -1.0, 2.0]), kiln.tensor([0.0, 0.9, 0.1])):
        np.testing.assert_allclose(traced(x).numpy(), f(x).numpy())
