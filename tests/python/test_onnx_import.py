"""ONNX import: round trips through export, a pretrained model no one here
wrote against ONNX Runtime, and malformed or hostile files refused."""
import importlib.util
import os
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from kiln import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))
import conformance  # noqa: E402


def test_scenario_8_export_then_load(tmp_path):
    net = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 2))
    x = kiln.randn(1, 512)
    kiln.onnx.export(net, x, tmp_path / "mlp.onnx")
    m = kiln.onnx.load(tmp_path / "mlp.onnx")
    with kiln.no_grad():
        assert kiln.allclose(m(x), net(x))
    assert [n.op for n in m.graph.nodes] == ["linear_act", "linear_act", "linear"]
    assert m.graph.find_param("0.weight") is not None  # initializers keep their names


def test_lenet_round_trip_with_a_symbolic_batch(tmp_path):
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2),
                        nn.Conv2d(6, 16, 5), nn.Sigmoid(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(16 * 5 * 5, 10), nn.LogSoftmax(dim=1))
    kiln.onnx.export(net, kiln.randn(1, 1, 28, 28), tmp_path / "lenet.onnx",
                     dynamic_axes={"input": {0: "batch"}})
    m = kiln.onnx.load(tmp_path / "lenet.onnx")  # the batch stays symbolic
    assert m.graph.inputs[0].shape[1:] == (1, 28, 28)
    assert isinstance(m.graph.inputs[0].shape[0], str)
    fixed = kiln.onnx.load(tmp_path / "lenet.onnx", input_shapes={"input": [5, 1, 28, 28]})
    assert fixed.graph.inputs[0].shape == (5, 1, 28, 28)
    for batch in (5, 1, 3):
        x = kiln.randn(batch, 1, 28, 28)
        with kiln.no_grad():
            want = net(x).numpy()
            np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-5, atol=1e-6)
        if batch == 5:
            np.testing.assert_allclose(fixed(x).numpy(), want, rtol=1e-5, atol=1e-6)


def rapidocr_classifier():
    spec = importlib.util.find_spec("rapidocr_onnxruntime")  # finds, does not import
    assert spec is not None, "rapidocr-onnxruntime is installed by scripts/setup.sh"
    path = (pathlib.Path(spec.submodule_search_locations[0]) / "models" /
            "ch_ppocr_mobile_v2.0_cls_infer.onnx")
    assert path.exists(), path
    return path


def test_pretrained_mobilenet_v3_text_direction_classifier_matches_onnx_runtime():
    path = rapidocr_classifier()  # symbolic sizes: test_onnx_import_symbolic.py
    model = kiln.onnx.load(path, input_shapes={"x": [6, 3, 48, 192]})
    x = np.random.RandomState(0).rand(6, 3, 48, 192).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = model(kiln.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert (got.argmax(1) == want.argmax(1)).all()


def model_with(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_unsupported_ops_and_types_are_named(tmp_path):
    model = model_with([helper.make_node("StringNormalizer", ["x"], ["y"])], [float_info("x", [2])],
                       [float_info("y", [2])])
    onnx.save(model, tmp_path / "strings.onnx")
    with pytest.raises(RuntimeError, match="op 'StringNormalizer' .* has no kiln translation"):
        kiln.onnx.load(tmp_path / "strings.onnx")
    model = model_with([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])])
    onnx.save(model, tmp_path / "half.onnx")
    with pytest.raises(TypeError, match="FLOAT16, which kiln does not have"):
        kiln.onnx.load(tmp_path / "half.onnx")


