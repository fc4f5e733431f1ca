"""The PyTorch programs of examples/pytorch run on kiln with only their imports
changed (examples/pytorch/_swap.py). Each test loads a program twice, under
torch and under kiln, starts both models from torch's initial weights, feeds
both the same data (made with NumPy; random draws the frameworks would make
differently come from one NumPy stream), and compares the losses step by step
and the results after training. Then the kiln model is hybridized (equal to
eager), traced and exported by the program's own export(), and the ONNX file
is run in ONNX Runtime."""
import functools
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch

import kiln

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch"
sys.path.insert(0, str(EXAMPLES))
import _swap  # noqa: E402  (found through the path above)

LOSS_RTOL = 1e-4


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # On a machine busy with other work, torch's threads waiting for each
    # other make these small models many times slower; results do not change.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache
def programs(name):
    """(the program under torch, the same program under kiln)."""
    return _swap.load(name, "torch"), _swap.load(name, "kiln")


def initial_state(torch_model):
    return {k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()}


def copy_weights(torch_model, kiln_model):
    kiln_model.load_state_dict(initial_state(torch_model))


def check_hybridized_training(model, start, train, eager_losses):
    """Training the kiln model hybridized (forward recorded once and run
    compiled, backward through it) from the same start gives eager's losses."""
    model.load_state_dict(start)
    model.hybridize()
    losses = train(model)
    assert model.cache_info().hits >= len(losses) - 1  # the steps after the first ran compiled
    model.hybridize(active=False)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)


def as_numpy(value):
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def outputs(value):
    """A model's output (a tensor, or tuples of them) as a flat list of arrays."""
    if isinstance(value, (tuple, list)):
        return [array for v in value for array in outputs(v)]
    return [as_numpy(value)]


def assert_same_state(kiln_model, torch_model, atol=1e-4, skip=()):
    """Parameters and buffers (BatchNorm's running statistics) after training.
    skip: names of parameters whose true gradient is zero (a bias that a
    normalization or a softmax cancels): Adam turns their rounding noise
    into full-size steps of either sign, in either framework."""
    theirs = torch_model.state_dict()
    for name, value in kiln_model.state_dict().items():
        if any(part in name for part in skip):
            continue
        np.testing.assert_allclose(as_numpy(value), as_numpy(theirs[name]), rtol=1e-3,
                                   atol=atol, err_msg=name)


class SameNoise:
    """Stands in for a program's `torch` module: everything passes through,
    except randn and randn_like, which draw from one NumPy stream per test,
    so that the torch and the kiln run see the same noise."""

    def __init__(self, module, rng):
        self._module, self._rng = module, rng

    def __getattr__(self, name):
        return getattr(self._module, name)

    def _draw(self, shape):
        return self._module.from_numpy(self._rng.standard_normal(shape).astype(np.float32))

    def randn(self, *size, **kwargs):
        return self._draw(tuple(size[0]) if isinstance(size[0], (tuple, list)) else size)

    def randn_like(self, tensor, **kwargs):
        return self._draw(tuple(tensor.shape))


@pytest.fixture
def same_noise(monkeypatch):
    def install(torch_program, kiln_program, seed=0):
        monkeypatch.setattr(torch_program, "torch",
                            SameNoise(torch_program.torch, np.random.default_rng(seed)))
        monkeypatch.setattr(kiln_program, "torch",
                            SameNoise(kiln_program.torch, np.random.default_rng(seed)))
    return install


def check_hybridize(model, example):
    """The kiln model in eval mode, hybridized, equals eager; returns eager's outputs."""
    model.eval()
    with kiln.no_grad():
        eager = outputs(model(*example))
        model.hybridize()
        compiled = outputs(model(*example))
        model.hybridize(active=False)
    for got, want in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return eager


def check_export(program, model, example, eager, tmp_path, atol=1e-4):
    """The program's export(): its traced module and its ONNX file, run in
    ONNX Runtime, give the eager outputs."""
    path = tmp_path / "model.onnx"
    traced = program.export(model, example[0] if len(example) == 1 else example, str(path))
    for got, want in zip(outputs(traced(*example)), eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: as_numpy(x) for i, x in zip(session.get_inputs(), example, strict=True)}
    for got, want in zip(session.run(None, feeds), eager):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)
    return session


