"""kiln.Generator and `generator=`, the default generator's state, the
sampling functions (bernoulli, multinomial, normal, randperm), the in-place
draws and kiln.nn.init, against torch where the result is determined (the
formulas, the deterministic initializers) and by statistics where it is
drawn (PyTorch cannot draw kiln's numbers)."""
import math

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def test_a_generator_repeats_its_stream_and_leaves_the_default_alone():
    a, b = kiln.Generator().manual_seed(5), kiln.Generator()
    assert isinstance(a, kiln.Generator) and a.initial_seed() == 5
    b.manual_seed(5)
    kiln.manual_seed(0)
    before = kiln.get_rng_state()
    draws = [lambda g: kiln.rand(3, 4, generator=g), lambda g: kiln.randn(5, generator=g),
             lambda g: kiln.randint(0, 10, (6,), generator=g),
             lambda g: kiln.randperm(20, generator=g),
             lambda g: kiln.multinomial(kiln.ones(7), 3, generator=g),
             lambda g: kiln.bernoulli(kiln.full((8,), 0.5), generator=g),
             lambda g: kiln.normal(0.0, 2.0, size=(4,), generator=g),
             lambda g: kiln.empty(3).uniform_(-1, 1, generator=g),
             lambda g: kiln.empty(3).normal_(generator=g)]
    for draw in draws:
        assert kiln.equal(draw(a), draw(b))
    assert kiln.equal(kiln.get_rng_state(), before)  # the default generator did not move
    c = kiln.Generator().manual_seed(6)
    assert not kiln.equal(kiln.rand(50, generator=a), kiln.rand(50, generator=c))


def test_generator_state_replays_the_stream():
    g = kiln.Generator().manual_seed(1)
    kiln.rand(10, generator=g)
    state = g.get_state()
    first = kiln.randn(10, generator=g)
    g.set_state(state)
    assert kiln.equal(kiln.randn(10, generator=g), first)
    assert kiln.manual_seed(3).initial_seed() == 3 == kiln.initial_seed()
    saved = kiln.get_rng_state()
    x = kiln.randn(4)
    kiln.set_rng_state(saved)
    assert kiln.equal(kiln.randn(4), x)
    with pytest.raises(TypeError, match="get_state"):  # torch: TypeError too
        g.set_state(kiln.zeros(3))
    with pytest.raises(RuntimeError, match="cuda"):
        kiln.Generator(device="cuda")


def test_bernoulli_multinomial_randperm_statistics():
    kiln.manual_seed(2)
    p = kiln.tensor([0.0, 0.25, 1.0]).expand(20000, 3)
    mean = kiln.bernoulli(p).mean(0).tolist()
    assert mean[0] == 0.0 and mean[2] == 1.0 and abs(mean[1] - 0.25) < 0.02
    x = kiln.zeros(10000)
    assert abs(kiln.bernoulli(x, 0.7).mean().item() - 0.7) < 0.02
    assert abs(x.bernoulli_(0.3).mean().item() - 0.3) < 0.02
    counts = np.bincount(kiln.multinomial(kiln.tensor([1.0, 2.0, 0.0, 1.0]), 8000,
                                          replacement=True).numpy(), minlength=4) / 8000
    np.testing.assert_allclose(counts, [0.25, 0.5, 0.0, 0.25], atol=0.02)
    rows = kiln.multinomial(kiln.rand(5, 6), 6)
    assert rows.shape == (5, 6) and all(sorted(r) == list(range(6)) for r in rows.tolist())
    perm = kiln.randperm(100)
    assert perm.dtype == kiln.int64 and sorted(perm.tolist()) == list(range(100))
    assert kiln.randperm(5, dtype=kiln.float32).dtype == kiln.float32
    for bad, message in [(kiln.tensor([1.0, -1.0]), "element < 0"),
                         (kiln.tensor([0.0, 0.0]), "sum of probabilities <= 0")]:
        with pytest.raises(RuntimeError, match=message):
            torch.multinomial(torch.tensor(bad.tolist()), 1)  # the same mistake in torch
        with pytest.raises(RuntimeError, match=f"multinomial: .*{message}"):
            kiln.multinomial(bad, 1)


def test_normal_forms_match_torchs_shapes_and_moments():
    kiln.manual_seed(3)
    mean, std = kiln.full((2000, 3), 1.5), kiln.full((3,), 0.5)
    out = kiln.normal(mean, std)
    assert out.shape == torch.normal(torch.full((2000, 3), 1.5), torch.full((3,), 0.5)).shape
    assert abs(out.mean().item() - 1.5) < 0.03 and abs(out.std().item() - 0.5) < 0.03
    assert kiln.normal(mean, 2.0).shape == (2000, 3)
    assert kiln.normal(0.0, std).shape == (3,)
    assert kiln.normal(2.0, 3.0, size=(4, 5)).shape == (4, 5)
    m = kiln.zeros(3, requires_grad=True)
    assert not kiln.normal(m, 1.0).requires_grad  # as torch: samples carry no gradient
    with pytest.raises(TypeError, match="size"):
        kiln.normal(0.0, 1.0)


