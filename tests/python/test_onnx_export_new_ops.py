"""ONNX export of the ops added for issue 23, where the op table's rows
(test_onnx_export.py) cannot show it: whole models in ONNX Runtime at
several batch sizes, the forms ONNX Runtime refuses that the export writes
another way, the refusals, and round trips kiln -> ONNX -> kiln.onnx.load."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln
import kiln.nn.functional as F
from kiln import nn


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def op_types(path):
    return {node.op_type for node in onnx.load(str(path)).graph.node}


def run_both(path, inputs):
    """The ONNX file run in ONNX Runtime and loaded back into kiln."""
    run = session(path)
    feeds = {i.name: x.numpy() for i, x in zip(run.get_inputs(), inputs)}
    loaded = kiln.onnx.load(path)
    with kiln.no_grad():
        back = loaded(*inputs)
    back = list(back) if isinstance(back, tuple) else [back]
    return run.run(None, feeds), [b.numpy() for b in back]


def assert_close(got, want, exact=False):
    if exact or np.asarray(want).dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)


def generator():
    """DCGAN's generator: a latent [N, 16, 1, 1] to a [N, 3, 16, 16] image."""
    return nn.Sequential(
        nn.ConvTranspose2d(16, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(True),
        nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
        nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh())


def test_dcgan_generator_runs_in_onnx_runtime_at_any_batch_and_loads_back(tmp_path):
    kiln.manual_seed(0)
    net = generator()
    with kiln.no_grad():  # running statistics other than 0 and 1
        for _ in range(3):
            net(kiln.randn(8, 16, 1, 1))
    net.eval()
    path = tmp_path / "generator.onnx"
    kiln.onnx.export(net, kiln.randn(2, 16, 1, 1), path, input_names=["z"],
                     dynamic_axes={"z": {0: "batch"}})
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert {"ConvTranspose", "BatchNormalization", "Relu", "Tanh"} <= op_types(path)
    run = session(path)
    for batch in (1, 5):
        z = kiln.randn(batch, 16, 1, 1)
        with kiln.no_grad():
            want = net(z).numpy()
        assert want.shape == (batch, 3, 16, 16)
        (got,) = run.run(None, {"z": z.numpy()})
        assert_close(got, want)
    z = kiln.randn(2, 16, 1, 1)
    with kiln.no_grad():
        assert_close(kiln.onnx.load(path)(z).numpy(), net(z).numpy())


class ResampleNet(nn.Module):
    """Every padding mode and every upsampling form in one small CNN."""

    def __init__(self):
        super().__init__()
        self.reflect = nn.ReflectionPad2d(1)
        self.conv1 = nn.Conv2d(2, 4, 3)
        self.up_nearest = nn.Upsample(scale_factor=2, mode="nearest")
        self.replicate = nn.ReplicationPad2d((1, 0, 2, 1))
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.up_bilinear = nn.Upsample(size=(11, 9), mode="bilinear", align_corners=False)
        self.crop = nn.ConstantPad2d((-1, 2, 0, -2), 0.5)
        self.up_corners = nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True)

    def forward(self, x):
        x = self.up_nearest(self.conv1(self.reflect(x)))
        x = self.up_bilinear(self.conv2(self.replicate(x)))
        x = F.pad(self.crop(x), (2, 1, 1, 2), mode="circular")
        x = F.interpolate(self.up_corners(x), scale_factor=0.7, mode="nearest-exact")
        return F.interpolate(x, size=(5, 13), mode="nearest")


def test_padding_and_upsampling_modes_in_a_cnn_at_any_batch(tmp_path):
    net = ResampleNet().eval()
    path = tmp_path / "resample.onnx"
    kiln.onnx.export(net, kiln.randn(2, 2, 6, 5), path, dynamic_axes={"x": {0: "batch"}})
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert {"Pad", "Resize", "Concat"} <= op_types(path)
    run = session(path)
    for batch in (1, 3):
        x = kiln.randn(batch, 2, 6, 5)
        with kiln.no_grad():
            want = net(x).numpy()
        (got,) = run.run(None, {run.get_inputs()[0].name: x.numpy()})
        assert_close(got, want)
    x = kiln.randn(1, 2, 6, 5)
    with kiln.no_grad():
        assert_close(kiln.onnx.load(path)(x).numpy(), net(x).numpy())


# ONNX Runtime refuses an output_padding of the stride or more, which
# PyTorch allows below the dilation: written as less padding at the end,
# and zeros (plus the bias) past it.
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_conv_transpose_output_padding_past_the_stride(tmp_path, padding):
    net = nn.ConvTranspose2d(3, 2, 3, stride=1, padding=padding, output_padding=(1, 2),
                             dilation=3)
    x = kiln.randn(2, 3, 5, 4)
    traced = kiln.jit.trace(net, (x,))
    path = tmp_path / "convt.onnx"
    kiln.onnx.export(traced, None, path)
    with kiln.no_grad():
        want = net(x).numpy()
    (got,), (back,) = run_both(path, [x])
    assert got.shape == want.shape
    assert_close(got, want)
    assert_close(back, want)


