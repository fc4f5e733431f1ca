"""The dependency engine's modes (kiln.set_execution): async results equal
sync results bit for bit over random programs, sync points, errors raised
where they were made, bounded memory, several Python threads."""
import inspect
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from engine_helpers import DEFAULT_LIMITS as _DEFAULT_LIMITS
from engine_helpers import restore_sync_mode  # noqa: F401 (autouse fixture)

# inline_bytes values: every op queued, and the default (small ops whose
# inputs are idle run at once on the caller).
_INLINE = pytest.mark.parametrize("inline_bytes", [0, _DEFAULT_LIMITS[2]])


def _use_inline(inline_bytes: int) -> None:
    kiln.set_engine_limits(*_DEFAULT_LIMITS[:2], inline_bytes=inline_bytes)


def _compiled_step():
    def step(a, b):
        return kiln.tanh(a @ b) + a
    example = (kiln.ones(6, 6), kiln.ones(6, 6))
    return kiln.jit.trace(step, example)


def _random_program(seed: int, compiled) -> list[np.ndarray]:
    """A random DAG over a pool of 6x6 tensors: new values, in-place writes
    (also through views and aliases), random draws, a compiled call, then
    autograd and an optimizer step over two parameters."""
    rng = np.random.default_rng(seed)
    kiln.manual_seed(seed)
    pool = [kiln.tensor(rng.standard_normal((6, 6)).astype(np.float32)) for _ in range(4)]
    w1 = kiln.tensor(rng.standard_normal((6, 6)).astype(np.float32) * 0.3, requires_grad=True)
    w2 = kiln.tensor(rng.standard_normal((6, 6)).astype(np.float32) * 0.3, requires_grad=True)
    opt = kiln.optim.SGD([w1, w2], lr=0.1, momentum=0.9)

    def pick() -> int:
        return int(rng.integers(len(pool)))

    for _ in range(40):
        kind = int(rng.integers(10))
        i, j = pick(), pick()
        if kind == 0:
            pool.append(kiln.tanh(pool[i] + pool[j] * 0.5))
        elif kind == 1:
            pool.append(kiln.tanh(pool[i] @ pool[j].t()))
        elif kind == 2:
            pool[i].mul_(0.5).add_(pool[j])  # in place; j may be i
        elif kind == 3:
            pool[i][int(rng.integers(6))].copy_(pool[j][:, int(rng.integers(6))])  # views
        elif kind == 4:
            alias = pool[i]
            pool.append(alias)
            alias[:, 1:3].mul_(-1.0)  # a write every holder of the alias sees
        elif kind == 5:
            pool.append(pool[i] + kiln.randn(6, 6) * 0.1)  # draws keep their order
        elif kind == 6:
            pool.append(kiln.nn.functional.dropout(pool[i], 0.3, training=True))
        elif kind == 7:
            pool.append(compiled(pool[i], pool[j]))
        elif kind == 8:
            pool[i].clamp_(-2.0, 2.0)
        else:
            pool.append(kiln.maximum(pool[i], pool[j]).sum(0, keepdim=True).expand(6, 6) * 0.1)
    for _ in range(2):
        opt.zero_grad()
        loss = (kiln.tanh(pool[pick()] @ w1) * w2).pow(2).mean()
        loss.backward()
        opt.step()
    return [t.detach().numpy().copy() for t in pool] + [w1.detach().numpy().copy(),
                                                         w2.detach().numpy().copy(),
                                                         w1.grad.numpy().copy()]


@_INLINE
@pytest.mark.parametrize("workers", [1, 2])
def test_random_programs_equal_sync_bit_for_bit(workers, inline_bytes):
    _use_inline(inline_bytes)
    compiled = _compiled_step()
    for seed in range(25):
        kiln.set_execution("sync")
        expected = _random_program(seed, compiled)
        kiln.set_num_interop_threads(workers)
        kiln.set_execution("async")
        got = _random_program(seed, compiled)
        kiln.set_execution("sync")
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            np.testing.assert_array_equal(g, e, err_msg=f"seed {seed}, tensor {k}")


