"""One rank of tests/python/test_distributed_collectives.py, run under mpirun.

    mpirun -np N python distributed_collectives_worker.py SCENARIO OUT_DIR

Each rank writes OUT_DIR/rank<r>.txt: "ok <checks>" or the error it saw,
so the test reads every rank's outcome even when mpirun ends the job early.
Scenarios: collectives (every call against NumPy), desync, timeout, kill.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback

import numpy as np

import kiln
import kiln.distributed as dist
import kiln.profiler

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}


class Checker:
    def __init__(self) -> None:
        self.count = 0

    def equal(self, got, want, what: str) -> None:
        got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
        want = np.asarray(want)
        self.count += 1
        if got.shape != want.shape or got.dtype != want.dtype:
            raise AssertionError(
                f"{what}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}"
            )
        if not np.allclose(got, want, rtol=1e-6, atol=1e-6):
            raise AssertionError(f"{what}: got {got.tolist()}, want {want.tolist()}")


def rank_data(rank: int, shape, dtype: str, salt: int = 0) -> np.ndarray:
    rng = np.random.default_rng(1000 * salt + rank)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, size=shape).astype(DTYPES[dtype])
    return rng.standard_normal(shape).astype(DTYPES[dtype])


def reduce_np(arrays, op: str):
    stacked = np.stack(arrays)
    if stacked.dtype == np.bool_:
        return stacked.all(0) if op == "MIN" else stacked.any(0)
    if op == "SUM":
        return stacked.sum(0).astype(stacked.dtype)
    if op == "AVG":
        return (stacked.sum(0) / len(arrays)).astype(stacked.dtype)
    return stacked.max(0) if op == "MAX" else stacked.min(0)


def check_all_reduce(c: Checker, rank: int, world: int) -> None:
    salt = 0
    for dtype in DTYPES:
        ops = ["SUM", "MAX", "MIN"] + (["AVG"] if dtype.startswith("float") else [])
        for op in ops:
            for async_op in (False, True):
                salt += 1
                shape = (3, 5)
                t = kiln.tensor(rank_data(rank, shape, dtype, salt))
                work = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=async_op)
                if async_op:
                    work.wait()
                else:
                    assert work is None, "a synchronous all_reduce returns None"
                want = reduce_np([rank_data(r, shape, dtype, salt) for r in range(world)], op)
                c.equal(t, want, f"all_reduce {dtype} {op} async={async_op}")
    # A strided tensor: the result lands in the view, the rest stays.
    base = kiln.tensor(rank_data(rank, (4, 6), "float32", 99))
    view = base.t()[1:4]
    dist.all_reduce(view)
    want_base = rank_data(rank, (4, 6), "float32", 99)
    want_base.T[1:4] = sum(rank_data(r, (4, 6), "float32", 99).T[1:4] for r in range(world))
    c.equal(base, want_base, "all_reduce of a transposed slice")
    # An in-place write, as autograd sees it: a saved tensor changed under it.
    w = kiln.ones(3, requires_grad=True) * 1
    loss = (w * w).sum()
    dist.all_reduce(w, group=dist.group.WORLD)
    try:
        loss.backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e) or "version" in str(e), str(e)
        c.count += 1
    else:
        raise AssertionError("backward through a tensor all_reduce overwrote did not raise")
    try:
        dist.all_reduce(kiln.tensor([1, 2]), op=dist.ReduceOp.AVG)
    except ValueError as e:
        assert "AVG" in str(e), str(e)
        c.count += 1
    else:
        raise AssertionError("AVG on an int64 tensor did not raise")


def check_progress(c: Checker, rank: int, world: int) -> None:
    """An async all_reduce completes while the caller only sleeps."""
    t = kiln.ones(1000) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 20
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert work.is_completed(), "an async all_reduce made no progress without wait()"
    work.wait()
    c.equal(t, np.full(1000, world * (world + 1) / 2, np.float32), "async progress")
    assert 0 < work.started_ns <= work.finished_ns, (work.started_ns, work.finished_ns)
    # The profiler sees each collective as a range on the communication thread.
    with kiln.profiler.profile() as prof:
        dist.all_reduce(t)
        dist.broadcast(t, 0)
    names = [e.name for e in prof.events()]
    assert "kiln.distributed.all_reduce" in names and "kiln.distributed.broadcast" in names, names
    c.count += 1


def check_broadcast_gather_scatter(c: Checker, rank: int, world: int) -> None:
    for src in range(world):
        for dtype in ("float32", "int64", "bool"):
            t = kiln.tensor(rank_data(rank, (2, 3), dtype, 7))
            dist.broadcast(t, src=src)
            c.equal(t, rank_data(src, (2, 3), dtype, 7), f"broadcast {dtype} from {src}")
    t = kiln.tensor(rank_data(rank, (5,), "float64", 8))
    dist.broadcast(t, 0, async_op=True).wait()
    c.equal(t, rank_data(0, (5,), "float64", 8), "async broadcast")

    for dtype in ("float32", "int32"):
        mine = kiln.tensor(rank_data(rank, (2, 2), dtype, 9))
        outs = [kiln.zeros(2, 2, dtype=mine.dtype) for _ in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            c.equal(outs[r], rank_data(r, (2, 2), dtype, 9), f"all_gather {dtype} [{r}]")
    mine = kiln.tensor(rank_data(rank, (3,), "float32", 10))
    stacked = kiln.zeros(world, 3)
    dist.all_gather_into_tensor(stacked, mine)
    c.equal(
        stacked,
        np.stack([rank_data(r, (3,), "float32", 10) for r in range(world)]),
        "gather stacked",
    )
    flat = kiln.zeros(world * 3)
    dist.all_gather_into_tensor(flat, mine)
    c.equal(
        flat,
        np.concatenate([rank_data(r, (3,), "float32", 10) for r in range(world)]),
        "gather flat",
    )

    for op in ("SUM", "AVG", "MAX", "MIN"):
        inputs = [kiln.tensor(rank_data(rank, (4,), "float32", 20 + i)) for i in range(world)]
        out = kiln.zeros(4)
        dist.reduce_scatter(out, inputs, op=getattr(dist.ReduceOp, op))
        want = reduce_np([rank_data(r, (4,), "float32", 20 + rank) for r in range(world)], op)
        c.equal(out, want, f"reduce_scatter {op}")


def check_point_to_point(c: Checker, rank: int, world: int) -> None:
    # A ring: even ranks send first, so blocking calls cannot wait on each other.
    right, left = (rank + 1) % world, (rank - 1) % world
    mine = kiln.tensor(rank_data(rank, (6,), "float32", 30))
    got = kiln.zeros(6)
    if rank % 2 == 0:
        dist.send(mine, right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(mine, right)
    c.equal(got, rank_data(left, (6,), "float32", 30), "send/recv ring")
    got = kiln.zeros(6, dtype=kiln.int64)
    receiving = dist.irecv(got, left, tag=5)
    sending = dist.isend(kiln.tensor(rank_data(rank, (6,), "int64", 31)), right, tag=5)
    sending.wait()
    receiving.wait()
    c.equal(got, rank_data(left, (6,), "int64", 31), "isend/irecv ring")


def check_async_execution(c: Checker, rank: int, world: int) -> None:
    """Collectives see the queued ops before them; ops after them see the result."""
    with kiln.execution("async"):
        x = kiln.zeros(256)
        for _ in range(50):
            x = x + (rank + 1)  # queued: the collective must wait for them
        dist.all_reduce(x)
        y = x * 2  # queued after a synchronous collective: sees its result
        z = kiln.ones(128) * (rank + 1)
        work = dist.all_reduce(z, async_op=True)
        work.wait()
        w = z + 0
    total = 50 * world * (world + 1) / 2
    c.equal(y, np.full(256, 2 * total, np.float32), "async execution: all_reduce ordering")
    c.equal(w, np.full(128, world * (world + 1) / 2, np.float32), "async execution: async_op")


def scenario_collectives(rank: int, world: int) -> str:
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=60))
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == world
    c = Checker()
    check_all_reduce(c, rank, world)
    check_progress(c, rank, world)
    check_broadcast_gather_scatter(c, rank, world)
    check_point_to_point(c, rank, world)
    check_async_execution(c, rank, world)
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    return f"ok {c.count}"


def scenario_desync(rank: int, world: int) -> str:
    dist.init_process_group("mpi", timeout=30)
    dist.all_reduce(kiln.ones(2))  # in step first
    t = kiln.ones(3 + (rank == world - 1))  # the last rank passes a longer tensor
    try:
        dist.all_reduce(t)
        return "no error"
    except RuntimeError as e:
        message = str(e)
    t = kiln.ones(2)
    dist.all_reduce(t)  # the group is still usable after a desync
    assert t.tolist() == [world, world], t.tolist()
    # An op that fails in the background on rank 0 (async execution): the
    # collective on its result fails on every rank, naming that failure.
    with kiln.execution("async"):
        index = kiln.tensor([5 if rank == 0 else 0])
        x = kiln.index_select(kiln.ones(3), 0, index)
        try:
            dist.all_reduce(x)
            return "no error for a failed input"
        except RuntimeError as e:
            failed = str(e)
    try:
        kiln.synchronize()
    except IndexError:
        pass  # rank 0's failure, raised once
    dist.destroy_process_group()
    return "error " + message + "\nfailed input: " + failed


def error_of(call) -> str:
    """'no error', or the RuntimeError `call` raised and how long it took."""
    start = time.monotonic()
    try:
        call()
        return "no error"
    except RuntimeError as e:
        return f"error after {time.monotonic() - start:.1f}s: {e}"


def scenario_timeout(rank: int, world: int) -> str:
    dist.init_process_group("mpi", timeout=1.5)
    dist.barrier()
    if rank == world - 1:
        time.sleep(3.5)  # late: the others time out first, then this rank does
    return error_of(lambda: dist.all_reduce(kiln.ones(4)))


def scenario_timeout_compiled(rank: int, world: int) -> str:
    """As scenario_timeout, with the all-reduce in a compiled plan (the graph
    ops DDP records in a compiled step): all_reduce_wait raises it."""
    dist.init_process_group("mpi", timeout=1.5)

    def reduce(x):
        token = kiln._C.dispatch("all_reduce_start", [x + 1], {"op": "sum"})
        return kiln._C.dispatch("all_reduce_wait", [token], {"numel": 4, "dtype": x.dtype})

    step = kiln.compile(reduce)
    if step(kiln.ones(4)).tolist() != [2.0 * world] * 4:  # records, every rank at once
        return "wrong sum"
    dist.barrier()
    if rank == world - 1:
        time.sleep(3.5)
    return error_of(lambda: step(kiln.ones(4)))  # replays the plan


def scenario_kill(rank: int, world: int) -> str:
    dist.init_process_group("mpi", timeout=3)
    dist.all_reduce(kiln.ones(4))
    if rank == 1:
        os.kill(os.getpid(), 9)
    def three_all_reduces() -> None:
        for _ in range(3):
            dist.all_reduce(kiln.ones(4))

    return error_of(three_all_reduces)


def scenario_raise(rank: int, world: int) -> str:
    """Rank 1 raises, uncaught; the others wait in an all_reduce (timeout 60 s)."""
    dist.init_process_group("mpi", timeout=60)
    dist.all_reduce(kiln.ones(4))
    if rank == 1:
        raise ValueError("rank 1 gives up")
    dist.all_reduce(kiln.ones(4))
    return "no error"


def main() -> None:
    scenario, out_dir = sys.argv[1], sys.argv[2]
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    if scenario == "raise":
        scenario_raise(rank, world)  # the exception leaves the script
    try:
        outcome = globals()[f"scenario_{scenario}"](rank, world)
    except BaseException:
        outcome = "crash " + traceback.format_exc()
    path = os.path.join(out_dir, f"rank{rank}.txt")
    with open(path + ".tmp", "w") as f:
        f.write(outcome)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    # After a broken group the process must still exit: os._exit would hide a
    # hang in MPI_Finalize, so leave the normal way (atexit destroys the group).


if __name__ == "__main__":
    main()
