"""torch.onnx.export's and torch.jit.trace's keywords, as PyTorch programs
pass them, and traced outputs that hold None."""
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln
from kiln import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.drop = nn.Dropout(0.5)

    def forward(self, x, y):
        return self.drop(self.bn(self.fc(x))) + y


def ort_run(model_bytes, feeds):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return sess, sess.run(None, feeds)


def test_names_axes_and_a_file_object_as_torch_passes_them():
    net = Net()
    x, y = kiln.randn(5, 4), kiln.randn(5, 3)
    buffer = io.BytesIO()
    kiln.onnx.export(net, (x, y), buffer, input_names=["features", "offset"],
                     output_names=["scores"], opset_version=17,
                     dynamic_axes={"features": {0: "batch"}, "offset": {0: "batch"},
                                   "scores": {0: "batch"}},
                     do_constant_folding=True, export_params=True, dynamo=False,
                     verbose=False)
    assert net.training  # exported in eval mode, then put back
    sess, (got,) = ort_run(buffer.getvalue(), {"features": np.ones((2, 4), np.float32),
                                               "offset": np.zeros((2, 3), np.float32)})
    assert [i.name for i in sess.get_inputs()] == ["features", "offset"]
    assert sess.get_inputs()[0].shape == ["batch", 4]
    assert [o.name for o in sess.get_outputs()] == ["scores"]
    net.eval()
    want = net(kiln.ones(2, 4), kiln.zeros(2, 3))
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_training_mode_preserve_keeps_dropout_and_batch_statistics(tmp_path):
    net = Net().eval()
    path = tmp_path / "preserve.onnx"
    kiln.onnx.export(net, (kiln.randn(5, 4), kiln.randn(5, 3)), path,
                     training=kiln.onnx.TrainingMode.PRESERVE, verify=True)
    assert not net.training
    net.train()
    with pytest.raises(RuntimeError, match="batch_norm in training mode"):
        kiln.onnx.export(net, (kiln.randn(5, 4), kiln.randn(5, 3)), path,
                         training=kiln.onnx.TrainingMode.PRESERVE)
    assert net.training


def test_export_params_false_and_initializers_as_inputs(tmp_path):
    net = nn.Linear(4, 2)
    x = kiln.randn(3, 4)
    kiln.onnx.export(net, (x,), tmp_path / "p.onnx", export_params=False, input_names=["x"])
    model = onnx.load(tmp_path / "p.onnx")
    assert not model.graph.initializer
    assert [i.name for i in model.graph.input] == ["x", "weight", "bias"]
    _, (got,) = ort_run(model.SerializeToString(), {
        "x": x.numpy(), "weight": net.weight.detach().numpy(),
        "bias": net.bias.detach().numpy()})
    np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-5, atol=1e-6)

    kiln.onnx.export(net, (x,), tmp_path / "k.onnx", keep_initializers_as_inputs=True)
    model = onnx.load(tmp_path / "k.onnx")
    assert {t.name for t in model.graph.initializer} == {"weight", "bias"}
    assert {"weight", "bias"} <= {i.name for i in model.graph.input}
    _, (got,) = ort_run(model.SerializeToString(), {model.graph.input[0].name: x.numpy()})
    np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_export_refuses_what_it_cannot_do(tmp_path):
    net = nn.Linear(4, 2)
    with pytest.raises(TypeError, match="keyword inputs"):
        kiln.onnx.export(net, (kiln.randn(1, 4), {"scale": kiln.ones(1)}), tmp_path / "a.onnx")
    with pytest.raises(TypeError, match="unexpected keyword arguments colour"):
        kiln.onnx.export(net, (kiln.randn(1, 4),), tmp_path / "a.onnx", colour="red")
    with pytest.raises(TypeError, match="`f`"):
        kiln.onnx.export(net, (kiln.randn(1, 4),))
    with pytest.raises(ValueError, match="2 input names given for a graph of 1 inputs"):
        kiln.onnx.export(net, (kiln.randn(1, 4),), tmp_path / "a.onnx", input_names=["a", "b"])


def heads(x):
    return x.relu(), None, {"mean": x.mean(), "aux": None}


def test_traced_outputs_may_hold_none(tmp_path):
    x = kiln.randn(3, 4)
    traced = kiln.jit.trace(heads, (x,))
    out, nothing, extra = traced(x)
    assert nothing is None and extra["aux"] is None
    np.testing.assert_array_equal(out.numpy(), x.relu().numpy())
    traced.save(tmp_path / "heads.kiln")
    loaded = kiln.jit.load(tmp_path / "heads.kiln")
    assert loaded(x)[1] is None and loaded(x)[2]["aux"] is None

    class WithNone(nn.Module):
        def forward(self, x):
            return x * 2, None

    model = WithNone().hybridize()
    for _ in range(2):
        doubled, none = model(x)
        assert none is None
        np.testing.assert_array_equal(doubled.numpy(), (x * 2).numpy())


def test_trace_accepts_torch_keywords_and_checks_when_asked():
    net = nn.Linear(4, 2)
    x = kiln.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = kiln.jit.trace(net, x, check_trace=True, check_inputs=[(kiln.randn(3, 4),)],
                                check_tolerance=1e-5, strict=False)
    np.testing.assert_array_equal(traced(x).detach().numpy(), net(x).detach().numpy())

    noisy = nn.Dropout(0.5)  # in training mode: a rerun draws other numbers
    with pytest.warns(kiln.jit.TracerWarning, match="does not match"):
        kiln.jit.trace(noisy, kiln.ones(50), check_trace=True)
    with pytest.raises(TypeError, match="example_kwarg_inputs"):
        kiln.jit.trace(net, example_kwarg_inputs={"input": x})