def test_sync_points_see_the_values():
    kiln.set_execution("async")
    y = kiln.zeros(3)
    for _ in range(200):
        y = y + 1
    assert y.tolist() == [200.0, 200.0, 200.0]
    z = y.sum()
    assert z.item() == 600.0
    assert bool(z > 1)
    assert "200." in repr(y)
    w = y * 2
    assert np.asarray(w).tolist() == [400.0] * 3
    assert memoryview(y * 3).tolist() == [600.0] * 3
    assert np.from_dlpack(y - 1).tolist() == [199.0] * 3
    v = y + 5
    assert v.wait_to_read() is None
    kiln.synchronize()
    kiln.waitall()
    assert v.numpy().tolist() == [205.0] * 3


def test_shape_and_dtype_do_not_wait():
    kiln.set_execution("async")
    x = kiln.randn(64, 64)
    y = x @ x
    assert tuple(y.shape) == (64, 64) and y.dtype == kiln.float32


@_INLINE
def test_failure_raises_at_a_dependents_sync_naming_op_and_line(inline_bytes):
    _use_inline(inline_bytes)
    kiln.set_execution("async")
    x = kiln.ones(3, 2)
    line = inspect.currentframe().f_lineno + 1
    bad = kiln.index_select(x, 0, kiln.tensor([5]))
    dependent = (bad * 2 + 1).sum()
    unrelated = x + 1
    assert unrelated.tolist() == [[2.0, 2.0]] * 3  # other tensors stay usable
    with pytest.raises(IndexError) as info:
        dependent.item()
    message = str(info.value)
    assert message.startswith(f"index_select (issued at test_engine.py:{line}) failed while "
                              f"running asynchronously: index_select: index 5 is out of range")
    assert message.count("failed while running asynchronously") == 1
    assert "input shapes: [3, 2], [1]" in message
    kiln.synchronize()  # already raised: not again
    with pytest.raises(IndexError):  # its values never came: each read says so
        bad.tolist()


@_INLINE
def test_synchronize_raises_a_failure_nobody_read_once(inline_bytes):
    _use_inline(inline_bytes)
    kiln.set_execution("async")
    kiln.index_select(kiln.ones(2), 0, kiln.tensor([9]))
    with pytest.raises(IndexError, match="index_select"):
        kiln.synchronize()
    kiln.synchronize()


def test_context_manager_restores_the_mode_and_raises_at_exit():
    assert kiln.get_execution() == "sync"
    with kiln.execution("async"):
        assert kiln.get_execution() == "async"
        y = kiln.ones(4) * 3
    assert kiln.get_execution() == "sync"
    assert y.tolist() == [3.0] * 4
    with pytest.raises(IndexError, match="index_select"):
        with kiln.execution("async"):
            kiln.index_select(kiln.ones(2), 0, kiln.tensor([9]))
    assert kiln.get_execution() == "sync"


def test_unknown_mode_is_a_value_error():
    with pytest.raises(ValueError, match="'sync' or 'async'"):
        kiln.set_execution("lazy")


def test_environment_chooses_the_mode():
    env = dict(os.environ, KILN_EXECUTION="async")
    code = "import kiln; y = kiln.ones(2) + 1; print(kiln.get_execution(), y.tolist())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "async [2.0, 2.0]"


def test_a_long_loop_without_syncs_runs_in_bounded_memory():
    kiln.set_execution("async")
    kiln.set_engine_limits(1 << 20, 8 << 20)
    kiln.reset_engine_peak_stats()
    x = kiln.ones(256, 1024)  # 1 MiB
    y = kiln.zeros(256, 1024)
    for _ in range(300):
        y = y + x
    assert kiln.engine_stats()["peak_in_flight_bytes"] <= 8 << 20
    assert y[0, 0].item() == 300.0