def check_compiled_and_onnx(program, model, example, tmp_path):
    example = example if isinstance(example, tuple) else (example,)
    check_export(program, model, example, check_hybridize(model, example), tmp_path)


def test_swap_rewrites_the_imports_and_nothing_else():
    source = ("import torch\nimport torch.nn as nn\nfrom torch import optim\n"
              "from torch.utils.data import DataLoader  # batches\nx = torch.zeros(2)\n"
              "    import torch  # in a function\n")
    assert _swap.to_kiln(source) == (
        "import kiln as torch\nimport kiln.nn as nn\nfrom kiln import optim\n"
        "from kiln.utils.data import DataLoader  # batches\nx = torch.zeros(2)\n"
        "    import kiln as torch  # in a function\n")
    with pytest.raises(ValueError, match="line 1: write `import torch.x as y`"):
        _swap.to_kiln("import torch.nn\n")


def test_every_program_imports_torch_only_in_swappable_forms():
    names = sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))
    assert len(names) >= 10, names
    for name in names:
        source = (EXAMPLES / f"{name}.py").read_text()
        swapped = _swap.to_kiln(source).splitlines()
        changed = [b for a, b in zip(source.splitlines(), swapped) if a != b]
        assert changed and all("kiln" in line and "import" in line for line in changed), name
        assert not re.search(r"import kiln|from kiln|kiln\.", source), \
            f"{name}.py uses kiln; it must be plain PyTorch"


def test_cnn_classifier(tmp_path):
    pt, kl = programs("cnn_classifier")
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(dropout=0.0), kl.build_model(dropout=0.0)
    copy_weights(torch_model, kiln_model)
    start = initial_state(torch_model)
    (tx, ty, tx_test, ty_test), (kx, ky, kx_test, ky_test) = pt.make_data(), kl.make_data()
    torch_losses = pt.train(torch_model, pt.make_loader(tx, ty, shuffle=False), max_steps=6)
    kiln_losses = kl.train(kiln_model, kl.make_loader(kx, ky, shuffle=False), max_steps=6)
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    check_hybridized_training(
        kl.build_model(dropout=0.0), start,
        lambda m: kl.train(m, kl.make_loader(kx, ky, shuffle=False), max_steps=6), kiln_losses)
    # The convolutions' biases feed BatchNorm, which subtracts them again
    # (its running means follow them).
    assert_same_state(kiln_model, torch_model, skip=("features.0.bias", "features.3.bias",
                                                     "running_mean"))
    np.testing.assert_allclose(kl.evaluate(kiln_model, kx_test, ky_test),
                               pt.evaluate(torch_model, tx_test, ty_test), rtol=1e-3)
    check_compiled_and_onnx(kl, kiln_model, kx_test[:4], tmp_path)


def test_transformer_lm(tmp_path):
    pt, kl = programs("transformer_lm")
    (t_data, vocab), (k_data, _) = pt.make_data(), kl.make_data()
    torch.manual_seed(0)
    torch_model = pt.build_model(len(vocab), dropout=0.0)
    kiln_model = kl.build_model(len(vocab), dropout=0.0)
    copy_weights(torch_model, kiln_model)
    start = initial_state(torch_model)
    torch_losses = pt.train(torch_model, t_data, len(vocab), steps=5)
    kiln_losses = kl.train(kiln_model, k_data, len(vocab), steps=5)
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    check_hybridized_training(kl.build_model(len(vocab), dropout=0.0), start,
                              lambda m: kl.train(m, k_data, len(vocab), steps=5), kiln_losses)
    (t_val, _), (k_val, _) = pt.make_data(seed=1), kl.make_data(seed=1)
    np.testing.assert_allclose(kl.evaluate(kiln_model, k_val[:64], len(vocab)),
                               pt.evaluate(torch_model, t_val[:64], len(vocab)), rtol=1e-4)
    check_compiled_and_onnx(kl, kiln_model, k_val[:16], tmp_path)


