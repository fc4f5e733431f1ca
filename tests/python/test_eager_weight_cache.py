"""Eager products keep the packed form of a weight they see again
(Note [Eager packed weights], src/kiln/ops/packed_weights.cpp): the same
bits as packing per call and as a compiled plan, PyTorch's values, and
every way a weight can change is seen: in-place ops, optimizer steps,
views, NumPy and DLPack writes, async queues, freed and reused memory."""
import gc

import numpy as np
import pytest
import torch

import kiln
from kiln import nn


@pytest.fixture(autouse=True)
def fresh_cache():
    kiln.set_eager_weight_cache_limit(64 << 20)
    kiln.clear_eager_weight_cache()
    yield
    kiln.set_eager_weight_cache_limit(64 << 20)
    kiln.set_execution("sync")


def stats_since(before):
    now = kiln.eager_weight_cache_stats()
    return {k: now[k] - before[k] for k in ("hits", "packs")}


def layer(seed=0, n=256):
    kiln.manual_seed(seed)
    lin = nn.Linear(n, n)
    lin.requires_grad_(False)
    return lin


def uncached(fn):
    """fn() with the cache off: what packing per call gives."""
    kiln.set_eager_weight_cache_limit(0)
    try:
        return fn()
    finally:
        kiln.set_eager_weight_cache_limit(64 << 20)


def same_bits(a, b):
    return np.array_equal(a.numpy(), b.numpy())


def torch_linear(x, lin):
    return torch.nn.functional.linear(torch.from_numpy(x.numpy()),
                                      torch.from_numpy(lin.weight.detach().numpy().copy()),
                                      torch.from_numpy(lin.bias.detach().numpy().copy()))


def test_a_weight_seen_again_is_packed_once_and_gives_the_same_bits():
    lin = layer()
    x = kiln.randn(32, 256)
    before = kiln.eager_weight_cache_stats()
    with kiln.no_grad():
        first, second, third = lin(x), lin(x), lin(x)
    # The first call packs for itself; the second keeps its packing; the third reuses it.
    assert stats_since(before) == {"hits": 1, "packs": 1}
    with kiln.no_grad():
        plain = uncached(lambda: lin(x))
        compiled = kiln.jit.trace(lin, (x,))(x)
    for y in (first, second, third, compiled):
        assert same_bits(y, plain)
    np.testing.assert_allclose(third.numpy(), torch_linear(x, lin).numpy(), rtol=1e-5, atol=1e-5)
    assert kiln.eager_weight_cache_stats()["bytes"] == 256 * 256 * 4


