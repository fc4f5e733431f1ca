"""Threads per step (Note [Threads per step], src/kiln/ops/op_threads.h):
with two threads, a compiled step too small for a second thread runs on
one, a big one on both; the profiler shows which; `kiln.jit.set_step_threads`
("choose", the default, or "all") turns the choice off; results match
PyTorch either way. Behaviour, not timing: bench/threads.py times it."""
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch

import kiln
import kiln.jit
from kiln import nn

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build" / "release"))


@pytest.fixture
def two_threads():
    threads, mode = kiln.get_num_threads(), kiln.jit.get_step_threads()
    kiln.set_num_threads(2)
    yield
    kiln.set_num_threads(threads)
    kiln.jit.set_step_threads(mode)


def tiny_and_big(x, a, b):
    return kiln.relu(x), a @ b


def inputs():
    rng = np.random.default_rng(0)
    return [kiln.from_numpy(rng.standard_normal(s).astype(np.float32))
            for s in ((4,), (384, 384), (384, 384))]


def threads_by_step(fn, args):
    with kiln.profiler.profile() as prof:
        fn(*args)
    rows = [r for r in prof.key_averages() if r.kind == "step"]
    assert all(r.threads_min == r.threads_max for r in rows)
    return {r.key: r.threads_max for r in rows}, prof.key_averages().table()


def test_tiny_op_runs_on_one_thread_and_a_big_matmul_on_two(two_threads):
    args = inputs()
    compiled = kiln.jit.trace(tiny_and_big, args)
    threads, table = threads_by_step(compiled, args)
    assert threads == {"relu": 1, "matmul": 2}
    assert "Threads" in table.splitlines()[1]
    relu, product = compiled(*args)
    want = [torch.from_numpy(t.numpy()) for t in args]
    np.testing.assert_array_equal(relu.numpy(), torch.relu(want[0]).numpy())
    np.testing.assert_allclose(product.numpy(), (want[1] @ want[2]).numpy(), rtol=1e-4, atol=1e-4)


def test_all_puts_every_step_on_two_threads(two_threads):
    args = inputs()
    kiln.jit.set_step_threads("all")
    assert kiln.jit.get_step_threads() == "all"
    compiled = kiln.jit.trace(tiny_and_big, args)
    threads, _ = threads_by_step(compiled, args)
    assert threads == {"relu": 2, "matmul": 2}
    with pytest.raises(ValueError, match="set_step_threads: mode 'some'"):
        kiln.jit.set_step_threads("some")


def small_cnn():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.Hardswish(),
                         nn.Conv2d(16, 32, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(32, 10)).eval()


def test_a_small_cnn_gives_the_same_results_choosing_or_not(two_threads):
    net = small_cnn()
    x = kiln.randn(1, 3, 32, 32)
    outputs = {}
    for mode in ("choose", "all"):
        kiln.jit.set_step_threads(mode)
        with kiln.no_grad():
            compiled = kiln.jit.trace(net, x, frozen=True)
            outputs[mode] = compiled(x).numpy()
            threads, _ = threads_by_step(compiled, [x])
        if mode == "choose":
            assert 1 in threads.values(), threads
    # Every kernel here gives the same bits on one thread as on two (no
    # split reductions at these shapes).
    np.testing.assert_array_equal(outputs["choose"], outputs["all"])
    with kiln.no_grad():
        eager = net(x).numpy()
    np.testing.assert_allclose(outputs["choose"], eager, rtol=1e-5, atol=1e-5)


def test_kiln_bench_profile_shows_threads_per_step(tmp_path):
    tool = BUILD / "kiln"
    assert tool.exists(), f"no kiln tool at {tool}"
    args = inputs()
    kiln.jit.trace(tiny_and_big, args).save(tmp_path / "m.kiln")
    result = subprocess.run(
        [str(tool), "bench", str(tmp_path / "m.kiln"), "--iterations", "3", "--warmup", "1",
         "--profile", "--threads", "2"],
        capture_output=True, text=True,
        env={**os.environ, "KILN_TEAM_BUSY_FALLBACK": "0"})  # the same threads on a busy machine
    assert result.returncode == 0, result.stderr
    table = result.stdout[result.stdout.index("profile of"):]
    rows = {line.split()[0]: line.split() for line in table.splitlines()
            if line.split() and line.split()[0] in ("relu", "matmul")}
    # The cells end with Threads, then # of Calls.
    assert rows["relu"][-2] == "1" and rows["matmul"][-2] == "2", table