def test_gpt(tmp_path):
    pt, kl = programs("gpt")
    (t_data, chars), (k_data, _) = pt.make_data(), kl.make_data()
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(len(chars)), kl.build_model(len(chars))
    copy_weights(torch_model, kiln_model)
    start = initial_state(torch_model)
    torch_losses = pt.train(torch_model, pt.make_batches(t_data, 5))
    kiln_losses = kl.train(kiln_model, kl.make_batches(k_data, 5))
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    check_hybridized_training(kl.build_model(len(chars)), start,
                              lambda m: kl.train(m, kl.make_batches(k_data, 5)), kiln_losses)
    # The tied weight stays one tensor through training.
    assert kiln_model.lm_head.weight is kiln_model.transformer.wte.weight
    assert_same_state(kiln_model, torch_model)
    # top_k=1 leaves one token to draw, so sampling is greedy in both.
    prompt = [pt.encode("First ", chars)]
    torch_text = torch_model.generate(pt.torch.tensor(prompt), 12, top_k=1)
    kiln_text = kiln_model.generate(kl.torch.tensor(prompt), 12, top_k=1)
    assert kiln_text.tolist() == torch_text.tolist()
    sampled = kiln_model.generate(kl.torch.tensor(prompt), 12, top_k=5,
                                  generator=kl.torch.Generator().manual_seed(0))
    assert sampled.shape == (1, 18) and 0 <= int(sampled.min()) <= int(sampled.max()) < len(chars)
    check_compiled_and_onnx(kl, kiln_model, k_data[:32].unsqueeze(0), tmp_path)


def test_char_lstm(tmp_path):
    pt, kl = programs("char_lstm")
    (t_in, t_out, chars), (k_in, k_out, _) = pt.make_data(), kl.make_data()
    torch.manual_seed(0)
    torch_model = pt.build_model(len(chars), dropout=0.0)
    kiln_model = kl.build_model(len(chars), dropout=0.0)
    copy_weights(torch_model, kiln_model)
    torch_losses = pt.train(torch_model, t_in, t_out, epochs=1)
    kiln_losses = kl.train(kiln_model, k_in, k_out, epochs=1)
    assert len(kiln_losses) == 5
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    assert_same_state(kiln_model, torch_model)
    generator = kl.torch.Generator().manual_seed(0)
    text = kl.sample(kiln_model, chars, "it was ", 10, generator=generator)
    assert text.startswith("it was ") and len(text) == 17 and set(text) <= set(chars)


