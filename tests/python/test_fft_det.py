"""kiln.fft (fft, ifft, rfft, irfft), kiln.stft and kiln.linalg.det against
PyTorch, values and gradients; and ONNX's DFT, STFT, MelWeightMatrix and Det
imported and run against ONNX Runtime (or, where it has no kernel, ONNX's
reference evaluator). Complex tensors are torch.view_as_real's form."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import kiln
from onnx_test_models import info, model_with

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def close(got, want, rtol=1e-9, atol=1e-9):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=rtol, atol=atol)


# ---- kiln.fft ----

@pytest.mark.parametrize("n", [None, 1, 5, 8, 12, 17])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_and_rfft_match_torch(n, norm):
    x = rand(3, 10)
    for dim in (-1, 0):
        want = torch.view_as_real(torch.fft.fft(torch.from_numpy(x), n=n, dim=dim, norm=norm))
        close(kiln.fft.fft(kiln.from_numpy(x), n=n, dim=dim, norm=norm), want)
        want = torch.view_as_real(torch.fft.rfft(torch.from_numpy(x), n=n, dim=dim, norm=norm))
        close(kiln.fft.rfft(kiln.from_numpy(x), n=n, dim=dim, norm=norm), want)


@pytest.mark.parametrize("n", [None, 3, 8, 11])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_ifft_and_irfft_match_torch(n, norm):
    spectrum = rand(4, 6, 2)
    z = torch.view_as_complex(torch.from_numpy(spectrum))
    for dim in (-1, 0):
        want = torch.view_as_real(torch.fft.ifft(z, n=n, dim=dim, norm=norm))
        close(kiln.fft.ifft(kiln.from_numpy(spectrum), n=n, dim=dim, norm=norm), want)
        want = torch.fft.irfft(z, n=n, dim=dim, norm=norm)
        close(kiln.fft.irfft(kiln.from_numpy(spectrum), n=n, dim=dim, norm=norm), want)


def test_fft_float32_long_lengths():
    for n in (1000, 1024, 4099):  # Bluestein, radix-2, a prime
        x = rand(2, n, dtype=np.float32)
        want = torch.view_as_real(torch.fft.fft(torch.from_numpy(x).double()))
        close(kiln.fft.fft(kiln.from_numpy(x)), want, rtol=1e-4, atol=2e-5 * np.sqrt(n))


def test_round_trips():
    x = kiln.from_numpy(rand(5, 9))
    close(kiln.fft.irfft(kiln.fft.rfft(x), n=9), x.numpy())
    close(kiln.fft.ifft(kiln.fft.fft(x))[..., 0], x.numpy())


@pytest.mark.parametrize("name", ["fft", "rfft", "ifft", "irfft"])
def test_fft_gradients_match_torch(name):
    complex_in = name in ("ifft", "irfft")
    x = rand(3, 7, 2) if complex_in else rand(3, 7)
    tx = torch.from_numpy(x).requires_grad_(True)
    fn = getattr(torch.fft, name)
    out = fn(torch.view_as_complex(tx) if complex_in else tx, n=9, norm="ortho")
    out = out if name == "irfft" else torch.view_as_real(out)
    seed = rand(*out.shape)
    (g_want,) = torch.autograd.grad(out, tx, torch.from_numpy(seed))
    kx = kiln.from_numpy(x).requires_grad_(True)
    kout = getattr(kiln.fft, name)(kx, n=9, norm="ortho")
    (g_got,) = kiln.autograd.grad(kout, kx, kiln.from_numpy(seed))
    close(g_got, g_want)


def test_fft_argument_errors():
    with pytest.raises(ValueError, match="view_as_real"):
        kiln.fft.ifft(kiln.ones(4, 3))
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        kiln.fft.fft(kiln.ones(4), norm="sideways")
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        kiln.fft.rfft(kiln.ones(4), n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        kiln.fft.fft(kiln.ones(4), dim=1)
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.fft\.fftn"):
        kiln.fft.fftn  # noqa: B018


def test_fft_compiles_to_the_eager_result():
    def spectrum_power(x):
        s = kiln.fft.rfft(x)
        return (s * s).sum(-1)

    x = kiln.from_numpy(rand(2, 16))
    close(kiln.compile(spectrum_power)(x), spectrum_power(x).numpy(), rtol=0, atol=0)


# ---- kiln.stft ----

STFT_FORMS = [
    dict(n_fft=16),
    dict(n_fft=16, hop_length=5, center=False),
    dict(n_fft=12, win_length=8, window="hann"),
    dict(n_fft=10, hop_length=3, win_length=7, normalized=True, pad_mode="constant"),
    dict(n_fft=8, window="hann", onesided=False),
]


@pytest.mark.filterwarnings("ignore:A window was not provided")
@pytest.mark.parametrize("form", STFT_FORMS, ids=lambda f: "-".join(map(str, f.values())))
@pytest.mark.parametrize("shape", [(100,), (2, 64)])
def test_stft_matches_torch(form, shape):
    form = dict(form)
    x = rand(*shape)
    window = None
    if form.pop("window", None) == "hann":
        window = np.hanning(form.get("win_length", form["n_fft"]) + 2)[1:-1].copy()
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = None if window is None else torch.from_numpy(window)
    want = torch.view_as_real(torch.stft(tx, window=tw, return_complex=True, **form))
    kx = kiln.from_numpy(x).requires_grad_(True)
    kw = None if window is None else kiln.from_numpy(window)
    got = kiln.stft(kx, window=kw, return_complex=False, **form)
    close(got, want)
    seed = rand(*want.shape)
    (g_want,) = torch.autograd.grad(want, tx, torch.from_numpy(seed))
    (g_got,) = kiln.autograd.grad(got, kx, kiln.from_numpy(seed))
    close(g_got, g_want)


def test_stft_refuses_complex_output_with_the_reason():
    with pytest.raises(ValueError, match="no complex dtypes"):
        kiln.stft(kiln.ones(64), 16, return_complex=True)
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        kiln.stft(kiln.ones(64), 16)


# ---- kiln.linalg.det ----

@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5, 5), (2, 2, 4, 4)])
def test_det_and_its_gradient_match_torch(shape):
    a = rand(*shape)
    ta = torch.from_numpy(a).requires_grad_(True)
    want = torch.linalg.det(ta)
    ka = kiln.from_numpy(a).requires_grad_(True)
    got = kiln.linalg.det(ka)
    close(got, want)
    close(kiln.det(ka), want)
    close(ka.det(), want)
    seed = rand(*want.shape)
    (g_want,) = torch.autograd.grad(want, ta, torch.from_numpy(seed))
    (g_got,) = kiln.autograd.grad(got, ka, kiln.from_numpy(seed))
    close(g_got, g_want)


def test_det_second_derivative_matches_torch():
    a = rand(3, 3)
    ta = torch.from_numpy(a).requires_grad_(True)
    (g,) = torch.autograd.grad(torch.linalg.det(ta), ta, create_graph=True)
    (gg_want,) = torch.autograd.grad((g * g).sum(), ta)
    ka = kiln.from_numpy(a).requires_grad_(True)
    (kg,) = kiln.autograd.grad(kiln.linalg.det(ka), ka, create_graph=True)
    (gg_got,) = kiln.autograd.grad((kg * kg).sum(), ka)
    close(gg_got, gg_want, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("matrix", [
    [[1.0, 2.0], [2.0, 4.0]],
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
    [[0.0, 0.0], [0.0, 1.0]],
    [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
])
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(matrix):
    # torch's first-order backward gives 0 here; its create_graph path (the SVD)
    # gives the true derivative, the cofactor matrix, which kiln gives always
    a = np.array(matrix)
    ta = torch.from_numpy(a).requires_grad_(True)
    (want,) = torch.autograd.grad(torch.linalg.det(ta), ta, create_graph=True)
    ka = kiln.from_numpy(a).requires_grad_(True)
    close(kiln.linalg.det(ka), np.array(0.0))
    (got,) = kiln.autograd.grad(kiln.linalg.det(ka), ka)
    close(got, want, rtol=1e-9, atol=1e-12)


def test_det_errors_name_the_shapes():
    with pytest.raises(RuntimeError, match=r"square matrices .* got shape \[2, 3\]"):
        kiln.linalg.det(kiln.ones(2, 3))
    with pytest.raises(TypeError, match="float32 or float64"):
        kiln.linalg.det(kiln.ones(2, 2, dtype=kiln.int64))


# ---- ONNX import ----

def run_both(tmp_path, model, feeds, reference=False, rtol=1e-5, atol=1e-5):
    """kiln's result and ONNX Runtime's (or the reference evaluator's)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    if reference:
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    got = kiln.onnx.load(path)(*[kiln.from_numpy(np.asarray(v)) for v in feeds.values()])
    got = list(got) if isinstance(got, tuple) else [got]
    for g, w in zip(got, want):
        assert g.numpy().shape == w.shape
        np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=atol)