@pytest.mark.parametrize("change", ["add_", "view_fill_", "copy_", "sgd_step"])
def test_a_weight_changed_by_kiln_is_packed_again(change):
    lin = layer()
    x = kiln.randn(32, 256)
    with kiln.no_grad():
        lin(x), lin(x), lin(x)
        if change == "add_":
            lin.weight.add_(0.5)
        elif change == "view_fill_":
            lin.weight[3].fill_(2.0)  # a view: the storage's version moves
        elif change == "copy_":
            lin.weight.copy_(kiln.randn(256, 256))
    if change == "sgd_step":
        lin.requires_grad_(True)
        opt = kiln.optim.SGD(lin.parameters(), lr=0.1)
        lin(x).sum().backward()
        opt.step()
        lin.requires_grad_(False)
    with kiln.no_grad():
        after = lin(x)
        assert same_bits(after, uncached(lambda: lin(x)))
    np.testing.assert_allclose(after.numpy(), torch_linear(x, lin).numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("export", ["numpy", "dlpack"])
def test_writes_through_numpy_or_dlpack_are_seen(export):
    lin = layer()
    x = kiln.randn(32, 256)
    with kiln.no_grad():
        lin(x), lin(x), lin(x)
        w = lin.weight.detach()
        array = w.numpy() if export == "numpy" else torch.from_dlpack(w)
        array[0, :] = 3.0  # no version counter sees this
        while_lent = lin(x)
        assert same_bits(while_lent, uncached(lambda: lin(x)))
        array[1, :] = -1.0
        again = lin(x)
        assert same_bits(again, uncached(lambda: lin(x)))
        del array
        before = kiln.eager_weight_cache_stats()
        after = [lin(x) for _ in range(3)]
    # Cached again once the loan ended, from the bytes written during it.
    assert stats_since(before) == {"hits": 1, "packs": 1}
    for y in after:
        assert same_bits(y, again)
    np.testing.assert_allclose(after[-1].numpy(), torch_linear(x, lin).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_an_address_given_out_is_never_trusted_again():
    lin = layer()
    x = kiln.randn(32, 256)
    lin.weight.data_ptr()
    before = kiln.eager_weight_cache_stats()
    with kiln.no_grad():
        for _ in range(4):
            lin(x)
    assert stats_since(before) == {"hits": 0, "packs": 0}


def test_memory_kiln_does_not_own_is_never_cached():
    w = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    weight = kiln.from_numpy(w)
    x = kiln.randn(32, 256)
    before = kiln.eager_weight_cache_stats()
    ys = [kiln.nn.functional.linear(x, weight) for _ in range(3)]
    w[5, :] = 7.0  # NumPy owns it and may write it at any time
    changed = kiln.nn.functional.linear(x, weight)
    assert stats_since(before) == {"hits": 0, "packs": 0}
    assert same_bits(ys[0], ys[2])
    np.testing.assert_allclose(changed.numpy(), x.numpy() @ w.T, rtol=1e-4, atol=1e-4)


def test_queued_ops_use_the_bytes_of_the_version_they_were_issued_at():
    lin = layer()
    x = kiln.randn(32, 256)
    slow = kiln.randn(768, 768)

    def run():
        """Each step's reads wait for a slow matmul, so the caller issues
        the weight's next write (and bumps its version) before they run."""
        ys = []
        with kiln.no_grad():
            weight = lin.weight.clone()
            for _step in range(4):
                x_late = kiln.matmul(slow, slow)[:32, :256] * 0 + x
                for _ in range(3):  # seen again: packed, then reused
                    ys.append(kiln.nn.functional.linear(x_late, weight, lin.bias))
                weight.add_(0.25)  # queued behind the reads above
        return ys

    expected = uncached(run)
    kiln.set_num_interop_threads(1)
    kiln.set_execution("async")
    got = run()
    kiln.synchronize()
    kiln.set_execution("sync")
    assert kiln.eager_weight_cache_stats()["hits"] > 0
    for g, e in zip(got, expected):
        assert same_bits(g, e)


def test_views_of_one_storage_are_kept_apart():
    kiln.manual_seed(0)
    big = kiln.randn(256, 512)
    left, right = big[:, :256], big[:, 256:]
    x = kiln.randn(32, 256)
    for _ in range(3):
        a = kiln.matmul(x, left)
        b = kiln.matmul(x, right)
    np.testing.assert_allclose(a.numpy(), x.numpy() @ big.numpy()[:, :256], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b.numpy(), x.numpy() @ big.numpy()[:, 256:], rtol=1e-4, atol=1e-4)
    right.mul_(2.0)  # the shared version moves for both views
    a2, b2 = kiln.matmul(x, left), kiln.matmul(x, right)
    assert same_bits(a2, a)
    np.testing.assert_allclose(b2.numpy(), 2 * b.numpy(), rtol=1e-5, atol=1e-5)


def test_freed_weights_leave_the_cache_and_their_memory_is_not_mistaken():
    x = kiln.randn(32, 256)
    gc.collect()  # weights of earlier tests
    entries = kiln.eager_weight_cache_stats()["entries"]
    for seed in range(4):  # new weights, often at a freed one's address
        lin = layer(seed)
        with kiln.no_grad():
            y = [lin(x) for _ in range(3)][-1]
        np.testing.assert_allclose(y.numpy(), torch_linear(x, lin).numpy(), rtol=1e-5,
                                   atol=1e-5)
        del lin
        gc.collect()
    assert kiln.eager_weight_cache_stats()["entries"] == entries
    assert kiln.eager_weight_cache_stats()["bytes"] == 0


def test_training_packs_nothing_it_would_not_reuse():
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    opt = kiln.optim.SGD(model.parameters(), lr=0.01)
    before = kiln.eager_weight_cache_stats()
    for _ in range(5):  # every step moves the weights' versions; each batch is new
        x = kiln.randn(32, 256)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    assert stats_since(before) == {"hits": 0, "packs": 0}


def test_the_limit_bounds_the_copies_least_recently_used_first():
    x = kiln.randn(32, 256)
    layers = [layer(seed) for seed in range(3)]
    kiln.set_eager_weight_cache_limit(2 * 256 * 256 * 4)
    with kiln.no_grad():
        for lin in layers:
            lin(x), lin(x)
    assert kiln.eager_weight_cache_stats()["bytes"] == 2 * 256 * 256 * 4
    before = kiln.eager_weight_cache_stats()
    with kiln.no_grad():
        layers[2](x)  # the most recent two are kept
        layers[1](x)
    assert stats_since(before)["hits"] == 2
    kiln.set_eager_weight_cache_limit(0)
    assert kiln.eager_weight_cache_stats()["bytes"] == 0
    with pytest.raises(ValueError, match="max_bytes >= 0"):
        kiln.set_eager_weight_cache_limit(-1)


def test_products_that_sweep_b_more_than_once_pack_per_call():
    """Above 256 rows, or 96 rows whose a takes more than 1 MiB, the product
    sweeps b once per 96 rows; packing per call into a reused buffer was as
    fast or faster there, so no copy is kept (cpu::gemm_reads_b_once)."""
    lin, wide = layer(), layer(n=1536)
    before = kiln.eager_weight_cache_stats()
    with kiln.no_grad():
        for model, rows in ((lin, 257), (lin, 512), (wide, 200)):  # 200 x 1536 floats: 1.2 MiB
            x = kiln.randn(rows, model.in_features)
            ys = [model(x) for _ in range(3)]
            np.testing.assert_allclose(ys[-1].numpy(), torch_linear(x, model).numpy(), rtol=1e-4,
                                       atol=1e-4)
    assert stats_since(before) == {"hits": 0, "packs": 0}
    with kiln.no_grad():
        for rows in (96, 256):  # b read once: kept, then reused at any such row count
            x = kiln.randn(rows, 256)
            for _ in range(3):
                lin(x)
    assert stats_since(before) == {"hits": 4, "packs": 1}  # one weight, one version