def test_char_lstm_traces_and_exports_with_its_hidden_state(tmp_path):
    _, kl = programs("char_lstm")
    inputs, _, chars = kl.make_data()
    model = kl.build_model(len(chars))
    x = inputs[:2, :16]
    example = (x, model.init_hidden(2))  # forward(x, (h0, c0))
    eager = check_hybridize(model, example)
    path = tmp_path / "model.onnx"
    traced = kl.export(model, x, str(path))
    for got, want in zip(outputs(traced(*example)), eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = dict(zip(["x", "h0", "c0"], outputs(example)))
    for got, want in zip(session.run(None, feeds), eager, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_vae(tmp_path, same_noise):
    pt, kl = programs("vae")
    same_noise(pt, kl)
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(), kl.build_model()
    copy_weights(torch_model, kiln_model)
    t_x, k_x = pt.make_data(), kl.make_data()
    torch_losses = pt.train(torch_model, pt.make_loader(t_x, shuffle=False), max_steps=6)
    kiln_losses = kl.train(kiln_model, kl.make_loader(k_x, shuffle=False), max_steps=6)
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    assert_same_state(kiln_model, torch_model)
    # The program exports the decoder, with a dynamic batch.
    z = kiln.from_numpy(np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
    eager = check_hybridize(kl.Decoder(kiln_model), (z,))
    session = check_export(kl, kiln_model, (z,), eager, tmp_path)
    (got,) = session.run(None, {"z": np.concatenate([z.numpy(), z.numpy()])})
    np.testing.assert_allclose(got, np.concatenate([eager[0], eager[0]]), atol=1e-5)


def test_dcgan(tmp_path, same_noise):
    pt, kl = programs("dcgan")
    same_noise(pt, kl)
    torch.manual_seed(0)
    (t_g, t_d), (k_g, k_d) = pt.build_models(), kl.build_models()
    copy_weights(t_g, k_g)
    copy_weights(t_d, k_d)
    t_images, k_images = pt.make_data(), kl.make_data()
    torch_history = pt.train(t_g, t_d, pt.make_loader(t_images, shuffle=False), max_steps=5)
    kiln_history = kl.train(k_g, k_d, kl.make_loader(k_images, shuffle=False), max_steps=5)
    np.testing.assert_allclose(kiln_history, torch_history, rtol=LOSS_RTOL, atol=1e-6)
    assert_same_state(k_g, t_g)
    assert_same_state(k_d, t_d)
    z = np.random.default_rng(1).standard_normal((4, 16, 1, 1)).astype(np.float32)
    check_compiled_and_onnx(kl, k_g, kiln.from_numpy(z), tmp_path)


def test_resnet(tmp_path):
    pt, kl = programs("resnet")
    torch.manual_seed(0)
    # zero_init_residual=False: residual branches that start at zero would
    # hide a wrong branch for these few steps.
    torch_model = pt.build_model(zero_init_residual=False)
    kiln_model = kl.build_model(zero_init_residual=False)
    copy_weights(torch_model, kiln_model)
    start = initial_state(torch_model)
    (t_x, t_y), (k_x, k_y) = pt.make_data(), kl.make_data()
    torch_losses = pt.train(torch_model, t_x[:192], t_y[:192], max_steps=3)
    kiln_losses = kl.train(kiln_model, k_x[:192], k_y[:192], max_steps=3)
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    check_hybridized_training(kl.build_model(zero_init_residual=False), start,
                              lambda m: kl.train(m, k_x[:192], k_y[:192], max_steps=3),
                              kiln_losses)
    assert_same_state(kiln_model, torch_model)
    assert kl.accuracy(kiln_model, k_x[1400:], k_y[1400:]) == pytest.approx(
        pt.accuracy(torch_model, t_x[1400:], t_y[1400:]), abs=0.01)
    # A model built by the program keeps its own init: kaiming_normal_ of
    # fan_out, BatchNorm weights at 1 and the last of each branch at 0.
    fresh = kl.build_model()
    conv = fresh.layer2[0].conv1.weight.detach().numpy()
    assert conv.std() == pytest.approx(np.sqrt(2 / (32 * 9)), rel=0.1)
    assert np.all(fresh.layer1[0].bn2.weight.detach().numpy() == 0)
    check_compiled_and_onnx(kl, kiln_model, k_x[:8], tmp_path)


def test_custom_autograd(tmp_path):
    pt, kl = programs("custom_autograd")
    assert pt.check_gradients() and kl.check_gradients()
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(), kl.build_model()
    copy_weights(torch_model, kiln_model)
    torch_losses, torch_scales = pt.train(torch_model, pt.make_data(6))
    kiln_losses, kiln_scales = kl.train(kiln_model, kl.make_data(6))
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    np.testing.assert_allclose(kiln_scales, torch_scales, rtol=LOSS_RTOL)
    assert_same_state(kiln_model, torch_model)

    rng = np.random.default_rng(5)
    logits = rng.normal(size=(6, 9)).astype(np.float32)
    lengths = np.array([9, 1, 4, 6, 2, 9])
    targets = rng.integers(0, 9, size=6)
    for fw in (pt, kl):
        fw.result = dict(
            mask=fw.lengths_to_mask(fw.torch.from_numpy(lengths), 9),
            top_p=fw.top_p_mask(fw.torch.from_numpy(logits), 0.7),
            top3=fw.topk_accuracy(fw.torch.from_numpy(logits), fw.torch.from_numpy(targets), 3))
        fw.result["positions"] = fw.positions_from_mask(fw.result["mask"])
        fw.result["logsumexp"] = fw.masked_logsumexp(fw.torch.from_numpy(logits),
                                                     fw.result["mask"])
    for key, value in kl.result.items():
        np.testing.assert_allclose(as_numpy(value), as_numpy(pt.result[key]), rtol=1e-5,
                                   err_msg=key)

    x, lengths, _, _ = kl.make_batch(np.random.default_rng(3), batch_size=4)
    check_hybridize(kiln_model, (x, kl.lengths_to_mask(lengths, x.size(1))))


def test_custom_autograd_model_traces_and_exports(tmp_path):
    _, kl = programs("custom_autograd")
    model = kl.build_model()
    x, lengths, _, _ = kl.make_batch(np.random.default_rng(3), batch_size=4)
    check_compiled_and_onnx(kl, model, (x, kl.lengths_to_mask(lengths, x.size(1))), tmp_path)


def test_data_pipeline_matches_torch_step_by_step():
    pt, kl = programs("data_pipeline")
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(), kl.build_model()
    copy_weights(torch_model, kiln_model)
    runs = []
    for fw, model in ((pt, torch_model), (kl, kiln_model)):
        # Unshuffled and unsplit: the frameworks' random streams differ.
        loader = fw.DataLoader(fw.SineDataset(128), batch_size=32)
        optimizer, scheduler = fw.make_training(model, epochs=2, steps_per_epoch=len(loader))
        losses = fw.train_epoch(model, loader, optimizer, scheduler)
        losses += fw.train_epoch(model, loader, optimizer, scheduler)
        runs.append((losses, scheduler.get_last_lr(), fw.validate(model, loader)))
    (torch_losses, torch_lr, torch_mse), (kiln_losses, kiln_lr, kiln_mse) = runs
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    np.testing.assert_allclose(kiln_lr, torch_lr, rtol=1e-6)
    assert kiln_mse == pytest.approx(torch_mse, rel=1e-4)
    assert_same_state(kiln_model, torch_model)


def test_data_pipeline_resumes_from_a_checkpoint(tmp_path):
    _, kl = programs("data_pipeline")
    train_loader, _ = kl.make_loaders(batch_size=64)
    initial = kl.build_model().state_dict()
    uninterrupted = kl.build_model()
    uninterrupted.load_state_dict(initial)
    losses = kl.fit(uninterrupted, train_loader, 4, str(tmp_path))
    resumed = kl.build_model()
    resumed.load_state_dict(initial)
    first = kl.fit(resumed, train_loader, 4, str(tmp_path), stop_after=1)
    rest = kl.fit(resumed, train_loader, 4, str(tmp_path), start_from=str(tmp_path / "epoch1.pt"))
    assert first + rest == losses
    for name, value in uninterrupted.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name].numpy(), value.numpy())
    checkpoint = kiln.load(str(tmp_path / "epoch3.pt"))
    assert checkpoint["epoch"] == 3 and checkpoint["scheduler"]["last_epoch"] == 4 * 8


def test_seq2seq_transformer(tmp_path):
    pt, kl = programs("seq2seq_transformer")
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(dropout=0.0), kl.build_model(dropout=0.0)
    copy_weights(torch_model, kiln_model)
    start = initial_state(torch_model)
    torch_losses = pt.train(torch_model, pt.make_data(5))
    kiln_losses = kl.train(kiln_model, kl.make_data(5))
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    check_hybridized_training(kl.build_model(dropout=0.0), start,
                              lambda m: kl.train(m, kl.make_data(5)), kiln_losses)
    # in_proj_bias holds the keys' bias, which the softmax cancels.
    assert_same_state(kiln_model, torch_model, skip=("in_proj_bias",))
    (t_src, t_tgt), (k_src, k_tgt) = (fw.make_batch(np.random.default_rng(7), 8)
                                      for fw in (pt, kl))
    torch_model.eval()
    kiln_model.eval()
    assert (kiln_model.greedy_decode(k_src, 6).tolist()
            == torch_model.greedy_decode(t_src, 6).tolist())
    check_compiled_and_onnx(kl, kiln_model, (k_src[:4], k_tgt[:4, :-1]), tmp_path)


def test_text_classifier():
    pt, kl = programs("text_classifier")
    torch.manual_seed(0)
    torch_model, kiln_model = pt.build_model(), kl.build_model()
    copy_weights(torch_model, kiln_model)
    torch_losses = pt.train(torch_model, pt.make_loader(128, shuffle=False))
    kiln_losses = kl.train(kiln_model, kl.make_loader(128, shuffle=False))
    assert len(kiln_losses) == 4
    np.testing.assert_allclose(kiln_losses, torch_losses, rtol=LOSS_RTOL)
    assert_same_state(kiln_model, torch_model)
    test_args = dict(n=64, seed=1, shuffle=False)
    assert kl.accuracy(kiln_model, kl.make_loader(**test_args)) == pytest.approx(
        pt.accuracy(torch_model, pt.make_loader(**test_args)))


def test_a_program_runs_on_kiln_from_the_command_line(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")  # as one_torch_thread, for a busy machine
    run = subprocess.run([sys.executable, str(EXAMPLES / "_swap.py"), "text_classifier.py",
                          "--epochs", "1"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("epoch 1: loss ")