@_INLINE
def test_several_python_threads_pushing(inline_bytes):
    _use_inline(inline_bytes)
    shared = kiln.full((32,), 0.5)

    def chain(seed: int) -> list[float]:
        y = kiln.full((32,), float(seed))
        for _ in range(100):
            y = y * shared + 1
        return y.tolist()

    expected = [chain(t) for t in range(4)]
    kiln.set_num_interop_threads(2)
    kiln.set_execution("async")
    got: list[list[float] | None] = [None] * 4

    def worker(t: int) -> None:
        got[t] = chain(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def test_random_draws_follow_issue_order():
    kiln.manual_seed(3)
    expected = [kiln.randn(5).tolist() for _ in range(3)]
    kiln.set_execution("async")
    kiln.manual_seed(3)
    draws = [kiln.randn(5) for _ in range(3)]
    assert [d.tolist() for d in draws] == expected


def test_a_failed_compiled_call_poisons_neither_generator_nor_plan():
    def pick(x, index):
        return kiln.index_select(x, 0, index) * 2
    compiled = kiln.jit.trace(pick, (kiln.ones(3, 2), kiln.tensor([1])))
    kiln.set_execution("async")
    bad = compiled(kiln.ones(3, 2), kiln.tensor([7]))
    with pytest.raises(IndexError, match="compiled graph .*index 7 is out of range"):
        bad.tolist()
    kiln.manual_seed(0)
    draw = kiln.randn(4).tolist()  # the generator only orders draws
    assert compiled(kiln.ones(3, 2), kiln.tensor([2])).tolist() == [[2.0, 2.0]]
    kiln.set_execution("sync")
    kiln.manual_seed(0)
    assert kiln.randn(4).tolist() == draw


def test_small_ops_run_at_once_unless_they_wait_on_a_queued_op():
    kiln.set_execution("async")
    small = kiln.ones(8)
    before = kiln.engine_stats()
    a = small * 3 + 1
    after = kiln.engine_stats()
    assert after["ran_inline"] - before["ran_inline"] >= 2
    assert after["pushed"] == before["pushed"]
    big = kiln.ones(256, 256) @ kiln.ones(256, 256)  # queued: 768 KiB touched
    tail = big.sum(0)[:4] * 2  # reads the queued result: queued behind it
    after_big = kiln.engine_stats()
    assert after_big["pushed"] - after["pushed"] >= 3
    assert tail.tolist() == [2.0 * 256 * 256] * 4
    assert a.tolist() == [4.0] * 8
    _use_inline(0)
    before = kiln.engine_stats()
    b = small * 3
    assert kiln.engine_stats()["ran_inline"] == before["ran_inline"]
    assert b.tolist() == [3.0] * 8


def test_engine_limits_are_checked():
    kiln.set_engine_limits(16, 1 << 20, inline_bytes=4096)
    with pytest.raises(ValueError, match="inline_bytes"):
        kiln.set_engine_limits(32, 2 << 20, inline_bytes=-1)
    assert kiln.engine_limits() == (16, 1 << 20, 4096)  # a refused call changes nothing
    kiln.set_engine_limits(8, 1 << 20)  # inline_bytes kept
    assert kiln.engine_limits() == (8, 1 << 20, 4096)
    kiln.set_engine_limits(*_DEFAULT_LIMITS)


def test_the_trace_shows_queued_kernels_per_worker(tmp_path):
    kiln.set_num_interop_threads(1)  # with two, the waiting caller may run some
    kiln.set_execution("async")
    a, b = kiln.ones(256, 256), kiln.ones(256, 256)
    kiln.synchronize()
    with kiln.profiler.profile() as prof:
        c = a @ a  # queued (large), two independent chains
        d = b @ b
        e = (c + d).sum()
        e.item()
    kernels = [ev for ev in prof.events() if ev.kind == "kernel"]
    issued = [ev for ev in prof.events() if ev.kind == "op"]
    assert sorted(ev.name for ev in kernels) == ["add", "matmul", "matmul", "sum"]
    issue_threads = {ev.thread for ev in issued}
    for ev in kernels:
        assert ev.thread not in issue_threads  # on a worker
        assert 0 <= ev.queued_us <= ev.start_us
    assert all(ev.queued_us is None for ev in issued)
    keys = {row.key for row in prof.key_averages()}
    assert {"matmul", "matmul (kernel)"} <= keys
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    workers = {ev["tid"] for ev in trace
               if ev["ph"] == "M" and ev["args"]["name"].startswith("engine worker")}
    queued = [ev for ev in trace if ev["ph"] == "X" and ev["cat"] == "kernel"]
    assert len(queued) == 4 and {ev["tid"] for ev in queued} <= workers
    for ev in queued:
        assert ev["args"]["Queued"] + ev["args"]["Queue wait"] == pytest.approx(ev["ts"], abs=1e-3)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_backward_optimizers_and_the_data_loader_never_wait(optimizer):
    from kiln.utils.data import DataLoader, TensorDataset

    kiln.manual_seed(0)
    nn = kiln.nn
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 2))
    opt = getattr(kiln.optim, optimizer)(model.parameters(), lr=0.01)
    data = TensorDataset(kiln.randn(256, 512), kiln.randint(0, 2, (256,)))
    kiln.set_execution("async")
    before = kiln.engine_stats()
    for x, target in DataLoader(data, batch_size=64, shuffle=True):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), target).backward()
        opt.step()
    after = kiln.engine_stats()
    assert after["pushed"] - before["pushed"] >= 4 * 20  # the kernels were queued...
    assert after["sync_waits"] == before["sync_waits"]  # ...and nothing waited for them
    weights = [p.detach().numpy().copy() for p in model.parameters()]
    kiln.set_execution("sync")
    kiln.manual_seed(0)
    model_sync = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 2))
    opt_sync = getattr(kiln.optim, optimizer)(model_sync.parameters(), lr=0.01)
    data_sync = TensorDataset(kiln.randn(256, 512), kiln.randint(0, 2, (256,)))
    for x, target in DataLoader(data_sync, batch_size=64, shuffle=True):
        opt_sync.zero_grad()
        nn.functional.cross_entropy(model_sync(x), target).backward()
        opt_sync.step()
    for got, expected in zip(weights, model_sync.parameters()):
        np.testing.assert_array_equal(got, expected.detach().numpy())