def test_malformed_files_are_refused(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage that is not a model" * 3)
    with pytest.raises(RuntimeError, match="onnx import"):
        kiln.onnx.load(tmp_path / "junk.onnx")
    with pytest.raises(RuntimeError, match="cannot open"):
        kiln.onnx.load(tmp_path / "absent.onnx")
    bad = numpy_helper.from_array(np.zeros(3, np.float32), "w")
    bad.dims[:] = [4]  # 3 values, shape [4]
    model = model_with([helper.make_node("Add", ["x", "w"], ["y"])], [float_info("x", [4])],
                       [float_info("y", [4])], [bad])
    onnx.save(model, tmp_path / "short.onnx")
    with pytest.raises(RuntimeError, match="12 bytes of data, its type needs 16"):
        kiln.onnx.load(tmp_path / "short.onnx")
    rng = np.random.RandomState(1)
    good = model_with([helper.make_node("Relu", ["x"], ["y"])], [float_info("x", [4])],
                      [float_info("y", [4])]).SerializeToString()
    for _trial in range(200):  # random damage: an error or a model, never a crash
        data = bytearray(good)
        for _ in range(3):
            data[rng.randint(len(data))] = rng.randint(256)
        (tmp_path / "damaged.onnx").write_bytes(bytes(data))
        try:
            kiln.onnx.load(tmp_path / "damaged.onnx")
        except (RuntimeError, TypeError, ValueError, IndexError):
            pass


def external_model(tmp_path, location):
    weight = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    model = model_with([helper.make_node("Add", ["x", "w"], ["y"])], [float_info("x", [4])],
                       [float_info("y", [4])], [weight])
    (tmp_path / "model").mkdir(exist_ok=True)
    onnx.save(model, tmp_path / "model" / "m.onnx")
    return tmp_path / "model" / "m.onnx"


def test_external_data_stays_inside_the_model_folder(tmp_path):
    np.arange(4, dtype=np.float32).tofile(tmp_path / "outside.bin")
    path = external_model(tmp_path, "weights.bin")
    np.arange(4, dtype=np.float32).tofile(tmp_path / "model" / "weights.bin")
    m = kiln.onnx.load(path)
    np.testing.assert_array_equal(m(kiln.zeros(4)).numpy(), np.arange(4, dtype=np.float32))
    with pytest.raises(RuntimeError, match="leaves the model's folder"):
        kiln.onnx.load(external_model(tmp_path, "../outside.bin"))
    with pytest.raises(RuntimeError, match="must be a relative path"):
        kiln.onnx.load(external_model(tmp_path, str(tmp_path / "outside.bin")))
    os.symlink(tmp_path / "outside.bin", tmp_path / "model" / "link.bin")
    with pytest.raises(RuntimeError, match="resolves outside the model's folder"):
        kiln.onnx.load(external_model(tmp_path, "link.bin"))


PASSING = conformance.listed_passing()


@pytest.mark.parametrize("name", PASSING)
def test_listed_onnx_backend_case_still_passes(name):
    status, detail = conformance.run_case(conformance.DATA / name)
    assert status == "pass", detail


def test_onnx_backend_pass_rates():
    assert conformance.DATA.exists(), "libonnx-testdata is installed by scripts/setup.sh"
    rows = conformance.summary(conformance.run_all())
    print(rows)
    assert rows["node"]["pass_rate"] >= 0.90  # issue 24's goal
    assert rows["pytorch-converted"]["pass_rate"] >= 0.95
    assert rows["pytorch-operator"]["pass_rate"] >= 0.95
    for row in rows.values():  # no case gives a wrong answer
        assert row.get("mismatch", 0) == 0 and row.get("error", 0) == 0, row
    assert len(PASSING) >= 1000


def test_untyped_outputs_are_tensors(tmp_path):
    # ONNX lets a graph leave its outputs' types out, or empty; ORT runs it.
    outputs = [helper.make_value_info("y", onnx.TypeProto()), onnx.ValueInfoProto(name="z")]
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])]
    onnx.save(model_with(nodes, [float_info("x", [3])], outputs), tmp_path / "untyped.onnx")
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    y, z = kiln.onnx.load(tmp_path / "untyped.onnx")(kiln.from_numpy(x))
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(z.numpy(), -x)