def test_in_place_draws_follow_torchs_rules():
    kiln.manual_seed(4)
    x = kiln.empty(20000)
    x.uniform_(-2, 3)
    assert -2 <= x.min().item() and x.max().item() < 3 and abs(x.mean().item() - 0.5) < 0.05
    x.normal_(1.0, 2.0)
    assert abs(x.mean().item() - 1.0) < 0.05 and abs(x.std().item() - 2.0) < 0.05
    assert x.uniform_(**{"from": 5, "to": 6}).min().item() >= 5
    w = kiln.empty(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w.uniform_()
    with kiln.no_grad():
        assert kiln.equal(w.normal_(), w) and w.requires_grad


def test_an_in_place_draw_in_a_traced_function_draws_anew_per_call():
    def noisy(x):
        return x + kiln.empty_like(x).uniform_(0, 1)

    f = kiln.jit.trace(noisy, (kiln.zeros(4),))
    a, b = f(kiln.zeros(4)), f(kiln.zeros(4))
    assert not kiln.equal(a, b)
    assert 0 <= a.min().item() and a.max().item() < 1


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                        ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_is_torchs(name, param):
    assert kiln.nn.init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param))


def _std_bound(t):
    values = t.numpy().ravel()
    return float(values.std()), float(np.abs(values).max())


@pytest.mark.parametrize("shape", [(256, 128), (64, 32, 3, 3)])
def test_scaled_initializers_have_torchs_spread(shape):
    t = torch.empty(shape)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(t)
    k = kiln.empty(*shape)
    assert kiln.nn.init._calculate_fan_in_and_fan_out(k) == (fan_in, fan_out)
    cases = [
        ("kaiming_uniform_", {"a": math.sqrt(5)}), ("kaiming_normal_", {"mode": "fan_out",
                                                                        "nonlinearity": "relu"}),
        ("xavier_uniform_", {"gain": 2.0}), ("xavier_normal_", {}),
    ]
    for name, kwargs in cases:
        getattr(torch.nn.init, name)(t, **kwargs)
        getattr(kiln.nn.init, name)(k, **kwargs)
        (kstd, kmax), (tstd, tmax) = _std_bound(k), _std_bound(torch_as(t))
        assert kstd == pytest.approx(tstd, rel=0.05), name
        if "uniform" in name:  # same bound: both reach close to it, never past
            assert kmax <= tmax * 1.01 and kmax >= tmax * 0.97, name


def torch_as(t):
    return kiln.from_numpy(t.numpy())


def test_deterministic_initializers_equal_torchs():
    for name, shape, kwargs in [("eye_", (3, 5), {}), ("dirac_", (6, 3, 3, 3), {"groups": 2}),
                                ("dirac_", (4, 4, 5), {}), ("constant_", (2, 3), {"val": 0.3}),
                                ("zeros_", (4,), {}), ("ones_", (2, 2), {})]:
        t = torch.full(shape, 7.0)
        k = kiln.full(shape, 7.0)
        getattr(torch.nn.init, name)(t, **kwargs)
        out = getattr(kiln.nn.init, name)(k, **kwargs)
        assert kiln.equal(out, k)
        np.testing.assert_array_equal(k.numpy(), t.numpy(), err_msg=name)
    with pytest.raises(ValueError, match="dirac_"):  # torch: ValueError too
        kiln.nn.init.dirac_(kiln.empty(3, 2, 3), groups=2)


def test_orthogonal_and_trunc_normal_and_sparse():
    for shape in [(8, 5), (5, 8), (4, 2, 3)]:
        w = kiln.nn.init.orthogonal_(kiln.empty(*shape), gain=1.5).numpy().reshape(shape[0], -1)
        gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
        np.testing.assert_allclose(gram, 2.25 * np.eye(gram.shape[0]), atol=1e-5)
    g = kiln.Generator().manual_seed(9)
    t = kiln.nn.init.trunc_normal_(kiln.empty(20000), std=0.02, a=-0.04, b=0.04, generator=g)
    ref = torch.nn.init.trunc_normal_(torch.empty(20000), std=0.02, a=-0.04, b=0.04)
    assert t.min().item() >= -0.04 and t.max().item() <= 0.04
    assert t.std().item() == pytest.approx(ref.std().item(), rel=0.05)
    s = kiln.nn.init.sparse_(kiln.empty(10, 6), sparsity=0.3)
    assert ((s.numpy() == 0).sum(0) >= 3).all()


def test_dataloader_and_random_split_take_a_generator():
    data = kiln.utils.data.TensorDataset(kiln.arange(20))

    def order(seed):
        loader = kiln.utils.data.DataLoader(data, batch_size=5, shuffle=True,
                                            generator=kiln.Generator().manual_seed(seed))
        return [b[0].tolist() for b in loader]

    assert order(1) == order(1) and order(1) != order(2)
    assert sorted(sum(order(1), [])) == list(range(20))
    parts = kiln.utils.data.random_split(data, [15, 5], generator=kiln.Generator().manual_seed(0))
    again = kiln.utils.data.random_split(data, [15, 5], generator=kiln.Generator().manual_seed(0))
    assert parts[1].indices == again[1].indices