@pytest.fixture
def _busy_fallback_on():
    """The fallback on (conftest.py turns it off for the session); the
    programs force it on and off themselves."""
    kiln.set_engine_busy_fallback(True)
    yield
    kiln._C._engine_prefer_caller_for(0)
    kiln.set_engine_busy_fallback(False)


def _views_and_writes(seed: int, flip: bool = False) -> list[np.ndarray]:
    """A random DAG of large and small ops (in place, through strided views
    and transposes) without random draws, so that several Python threads
    can each run one and still get sync mode's values. With `flip`, the
    busy-core fallback is forced on or off at random steps."""
    rng = np.random.default_rng(seed)
    flips = np.random.default_rng(seed + 1000)  # apart: the program stays the same
    ts = [kiln.tensor(rng.standard_normal((96, 96)).astype(np.float32)) for _ in range(4)]
    ts += [kiln.tensor(rng.standard_normal(4).astype(np.float32)) for _ in range(2)]
    for _ in range(50):
        if flip and flips.integers(4) == 0:
            kiln._C._engine_prefer_caller_for(int(flips.integers(2)) * 60_000)
        kind, i, j = int(rng.integers(9)), int(rng.integers(4)), int(rng.integers(4))
        a, b = ts[i], ts[j]
        if kind == 0:
            ts[i] = a @ b * 0.02
        elif kind == 1:
            a.add_(b * 0.1)
        elif kind == 2:
            a[:48].mul_(0.5)
        elif kind == 3:
            ts[j] = (a.t() + b).contiguous() * 0.3
        elif kind == 4:
            ts[4].add_(a[0, :4])  # small, reads a large pending storage
        elif kind == 5:
            a[1, :4].copy_(ts[5])  # small, writes into a large storage
        elif kind == 6:
            ts[5] = ts[4] * ts[5] + 1.0
        elif kind == 7:
            ts[i] = kiln.tanh(a)
        else:
            a[::2, ::3].sub_(b[::2, ::3] * 0.01)
    return [t.numpy().copy() for t in ts]


def _run_in_threads(workers: int, flip: bool, threads: int) -> None:
    seeds = list(range(12))
    expected = [_views_and_writes(seed) for seed in seeds]
    kiln.set_num_interop_threads(workers)
    kiln.set_execution("async")
    got: list[list[np.ndarray] | None] = [None] * len(seeds)

    def run(chunk: list[int]) -> None:
        for seed in chunk:
            got[seed] = _views_and_writes(seed, flip)

    pool = [threading.Thread(target=run, args=(seeds[t::threads],)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    kiln._C._engine_prefer_caller_for(0)
    kiln.set_execution("sync")
    for seed in seeds:
        assert got[seed] is not None, f"seed {seed} raised in its thread"
        for k, (g, e) in enumerate(zip(got[seed], expected[seed])):
            np.testing.assert_array_equal(g, e, err_msg=f"seed {seed}, tensor {k}")


@pytest.mark.parametrize("workers", [1, 2])
def test_random_programs_equal_sync_while_the_busy_fallback_flips(workers, _busy_fallback_on):
    # Ops switch between the workers and the caller while earlier ones on
    # the same storages are still queued.
    _run_in_threads(workers, flip=True, threads=1)


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_several_python_threads_run_random_programs(workers, flip, _busy_fallback_on):
    _run_in_threads(workers, flip, threads=3)
