"""Execution modes of the dependency engine (src/kiln/engine/engine.h).

    kiln.set_execution("async")     # ops return at once; a worker runs them
    y = x
    for _ in range(10000):
        y = y + 1                   # only queued
    print(y)                        # a sync point: waits, then prints
    with kiln.execution("async"):   # async inside, sync again after (waits)
        ...

"sync" is the default (or KILN_EXECUTION=async in the environment). Sync
points: print/repr, .item(), .tolist(), .numpy(), bool(), DLPack and
buffer exports, Tensor.wait_to_read(), kiln.synchronize(). An op that
fails in the background raises at the first sync point of a tensor that
depends on it, naming the op and the line that issued it.
"""
from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator

from kiln import _C

__all__ = ["engine_busy_fallback", "engine_limits", "engine_stats", "engine_usable_cores",
           "execution", "execution_in_effect", "get_execution", "get_num_interop_threads",
           "reset_engine_peak_stats", "set_engine_busy_fallback", "set_engine_limits",
           "set_execution", "set_num_interop_threads", "synchronize", "waitall"]

get_execution = _C.get_execution


def execution_in_effect() -> str:
    """The mode ops run in: get_execution(), except that "async" runs as
    "sync" when this process may use one core only (its CPU affinity, its
    cgroup's CPU quota, or KILN_ENGINE_CORES=1): a worker would only take
    turns with the caller there, and queueing costs more than it saves. It
    also says "sync" while async mode runs ops on the caller because its
    workers waited too long for a core (set_engine_busy_fallback)."""
    return _C.execution_in_effect()


def set_engine_busy_fallback(on: bool) -> None:
    """On (the default; KILN_ENGINE_BUSY_FALLBACK=0 starts it off): when an
    engine worker spends a quarter of its time waiting for a core (other
    programs keep the cores busy), async mode runs ops on the calling thread
    for the next second, then tries the workers again. Errors still raise at
    sync points; engine_stats()["busy_fallbacks"] counts the fallbacks."""
    _C.set_engine_busy_fallback(on)


def engine_busy_fallback() -> bool:
    return _C.engine_busy_fallback()


def engine_usable_cores() -> int:
    """The cores the engine counts for this process (read once)."""
    return _C.engine_usable_cores()

set_num_interop_threads = _C.set_num_interop_threads
get_num_interop_threads = _C.get_num_interop_threads


def set_execution(mode: str) -> None:
    """'sync' (ops run when issued) or 'async' (queued to the engine)."""
    _C.set_execution(mode)


def synchronize() -> None:
    """Waits for every queued op; raises a background failure no sync point
    has raised yet (once)."""
    _C.synchronize()


waitall = synchronize  # MXNet's name


@contextlib.contextmanager
def execution(mode: str) -> Iterator[None]:
    """Runs the block in `mode`, then restores the previous mode. Leaving it
    normally waits for the block's ops, so their failures raise here."""
    previous = get_execution()
    set_execution(mode)
    try:
        yield
    except BaseException:
        set_execution(previous)
        raise
    set_execution(previous)
    synchronize()


def set_engine_limits(max_ops: int, max_bytes: int, inline_bytes: int | None = None) -> None:
    """Backpressure: an op issued while `max_ops` ops, or ops holding
    `max_bytes` bytes of outputs per worker (`set_num_interop_threads`),
    are in flight waits for room.
    `inline_bytes` (unchanged when None): an op touching at most this many
    bytes runs at once on the caller when nothing it touches is pending
    (queueing it would cost more than its kernel); 0 queues every op."""
    if inline_bytes is None:
        inline_bytes = _C.engine_limits()[2]
    _C.set_engine_limits(max_ops, max_bytes, inline_bytes)


def engine_limits() -> tuple[int, int, int]:
    """(max_ops, max_bytes, inline_bytes)."""
    return _C.engine_limits()


def engine_stats() -> dict[str, int]:
    """The engine's counts since the process started: ops pushed (queued),
    in flight now and at the peak (and their bytes), ops run at once on the
    caller (ran_inline), queued ops a waiting caller ran itself
    (ran_by_waiting_caller) or that ran alone with every thread
    (ran_with_every_thread), sync points that had to wait (sync_waits), the
    wakeups of sleeping waiters (waiter_wakeups) and the busy-cores
    fallbacks (busy_fallbacks). docs/engine.md says when each happens."""
    return _C.engine_stats()


def reset_engine_peak_stats() -> None:
    _C.reset_engine_peak_stats()


def _wait_to_read(self: _C.Tensor) -> None:
    """Waits for the ops queued on this tensor's memory (and raises the
    failure they left)."""
    _C._wait_to_read(self)


def install_tensor_methods() -> None:
    _C.Tensor.wait_to_read = _wait_to_read


atexit.register(_C._drain)