def dft_model(attrs, opset, x_shape, with_axis_input=False):
    inputs = ["x", "n"] + (["axis"] if with_axis_input else [])
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    graph_inputs = [info("x", list(x_shape)), info("n", [], TensorProto.INT64)]
    if with_axis_input:
        graph_inputs.append(info("axis", [], TensorProto.INT64))
    model = model_with([node], graph_inputs, [info("y", None)], opset=opset)
    model.ir_version = 10 if opset >= 20 else 8
    return model


@pytest.mark.parametrize("attrs,n,parts", [
    ({"axis": 1}, 10, 1), ({"axis": 1}, 6, 2), ({"axis": 2, "inverse": 1}, 12, 2),
    ({"axis": 1, "onesided": 1}, 9, 1), ({"axis": -2}, 7, 2)])
def test_onnx_dft_opset17_matches_onnx_runtime(tmp_path, attrs, n, parts):
    feeds = {"x": rand(2, 8, 5, parts, dtype=np.float32), "n": np.array(n, np.int64)}
    run_both(tmp_path, dft_model(attrs, 17, feeds["x"].shape), feeds)


@pytest.mark.parametrize("attrs,n,axis,parts", [
    ({}, 8, -2, 2), ({"inverse": 1}, 5, 1, 2), ({"onesided": 1}, 8, 1, 1),
    ({"onesided": 1, "inverse": 1}, 8, 1, 2), ({"onesided": 1, "inverse": 1}, 7, -2, 2)])