SPECIAL = [1.5, -2.5, 0.5, -0.0, float("nan"), float("inf"), -float("inf"), 3.0]


def specials():
    return kiln.tensor([SPECIAL, SPECIAL[::-1]])


def ints():
    return kiln.tensor([[7, -7, 3, -9], [5, 0, -4, 8]])


def divisors():
    return kiln.tensor([[2, 2, -3, 4], [-1, 3, 5, -2]])


# (name, function, inputs): each is exported, run in ONNX Runtime and loaded
# back into kiln, and all three agree.
ROUND_TRIPS = [
    ("triu", lambda x: kiln.triu(x, 1), lambda: [kiln.randn(2, 4, 5)]),
    ("tril", lambda x: kiln.tril(x, -1), lambda: [kiln.randn(4, 3)]),
    ("cumsum_ints", lambda x: kiln.cumsum(x, 1), lambda: [ints()]),
    ("cumsum", lambda x: kiln.cumsum(x, 0), lambda: [kiln.randn(5, 3)]),
    ("cumprod", lambda x: kiln.cumprod(x, -1), lambda: [kiln.randn(3, 6)]),
    ("topk", lambda x: kiln.topk(x, 3, dim=0), lambda: [kiln.randn(6, 4)]),
    ("sort_descending", lambda x: kiln.sort(x, dim=1, descending=True),
     lambda: [kiln.randn(3, 7)]),
    ("argsort", lambda x: kiln.argsort(x), lambda: [kiln.randn(3, 5)]),
    ("float_tests", lambda x: (kiln.isnan(x), kiln.isinf(x), kiln.isfinite(x)),
     lambda: [specials()]),
    ("nan_to_num", lambda x: kiln.nan_to_num(x, nan=0.5, posinf=7.0), lambda: [specials()]),
    ("roundings", lambda x: (kiln.floor(x), kiln.ceil(x), kiln.round(x), kiln.trunc(x),
                             kiln.sign(x)), lambda: [specials()]),
    ("float_divisions", lambda a, b: (kiln.fmod(a, b), kiln.remainder(a, b),
                                      kiln.floor_divide(a, b)),
     lambda: [kiln.randn(3, 4) * 5, kiln.randn(3, 4)]),
    ("int_divisions", lambda a, b: (kiln.fmod(a, b), kiln.remainder(a, b),
                                    kiln.floor_divide(a, b)), lambda: [ints(), divisors()]),
    ("flip", lambda x: kiln.flip(x, [0, 2]), lambda: [kiln.randn(2, 3, 4)]),
    ("roll", lambda x: kiln.roll(x, [1, -2], [0, 1]), lambda: [kiln.randn(3, 5)]),
    ("roll_flat", lambda x: kiln.roll(x, 4), lambda: [kiln.randn(3, 5)]),
    ("masked_fill", lambda x, m: x.masked_fill(m, -1.5),
     lambda: [kiln.randn(3, 4), kiln.randn(1, 4) > 0]),
    ("bool_bitwise", lambda a, b: (kiln.bitwise_and(a, b), kiln.bitwise_not(a)),
     lambda: [kiln.randn(3, 4) > 0, kiln.randn(3, 4) > 0]),
    ("int_bitwise_not", lambda x: kiln.bitwise_not(x), lambda: [ints()]),
    ("pad_modes", lambda x: (F.pad(x, (1, 2, 0, 1), mode="reflect"), F.pad(x, (2, 1, 1, 0),
                             mode="replicate"), F.pad(x, (1, -1, -1, 2), value=3.0)),
     lambda: [kiln.randn(1, 2, 4, 5)]),
    ("upsample", lambda x: (F.interpolate(x, scale_factor=2.5, mode="nearest"),
                            F.interpolate(x, size=(7, 3), mode="bilinear"),
                            F.interpolate(x, size=(5, 8), mode="bilinear", align_corners=True),
                            F.interpolate(x, size=(6, 9), mode="nearest-exact")),
     lambda: [kiln.randn(1, 2, 4, 5)]),
    ("libm", lambda x: (kiln.log1p(x.abs()), kiln.expm1(x), kiln.atan2(x, x.flip(0)),
                        kiln.hypot(x, x * 2), kiln.logaddexp(x, -x)),
     lambda: [kiln.randn(4, 3)]),
]


