"""kiln.profiler: where the time goes, as torch.profiler shows it.

    with kiln.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        with kiln.profiler.record_function("model_inference"):
            model(x)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")     # open in https://ui.perfetto.dev

It records every eager op, every step of a compiled plan (a compiled call
is one "CompiledFunction" range holding its steps), each autograd backward
node, and the ranges of record_function. The recorder is C++'s (the same
one `kiln bench model.kiln --profile` prints): a range's self time is its
time less the ranges nested in it on its thread. Times are CPU wall times
of the C++ work; the Python around each op is not in them.
"""
from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kiln import _C

__all__ = ["ProfilerActivity", "profile", "record_function"]

_P = _C.profiler
_F = TypeVar("_F", bound=Callable[..., Any])


class ProfilerActivity(enum.Enum):
    """What to record; kiln runs on the CPU, so CPU is the one activity."""

    CPU = "cpu"


class EventList(list):
    """Averages (key_averages) or events, with PyTorch's table."""

    def __init__(self, items: Iterable[Any], profile_memory: bool = False) -> None:
        super().__init__(items)
        self._profile_memory = profile_memory

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: str | None = None,
    ) -> str:
        """The table torch's key_averages().table() prints: Name, Self CPU %,
        Self CPU, CPU total %, CPU total, CPU time avg, (CPU Mem, Self CPU Mem
        with profile_memory), # of Calls, (Input Shapes when grouped by
        them). sort_by: None (as recorded) or a column, e.g.
        "self_cpu_time_total", "cpu_time_total", "count"."""
        rows = [r if isinstance(r, _P.EventAverage) else None for r in self]
        if any(r is None for r in rows):
            raise TypeError("table() is for key_averages(); call prof.key_averages().table()")
        text = _P.table(
            rows,
            sort_by or "",
            row_limit,
            self._profile_memory,
            max_name_column_width,
            max_shapes_column_width,
        )
        if header is None:
            return text
        width = len(text.split("\n", 1)[0])
        return "=" * width + "\n" + header + "\n" + text


class profile:
    """Records what runs between __enter__ and __exit__ (or start and stop).

    activities: only ProfilerActivity.CPU. record_shapes: the input shapes
    of every op and step (key_averages(group_by_input_shape=True) splits by
    them). profile_memory: bytes allocated less bytes freed inside each range.
    """

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        *,
        record_shapes: bool = False,
        profile_memory: bool = False,
        enabled: bool = True,
    ) -> None:
        for activity in activities or [ProfilerActivity.CPU]:
            if activity != ProfilerActivity.CPU:
                raise ValueError(f"kiln.profiler: kiln records CPU activity only, got {activity}")
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.enabled = enabled
        self._session: Any = None

    def start(self) -> profile:
        if self.enabled:
            self._session = _P.Profile(self.record_shapes, self.profile_memory)
        return self

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()

    def __enter__(self) -> profile:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _stopped(self) -> Any:
        if self._session is None:
            return None
        if not self._session.stopped:
            raise RuntimeError(
                "kiln.profiler: the profile is still recording; leave its `with` first"
            )
        return self._session

    def events(self) -> EventList:
        """Every range recorded, by thread and start time (name, kind,
        thread, depth, start_us, duration_us, self_cpu_time_total,
        input_shapes, ...). In async mode a queued op's kernel is an event
        of kind "kernel" on the engine worker that ran it, with queued_us."""
        session = self._stopped()
        return EventList(session.events if session else [], self.profile_memory)

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """One row per name (and input shapes, which only
        profile(record_shapes=True) records): count, self_cpu_time_total,
        cpu_time_total, cpu_time (average), memory; times in microseconds."""
        session = self._stopped()
        rows = session.key_averages(group_by_input_shape) if session else []
        return EventList(rows, self.profile_memory)

    def table(self, *args: Any, **kwargs: Any) -> str:
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path: str) -> None:
        """Writes the Chrome trace event format (JSON): Perfetto
        (ui.perfetto.dev) and chrome://tracing open it."""
        session = self._stopped()
        if session is None:
            raise RuntimeError("kiln.profiler: the profile was not enabled; nothing to export")
        session.export_chrome_trace(str(path))


class record_function:
    """A range of the user's, named: `with record_function("attention"):`
    or as a decorator. Records only while a profile does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._opened = False

    def __enter__(self) -> record_function:
        self._opened = _P.push_range(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._opened:
            _P.pop_range()
            self._opened = False

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name):
                return fn(*args, **kwargs)

        return wrapped  # type: ignore[return-value]