def test_onnx_dft_opset20_matches_the_reference(tmp_path, attrs, n, axis, parts):
    # ONNX Runtime's DFT-20 lacks the irfft form, so ONNX's evaluator is the oracle
    feeds = {"x": rand(2, 5, 6, parts, dtype=np.float32), "n": np.array(n, np.int64),
             "axis": np.array(axis, np.int64)}
    model = dft_model(attrs, 20, feeds["x"].shape, with_axis_input=True)
    run_both(tmp_path, model, feeds, reference=True,
             rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length,step,with_window,frame_length", [
    (128, 8, False, 16), (100, 7, True, 20), (64, 16, True, None), (50, 4, False, 9)])
def test_onnx_stft_matches_onnx_runtime(tmp_path, length, step, with_window, frame_length):
    names = ["signal", "step", "window" if with_window else "",
             "frame_length" if frame_length else ""]
    while names[-1] == "":
        names.pop()
    inputs = [info("signal", [2, length, 1]), info("step", [], TensorProto.INT64)]
    feeds = {"signal": rand(2, length, 1, dtype=np.float32), "step": np.array(step, np.int64)}
    if with_window:
        inputs.append(info("window", [frame_length or 24]))
        feeds["window"] = np.hanning(frame_length or 24).astype(np.float32)
    if frame_length:
        inputs.append(info("frame_length", [], TensorProto.INT64))
        feeds["frame_length"] = np.array(frame_length, np.int64)
    model = model_with([helper.make_node("STFT", names, ["y"])], inputs, [info("y", None)])
    run_both(tmp_path, model, feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bins,dft,rate,low,high", [
    (8, 16, 8192, 0.0, 4096.0), (40, 512, 16000, 20.0, 7600.0), (13, 400, 22050, 300.0, 8000.0)])
def test_onnx_mel_weight_matrix_matches_onnx_runtime(tmp_path, bins, dft, rate, low, high):
    names = ["bins", "dft", "rate", "low", "high"]
    node = helper.make_node("MelWeightMatrix", names, ["y"])
    inputs = [info(n, [], TensorProto.INT64) for n in names[:3]]
    inputs += [info(n, [], TensorProto.FLOAT) for n in names[3:]]
    feeds = {"bins": np.array(bins, np.int64), "dft": np.array(dft, np.int64),
             "rate": np.array(rate, np.int64), "low": np.array(low, np.float32),
             "high": np.array(high, np.float32)}
    run_both(tmp_path, model_with([node], inputs, [info("y", None)]), feeds)


def test_onnx_det_imports_and_exports_one_to_one(tmp_path):
    model = model_with([helper.make_node("Det", ["x"], ["y"])], [info("x", [3, 2, 4, 4])],
                       [info("y", None)], opset=11)
    run_both(tmp_path, model, {"x": rand(3, 2, 4, 4, dtype=np.float32)}, rtol=1e-4, atol=1e-5)
    path = tmp_path / "exported.onnx"
    kiln.onnx.export(lambda a: kiln.linalg.det(a) * 2, (kiln.ones(2, 3, 3),), path)
    assert [n.op_type for n in onnx.load(path).graph.node][0] == "Det"
