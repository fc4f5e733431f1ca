"""The OpenMP team's fallback to one thread while its cores are busy (Note
[A busy team], src/kiln/kernels/cpu/parallel.h): other programs keeping
every core busy make a two-thread model run on one thread by itself, with
results PyTorch agrees with; the switch and the environment variable turn
it off. Behaviour, not timing: bench/threads.py --load times it."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import kiln
import kiln.jit
from kiln import nn


@pytest.fixture
def watching_two_threads():
    threads = kiln.get_num_threads()
    kiln.set_num_threads(2)
    kiln.set_team_busy_fallback(True)
    yield
    kiln.set_team_busy_fallback(False)  # as conftest.py leaves it
    kiln.set_num_threads(threads)


def conv_model():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1)).eval()


def torch_twin(model):
    twin = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 32, 3, padding=1)).eval()
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in model.state_dict().items()}
    twin.load_state_dict(state)
    return twin


def busy_processes(n):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_busy_cores_put_the_team_on_one_thread_by_itself(watching_two_threads):
    model = conv_model()
    x = kiln.randn(1, 16, 48, 48)
    with kiln.no_grad():
        compiled = kiln.jit.trace(model, x, frozen=True)
    want = torch_twin(model)(torch.from_numpy(x.numpy())).detach().numpy()
    before = kiln.team_stats()["busy_fallbacks"]
    hogs = busy_processes(max(2, os.cpu_count() or 2))
    try:
        deadline = time.monotonic() + 20
        noticed = False
        while not noticed and time.monotonic() < deadline:
            with kiln.no_grad():
                got = compiled(x).numpy()
            noticed = kiln.team_stats()["busy_fallbacks"] > before
        assert noticed, "the team never noticed every core busy"
        assert kiln.team_stats()["busy_now"]
        with kiln.no_grad():
            on_one = compiled(x).numpy()  # on one thread now
            eager = model(x).numpy()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    for result in (got, on_one, eager):
        np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


def test_switch_turns_it_off(watching_two_threads):
    assert kiln.team_busy_fallback()
    kiln.set_team_busy_fallback(False)
    assert not kiln.team_busy_fallback()
    assert not kiln.team_stats()["busy_now"]


def test_environment_turns_it_off():
    code = "import kiln; print(kiln.team_busy_fallback())"
    for value, want in (("0", "False"), ("1", "True")):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={**os.environ, "KILN_TEAM_BUSY_FALLBACK": value})
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [want]