@pytest.mark.parametrize("name, fn, make", ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
def test_export_runs_in_onnx_runtime_and_loads_back(tmp_path, name, fn, make):
    inputs = make()
    traced = kiln.jit.trace(fn, tuple(inputs))
    path = tmp_path / f"{name}.onnx"
    kiln.onnx.export(traced, None, path)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    with kiln.no_grad():
        want = fn(*inputs)
    want = [w.numpy() for w in (want if isinstance(want, tuple) else [want])]
    got, back = run_both(path, inputs)
    assert len(got) == len(back) == len(want)
    for g, b, w in zip(got, back, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert_close(g, w)
        assert b.dtype == w.dtype
        assert_close(b, w)


def test_one_to_one_translations_import_as_the_same_ops(tmp_path):
    def f(x):
        return (kiln.triu(x, 1), kiln.cumsum(x, 1), kiln.topk(x, 2)[0], kiln.isnan(x),
                kiln.floor(x), F.pad(x.unsqueeze(0), (1, 1), mode="reflect"))

    x = kiln.randn(3, 4)
    kiln.onnx.export(kiln.jit.trace(f, (x,)), None, tmp_path / "f.onnx")
    ops = [n.op for n in kiln.onnx.load(tmp_path / "f.onnx").graph.nodes]
    for op in ("triu", "cumsum", "topk", "isnan", "floor", "pad"):
        assert op in ops, ops


def test_what_the_opsets_cannot_express_is_refused_by_name(tmp_path):
    a, b = ints(), divisors()
    with pytest.raises(RuntimeError, match=r"bitwise_and of int64 needs opset 18 \(BitwiseAnd\)"):
        kiln.onnx.export(lambda a, b: kiln.bitwise_and(a, b), (a, b), tmp_path / "a.onnx")
    x, index, src = kiln.zeros(4, 3), kiln.tensor([0, 2, 0]), kiln.ones(3, 3)
    with pytest.raises(RuntimeError, match="index_add needs opset 16 or later"):
        kiln.onnx.export(lambda x, i, s: kiln.index_add(x, 0, i, s), (x, index, src),
                         tmp_path / "b.onnx", opset_version=13)
    with pytest.raises(RuntimeError, match="multinomial without replacement of 2 samples"):
        kiln.onnx.export(lambda w: kiln.multinomial(w, 2), (kiln.ones(2, 5),),
                         tmp_path / "c.onnx")
    with pytest.raises(RuntimeError, match="roll: needs a concrete size of a rolled dim"):
        kiln.onnx.export(lambda x: kiln.roll(x, 1, 0), (kiln.randn(3, 2),), tmp_path / "d.onnx",
                         dynamic_axes={"x": {0: "batch"}})


def test_symbolic_batch_with_sorts_rolls_and_cumulative_products(tmp_path):
    def f(x):
        values, order = kiln.sort(x, dim=0)  # its k is the batch, read at run time
        return values, order, kiln.roll(x, 2, 1), kiln.cumprod(x, 1)

    path = tmp_path / "f.onnx"
    kiln.onnx.export(f, (kiln.randn(3, 5),), path, dynamic_axes={"x": {0: "batch"}})
    run = session(path)
    for batch in (1, 4):
        x = kiln.randn(batch, 5)
        for got, want in zip(run.run(None, {"x": x.numpy()}), f(x)):
            assert_close(got, want.numpy())


def test_index_add_and_triangles_at_the_opsets_that_have_them(tmp_path):
    x, index, src = kiln.randn(4, 3), kiln.tensor([0, 2, 0]), kiln.randn(3, 3)
    path = tmp_path / "index_add.onnx"
    kiln.onnx.export(lambda x, i, s: kiln.index_add(x, 0, i, s), (x, index, src), path,
                     opset_version=16)
    (got,) = session(path).run(None, {"x": x.numpy(), "i": index.numpy(), "s": src.numpy()})
    assert_close(got, kiln.index_add(x, 0, index, src).numpy())
    # Opset 13 has no Trilu: a Where over a constant mask.
    path = tmp_path / "triu13.onnx"
    kiln.onnx.export(lambda x: kiln.triu(x, -1), (x,), path, opset_version=13)
    assert "Trilu" not in op_types(path)
    (got,) = session(path).run(None, {"x": x.numpy()})
    assert_close(got, kiln.triu(x, -1).numpy(), exact=True)


def test_random_samplers_draw_what_they_promise_in_onnx_runtime(tmp_path):
    def draws(p, w):
        return (kiln.randint(3, 9, (200,)), kiln.randperm(50), kiln.bernoulli(p),
                kiln.multinomial(w, 40, replacement=True))

    p = kiln.tensor([0.0, 1.0, 0.0, 1.0])
    w = kiln.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]])
    path = tmp_path / "draws.onnx"
    kiln.onnx.export(kiln.jit.trace(draws, (p, w)), None, path)
    ints_, perm, coins, picks = session(path).run(None, {"p": p.numpy(), "w": w.numpy()})
    assert ints_.dtype == np.int64 and ints_.min() >= 3 and ints_.max() <= 8
    assert len(set(ints_.tolist())) > 3  # not one value
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))
    assert not np.array_equal(perm, np.arange(50))
    np.testing.assert_array_equal(coins, p.numpy())
    np.testing.assert_array_equal(picks, np.array([[1] * 40, [0] * 40]))
