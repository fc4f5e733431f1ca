"""How the dependency engine schedules, checked by behaviour (counts, not
times): a sleeping sync point is woken once, not once per finished op;
async mode runs as sync with one usable core; a compiled plan run on the
caller's thread draws after the random ops queued before it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from engine_helpers import restore_sync_mode  # noqa: F401 (autouse fixture)


def _long_chain(ops: int) -> kiln.Tensor:
    """`ops` queued matmuls in one chain (each well over inline_bytes and a
    few tens of µs long), so a sync point at its end sleeps."""
    w = kiln.randn(128, 128) * (1 / 128 ** 0.5)
    y = kiln.randn(128, 128)
    for _ in range(ops):
        y = y @ w
    return y


@pytest.mark.parametrize("wait", ["wait_to_read", "synchronize"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_sleeping_sync_point_is_woken_once_not_per_op(wait, workers):
    kiln.set_num_interop_threads(workers)
    kiln.set_execution("async")
    if kiln.execution_in_effect() != "async":
        pytest.skip("one usable core: async mode runs as sync")
    kiln.synchronize()
    y = _long_chain(300)
    before = kiln.engine_stats()
    if wait == "wait_to_read":
        y.wait_to_read()
    else:
        kiln.synchronize()
    after = kiln.engine_stats()
    # Each of the 300 ops ending used to wake the waiter (a futex call and a
    # context switch per op); only the op its condition waited for may.
    assert after["waiter_wakeups"] - before["waiter_wakeups"] <= 1
    assert after["pushed"] - before["pushed"] == 0


def test_a_pusher_held_back_by_the_limits_wakes_once_per_half_drained_queue():
    kiln.set_execution("async")
    if kiln.execution_in_effect() != "async":
        pytest.skip("one usable core: async mode runs as sync")
    kiln.set_engine_limits(32, 1 << 30)
    w = kiln.randn(256, 256) * (1 / 256 ** 0.5)
    y = kiln.randn(256, 256)
    kiln.synchronize()
    kiln.reset_engine_peak_stats()
    before = kiln.engine_stats()
    for _ in range(200):  # each a few hundred µs: the pusher sleeps when held back
        y = y @ w
    after = kiln.engine_stats()
    assert after["peak_in_flight"] <= 32
    # Woken when half the limit is free, not at each of the ~170 ops that
    # ended while it slept.
    assert after["waiter_wakeups"] - before["waiter_wakeups"] <= 200 // 16 + 2
    y.wait_to_read()


def _engine_report(env: dict, affinity: set | None) -> dict:
    """Runs a child that switches to async mode and issues queued-size ops;
    returns what the engine reports there."""
    code = (
        "import os, sys, json\n"
        "if len(sys.argv) > 1: os.sched_setaffinity(0, {int(c) for c in sys.argv[1:]})\n"
        "import kiln\n"
        "kiln.set_execution('async')\n"
        "x = kiln.ones(256, 256)\n"
        "y = (x @ x + 1).sum()\n"
        "print(json.dumps({'effective': kiln.execution_in_effect(),\n"
        "                  'requested': kiln.get_execution(),\n"
        "                  'cores': kiln.engine_usable_cores(),\n"
        "                  'pushed': kiln.engine_stats()['pushed'], 'y': y.item()}))\n")
    args = [sys.executable, "-c", code] + [str(c) for c in sorted(affinity or ())]
    inherited = {k: v for k, v in os.environ.items() if k != "KILN_ENGINE_CORES"}
    out = subprocess.run(args, env={**inherited, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_async_runs_as_sync_when_the_process_has_one_core():
    one_cpu = {sorted(os.sched_getaffinity(0))[0]}
    report = _engine_report({}, one_cpu)
    assert report == {"effective": "sync", "requested": "async", "cores": 1, "pushed": 0,
                      "y": 256.0 * 256 * (256 + 1)}


def test_engine_cores_from_the_environment():
    report = _engine_report({"KILN_ENGINE_CORES": "1"}, None)
    assert (report["effective"], report["pushed"]) == ("sync", 0)
    report = _engine_report({"KILN_ENGINE_CORES": "2"}, None)
    assert (report["effective"], report["cores"]) == ("async", 2)
    assert report["pushed"] > 0  # the matmul and the add were queued
    assert report["y"] == 256.0 * 256 * (256 + 1)


def test_bad_engine_cores_is_a_value_error():
    code = "import kiln; kiln.set_execution('async'); kiln.execution_in_effect()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "KILN_ENGINE_CORES": "zero"}, timeout=120)
    assert out.returncode != 0
    assert "ValueError: KILN_ENGINE_CORES: expected a number of cores >= 1, got 'zero'" in \
        out.stderr


class _Twice(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plan_run_on_the_caller_draws_after_queued_random_ops(workers):
    """A plan that calls back into Python runs on the calling thread, not
    on a worker (so does one holding collectives: the same branch of
    Executable::execute). Its dropout must draw after kiln.rand queued
    before it and before the one queued after, as in sync mode."""
    def f(x):
        return kiln.nn.functional.dropout(_Twice.apply(x), 0.5, training=True)

    traced = kiln.jit.trace(f, (kiln.ones(64, 64),))

    def program() -> list[np.ndarray]:
        kiln.manual_seed(3)
        before = kiln.rand(512, 512)  # 1 MiB: queued, not run at once
        mid = traced(kiln.ones(64, 64))
        after = kiln.rand(512, 512)
        return [t.numpy().copy() for t in (before, mid, after)]

    expected = program()
    kiln.set_num_interop_threads(workers)
    kiln.set_execution("async")
    for _ in range(5):
        got = program()
        for e, g in zip(expected, got):
            np.testing.assert_array_equal(g, e)
    assert 0.3 < float((expected[1] == 0).mean()) < 0.7  # the plan did draw


@pytest.fixture
def _busy_cores():
    """The fallback on (conftest.py turns it off for the session) and forced
    for a minute, as if the workers had waited for busy cores; ended after."""
    kiln.set_engine_busy_fallback(True)
    kiln._C._engine_prefer_caller_for(60_000)
    yield
    kiln._C._engine_prefer_caller_for(0)
    kiln.set_engine_busy_fallback(False)


def test_busy_cores_run_async_ops_on_the_caller_as_if_queued(_busy_cores):
    kiln.manual_seed(0)
    big = kiln.randn(256, 256)
    expected = ((big @ big + 1).relu() * kiln.rand(256, 256)).sum(0)
    kiln.set_num_interop_threads(2)
    kiln.set_execution("async")
    if kiln.engine_usable_cores() < 2:
        pytest.skip("one usable core: async mode runs as sync anyway")
    assert kiln.execution_in_effect() == "sync"
    kiln.manual_seed(0)
    big = kiln.randn(256, 256)
    before = kiln.engine_stats()
    got = ((big @ big + 1).relu() * kiln.rand(256, 256)).sum(0)
    after = kiln.engine_stats()
    assert after["pushed"] == before["pushed"]  # all ran on the caller
    assert after["ran_inline"] - before["ran_inline"] >= 5
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    bad = kiln.index_select(big, 0, kiln.tensor([7, 300]))  # fails here, raises at the read
    with pytest.raises(IndexError, match=r"index_select \(issued at test_engine_scheduling.py:"):
        bad.tolist()
    kiln.set_engine_busy_fallback(False)  # off: the forced fallback no longer counts
    assert kiln.execution_in_effect() == "async"


def test_the_fallback_waits_for_ops_queued_before_it():
    kiln.set_execution("async")
    if kiln.execution_in_effect() != "async":
        pytest.skip("one usable core: async mode runs as sync")
    w = kiln.randn(256, 256) * (1 / 256 ** 0.5)
    y = kiln.randn(256, 256)
    start = y.numpy().copy()
    for _ in range(20):
        y = y @ w  # queued
    kiln.set_engine_busy_fallback(True)
    kiln._C._engine_prefer_caller_for(60_000)
    try:
        y.mul_(2)  # in place on a pending tensor: waits for the chain, then runs here
        got = y.numpy()
    finally:
        kiln._C._engine_prefer_caller_for(0)
        kiln.set_engine_busy_fallback(False)
    kiln.set_execution("sync")
    expected = kiln.tensor(start)
    for _ in range(20):
        expected = expected @ w
    np.testing.assert_array_equal(got, (expected * 2).numpy())


def test_busy_fallback_off_from_the_environment():
    code = "import kiln; print(kiln.engine_busy_fallback())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "KILN_ENGINE_BUSY_FALLBACK": "0"}, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items()
                              if k != "KILN_ENGINE_BUSY_FALLBACK"}, timeout=120)
    assert out.stdout.strip() == "True", out.stderr


def test_a_lone_op_of_two_workers_runs_with_every_thread():
    """Two workers get half the threads each, but an op that runs alone (a
    chain's next op, nothing else queued) gets them all, as in sync mode:
    with each op on its share, such a chain took twice sync mode's time."""
    threads = kiln.get_num_threads()
    kiln.set_num_threads(4)
    try:
        kiln.set_num_interop_threads(2)  # the pool starts at the first push, with 4 threads
        kiln.set_execution("async")
        if kiln.execution_in_effect() != "async":
            pytest.skip("one usable core: async mode runs as sync")
        x, w = kiln.randn(256, 256), kiln.randn(256, 256) * (1 / 256 ** 0.5)
        kiln.synchronize()
        before = kiln.engine_stats()
        y = x
        for _ in range(20):  # each op is ready only when the one before ends
            y = y @ w
        got = y.numpy()
        after = kiln.engine_stats()
        # All but the first: it starts as the chain is being issued.
        assert after["ran_with_every_thread"] - before["ran_with_every_thread"] >= 10
    finally:
        kiln.set_execution("sync")
        kiln.set_num_threads(threads)
    expected = x
    for _ in range(20):
        expected = expected @ w
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-6)
