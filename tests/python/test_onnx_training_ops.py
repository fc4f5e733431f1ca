"""ONNX's ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum) imported
into kiln: ONNX's backend cases, and hand-made steps (defaults, T > 0, several
tensors, float64) against ONNX's reference evaluator, which implements the
spec's pseudo code (ONNX Runtime has no CPU kernels for them)."""
import pathlib
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402

DOMAIN = "ai.onnx.preview.training"
BACKEND_CASES = ["test_adagrad", "test_adagrad_multiple", "test_adam", "test_momentum",
                 "test_momentum_multiple", "test_nesterov_momentum"]
RNG = np.random.default_rng(3)


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_onnx_backend_case_passes(name):
    status, detail = conformance.run_case(conformance.DATA / "node" / name)
    assert status == "pass", detail


def test_adam_multiple_follows_the_spec_where_its_data_do_not():
    # Debian's data for test_adam_multiple were computed with epsilon=1e-2, which
    # the model's node does not set (conformance.DATA_CONTRADICTS_SPEC): kiln
    # matches ONNX's reference evaluator on the model as shipped, and the
    # shipped outputs once the node says epsilon=1e-2.
    folder = conformance.DATA / "node" / "test_adam_multiple"
    model = onnx.load(folder / "model.onnx")
    graph_inputs = list(model.graph.input)
    inputs = conformance.read_all(folder / "test_data_set_0", "input", graph_inputs)
    shipped = conformance.read_all(folder / "test_data_set_0", "output", model.graph.output)
    feeds = {v.name: np.array(a) for v, a in zip(graph_inputs, inputs)}
    got = kiln.onnx.load(folder / "model.onnx")(*[kiln.from_numpy(a) for a in feeds.values()])
    for g, want in zip(got, ReferenceEvaluator(model).run(None, feeds)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    assert conformance.run_case(folder)[0] == "unsupported"
    model.graph.node[0].attribute.append(helper.make_attribute("epsilon", 1e-2))
    fixed = ReferenceEvaluator(model).run(None, feeds)
    for f, want in zip(fixed, shipped):
        np.testing.assert_allclose(f, want, rtol=1e-6)


def step_model(op, tensors, accumulators, attrs, dtype):
    """R, T, then X_i, G_i and each accumulator's _i for `tensors` shapes."""
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    groups = ["X", "G"] + accumulators
    names = [f"{g}{i}" for g in groups for i in range(len(tensors))]
    outputs = [f"{g}{i}_new" for g in ["X"] + accumulators for i in range(len(tensors))]
    shapes = {f"{g}{i}": s for g in groups for i, s in enumerate(tensors)}
    node = helper.make_node(op, ["R", "T"] + names, outputs, domain=DOMAIN, **attrs)
    inputs = [helper.make_tensor_value_info("R", elem, []),
              helper.make_tensor_value_info("T", TensorProto.INT64, [])]
    inputs += [helper.make_tensor_value_info(n, elem, shapes[n]) for n in names]
    outs = [helper.make_tensor_value_info(n, elem, None) for n in outputs]
    graph = helper.make_graph([node], "step", inputs, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    feeds = {"R": np.array(0.05, dtype), "T": np.array(0, np.int64)}
    for n in names:
        values = RNG.standard_normal(shapes[n]).astype(dtype)
        # accumulators of squared gradients are nonnegative
        feeds[n] = np.abs(values) if n[0] == "H" else values
    return model, feeds


def check_step(tmp_path, model, feeds, rtol=1e-5):
    path = tmp_path / "step.onnx"
    onnx.save(model, path)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(v) for v in feeds.values()])
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.numpy().dtype == w.dtype and g.numpy().shape == w.shape
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("t", [0, 1, 7])
@pytest.mark.parametrize("attrs", [
    {}, {"decay_factor": 0.3, "epsilon": 1e-3, "norm_coefficient": 0.01}])
def test_adagrad_step(tmp_path, t, attrs):
    model, feeds = step_model("Adagrad", [(3,), (2, 4)], ["H"], attrs, np.float32)
    feeds["T"] = np.array(t, np.int64)
    check_step(tmp_path, model, feeds)


@pytest.mark.parametrize("t", [0, 1, 5])
@pytest.mark.parametrize("attrs", [
    {}, {"alpha": 0.8, "beta": 0.95, "epsilon": 1e-4, "norm_coefficient": 0.02,
         "norm_coefficient_post": 0.1}])
def test_adam_step(tmp_path, t, attrs):
    model, feeds = step_model("Adam", [(4,), (2, 3)], ["V", "H"], attrs, np.float32)
    feeds["T"] = np.array(t, np.int64)
    check_step(tmp_path, model, feeds)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("t", [0, 3])
def test_momentum_step(tmp_path, mode, t):
    attrs = {"alpha": 0.9, "beta": 0.5, "mode": mode, "norm_coefficient": 0.01}
    model, feeds = step_model("Momentum", [(5,), (2, 2)], ["V"], attrs, np.float32)
    feeds["T"] = np.array(t, np.int64)
    check_step(tmp_path, model, feeds)


def test_float64_steps_keep_their_dtype(tmp_path):
    for op, accumulators, attrs in [
            ("Adagrad", ["H"], {"norm_coefficient": 0.1}), ("Adam", ["V", "H"], {}),
            ("Momentum", ["V"], {"alpha": 0.9, "beta": 0.1, "mode": "nesterov",
                                 "norm_coefficient": 0.0})]:
        model, feeds = step_model(op, [(6,)], accumulators, attrs, np.float64)
        feeds["T"] = np.array(2, np.int64)
        check_step(tmp_path, model, feeds, rtol=1e-12)


def test_bad_forms_are_refused_naming_the_node(tmp_path):
    model, _ = step_model("Momentum", [(2,)], ["V"], {"alpha": 0.9, "beta": 0.1,
                                                      "mode": "heavy", "norm_coefficient": 0.0},
                          np.float32)
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    with pytest.raises(ValueError, match="mode 'heavy'"):
        kiln.onnx.load(path)
    model, _ = step_model("Adagrad", [(2,)], ["H"], {}, np.float32)
    model.graph.node[0].input.pop()  # X, G and no H
    onnx.save(model, path)
    with pytest.raises(RuntimeError, match="groups of equally many tensors"):
        kiln.onnx.load(path)
