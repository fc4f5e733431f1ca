"""The gradient reducer of DistributedDataParallel: buckets of parameters,
each all-reduced as soon as backward has produced its last gradient.

Note [Bucketed all-reduce during backward]: parameters are grouped, in
reverse registration order (roughly the order backward produces their
gradients), into buckets of about bucket_cap bytes (the first one capped at
1 MiB so communication starts early, as PyTorch does). A hook after each
parameter's gradient accumulation (Tensor.register_post_accumulate_grad_hook)
copies the gradient into its bucket's flat buffer; when the bucket is full
its all-reduce is issued asynchronously and backward goes on while the
communication thread moves it. Buckets are issued in index order on every
rank, whatever order their gradients arrive in, so that all ranks issue the
same collectives in the same order. A callback queued for the end of the
backward (kiln.autograd.queue_callback) issues what is left (parameters that
got no gradient, with find_unused_parameters), waits for every bucket,
averages and writes the gradients back into .grad before backward returns.

While a graph records (kiln.compile of forward, backward and the optimizer
step), the same hooks emit graph ops instead of MPI calls: a full bucket
becomes one all_reduce_start node over its gradients, and the end callback
one all_reduce_wait node per bucket followed by the division and the writes
into .grad, so the compiled step replays the all-reduces with the rest of
backward between each start and its wait (src/kiln/ops/collective_ops.h).
"""
from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

import kiln
from kiln import _C, autograd, profiler
from kiln import distributed as dist
from kiln._C import Tensor

FIRST_BUCKET_BYTES = 1024 * 1024


def recording() -> bool:
    """Whether a graph records (kiln.compile of a training step, a trace):
    the reducer then emits the collectives as graph ops
    (all_reduce_start / all_reduce_wait) rather than calling MPI, so the
    compiled step replays them."""
    return bool(_C.jit.is_recording())


class _Bucket:
    """Parameters whose gradients travel in one flat buffer."""

    def __init__(self, index: int, params: list[int], sizes: list[int], dtype: Any) -> None:
        self.index = index
        self.params = params  # indices into the reducer's parameter list
        self.offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        self.sizes = sizes
        self.flat = kiln.zeros(sum(sizes), dtype=dtype)
        self.pending = len(params)
        self.work: Any = None
        # While a graph records: the gradients as graph values, and the
        # token of the bucket's all_reduce_start node.
        self.recorded: list[Tensor | None] = [None] * len(params)
        self.token: Tensor | None = None


def assign_buckets(params: Sequence[Tensor], cap_bytes: int) -> list[list[int]]:
    """Indices of `params` per bucket: reverse order, one dtype per bucket,
    a bucket closed once it holds at least its cap (1 MiB for each dtype's
    first, then cap_bytes)."""
    open_buckets: dict[Any, list[int]] = {}
    open_bytes: dict[Any, int] = {}
    closed_count: dict[Any, int] = {}
    buckets: list[list[int]] = []
    for index in reversed(range(len(params))):
        p = params[index]
        dtype = p.dtype
        open_buckets.setdefault(dtype, []).append(index)
        open_bytes[dtype] = open_bytes.get(dtype, 0) + p.numel() * p.dtype.itemsize
        limit = min(FIRST_BUCKET_BYTES, cap_bytes) if closed_count.get(dtype, 0) == 0 \
            else cap_bytes
        if open_bytes[dtype] >= limit:
            buckets.append(open_buckets.pop(dtype))
            open_bytes[dtype] = 0
            closed_count[dtype] = closed_count.get(dtype, 0) + 1
    buckets.extend(b for b in open_buckets.values() if b)
    return buckets


def _hook_for(reducer: weakref.ref[Reducer], index: int) -> Any:
    def hook(_: Tensor) -> None:
        alive = reducer()
        if alive is not None:
            alive._mark_ready(index)
    return hook


def _remove_all(handles: list[Any]) -> None:
    for handle in handles:
        handle.remove()
    handles.clear()


class Reducer:
    """Owns the buckets and the hooks; DistributedDataParallel drives it."""

    def __init__(self, named_params: list[tuple[str, Tensor]], cap_bytes: int,
                 find_unused_parameters: bool, gradient_as_bucket_view: bool) -> None:
        self.names = [name for name, _ in named_params]
        self.params = [p for _, p in named_params]
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.world_size = dist.get_world_size()
        self.buckets: list[_Bucket] = []
        self.bucket_of: list[tuple[_Bucket, int]] = [None] * len(self.params)  # type: ignore
        for index, members in enumerate(assign_buckets(self.params, cap_bytes)):
            bucket = _Bucket(index, members, [self.params[i].numel() for i in members],
                             self.params[members[0]].dtype)
            self.buckets.append(bucket)
            for slot, i in enumerate(members):
                self.bucket_of[i] = (bucket, slot)
        self.sync_enabled = True
        # Summed over backwards: all-reduce time (on the communication
        # thread), the part of it inside backward's computation, and the
        # time backward waited for it at the end.
        self.stats = {"backwards": 0, "allreduce_s": 0.0, "hidden_s": 0.0, "exposed_wait_s": 0.0}
        self._reset()
        # The hooks hold the reducer weakly: the parameters (C++ tensors)
        # hold the hooks, and a strong reference would keep every reducer
        # of a model alive, each still reducing. A collected reducer takes
        # its hooks with it, and so does the interpreter's exit (finalize
        # runs then), before nanobind checks for Python objects C++ holds.
        this = weakref.ref(self)
        self._handles = [p.register_post_accumulate_grad_hook(_hook_for(this, i))
                         for i, p in enumerate(self.params)]
        weakref.finalize(self, _remove_all, self._handles)

    def remove_hooks(self) -> None:
        _remove_all(self._handles)

    def _reset(self) -> None:
        self.ready = [False] * len(self.params)
        self.next_to_issue = 0
        self.finish_queued = False
        self.backward_started_ns = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.params)
            bucket.work = None
            bucket.recorded = [None] * len(bucket.params)
            bucket.token = None

    # -- during backward ------------------------------------------------------
    def start_backward(self) -> None:
        """Called from a hook on forward's outputs, as backward begins, so
        that the end callback is queued even when no parameter gets a
        gradient on this rank."""
        if self.sync_enabled and not self.finish_queued:
            self.finish_queued = True
            self.backward_started_ns = time.monotonic_ns()
            autograd.queue_callback(self._finish)

    def _mark_ready(self, index: int) -> None:
        if not self.sync_enabled:
            return
        self.start_backward()
        if self.ready[index]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter '{self.names[index]}' received a gradient "
                "twice in one backward; reducing it once per backward is all that is supported")
        grad = self.params[index].grad
        self._fill(index, grad)

    def _fill(self, index: int, grad: Tensor | None) -> None:
        bucket, slot = self.bucket_of[index]
        start, size = bucket.offsets[slot], bucket.sizes[slot]
        with kiln.no_grad():
            if recording():
                p = self.params[index]
                bucket.recorded[slot] = kiln.zeros(p.shape, dtype=p.dtype) if grad is None \
                    else grad.detach()
            else:
                target = bucket.flat[start:start + size]
                if grad is None:
                    target.zero_()
                else:
                    target.copy_(grad.reshape(-1))
        self.ready[index] = True
        bucket.pending -= 1
        if bucket.pending == 0:
            self._issue_ready_buckets()

    def _issue_ready_buckets(self) -> None:
        while self.next_to_issue < len(self.buckets):
            bucket = self.buckets[self.next_to_issue]
            if bucket.pending:
                return
            with profiler.record_function(f"DDP: all_reduce bucket {bucket.index}"):
                if recording():
                    # A graph node that copies the gradients into a buffer
                    # of its own and queues its all-reduce; the compiled
                    # step runs the rest of backward before the wait.
                    with kiln.no_grad():
                        bucket.token = _C.dispatch("all_reduce_start", bucket.recorded,
                                                   {"op": "sum"})
                else:
                    bucket.work = dist.all_reduce(bucket.flat, op=dist.ReduceOp.SUM,
                                                  async_op=True)
            self.next_to_issue += 1

    # -- at the end of backward ---------------------------------------------
    def _finish(self) -> None:
        computed_ns = time.monotonic_ns()  # backward's computation is over
        try:
            unused = [i for i, done in enumerate(self.ready) if not done]
            # Issue every bucket, even when this rank then raises: the other
            # ranks are waiting for the same all-reduces.
            for i in unused:
                self._fill(i, self.params[i].grad)
            if recording():
                self._finish_recorded(unused)
                return
            start = time.perf_counter()
            for bucket in self.buckets:
                bucket.work.wait()
            self.stats["exposed_wait_s"] += time.perf_counter() - start
            self._count_overlap(computed_ns)
            if unused and not self.find_unused_parameters:
                raise RuntimeError(self._unused_message(unused))
            used_anywhere = self._used_anywhere(unused)
            self._write_back(used_anywhere)
        finally:
            self._reset()

    def _finish_recorded(self, unused: list[int]) -> None:
        """The end of a recorded backward: one all_reduce_wait node per
        bucket, in bucket order, then the averages into .grad as graph ops."""
        if unused:  # find_unused_parameters was refused at forward
            raise RuntimeError(self._unused_message(unused))
        reduced = []
        with kiln.no_grad():
            for bucket in self.buckets:
                total = sum(bucket.sizes)
                reduced.append(_C.dispatch("all_reduce_wait", [bucket.token],
                                           {"numel": total, "dtype": bucket.flat.dtype}))
        self._write_back([True] * len(self.params), reduced)

    def _count_overlap(self, computed_ns: int) -> None:
        # Work times are steady_clock's, which is time.monotonic_ns's clock.
        self.stats["backwards"] += 1
        for bucket in self.buckets:
            began, ended = bucket.work.started_ns, bucket.work.finished_ns
            self.stats["allreduce_s"] += (ended - began) * 1e-9
            inside = min(ended, computed_ns) - max(began, self.backward_started_ns)
            self.stats["hidden_s"] += max(inside, 0) * 1e-9

    def _unused_message(self, unused: list[int]) -> str:
        names = ", ".join(f"'{self.names[i]}'" for i in unused)
        return ("DistributedDataParallel: expected every parameter to receive a gradient in "
                f"this backward, but on rank {dist.get_rank()} these did not: {names}. Pass "
                "find_unused_parameters=True to DistributedDataParallel when forward leaves "
                "parameters unused, or make every forward output take part in the loss")

    def _used_anywhere(self, unused: list[int]) -> list[bool]:
        """Whether each parameter had a gradient on some rank: one that had
        none anywhere keeps .grad as it was (None), as in PyTorch. Every
        rank asks, whether or not it has unused parameters itself."""
        if not self.find_unused_parameters:
            return [True] * len(self.params)
        had_grad = set(range(len(self.params))) - {i for i in unused
                                                   if self.params[i].grad is None}
        flags = kiln.tensor([1.0 if i in had_grad else 0.0 for i in range(len(self.params))])
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return [bool(v > 0) for v in flags.tolist()]

    def _write_back(self, used_anywhere: list[bool],
                    reduced: list[Tensor] | None = None) -> None:
        """Divides each bucket's sum by the world size and writes the
        averages into .grad: `reduced` holds the recorded buckets' sums
        (graph values), else the buckets' own buffers hold them."""
        with kiln.no_grad():
            for b, bucket in enumerate(self.buckets):
                if reduced is None:
                    flat = bucket.flat
                    flat.div_(self.world_size)
                else:
                    flat = reduced[b] / self.world_size
                for slot, i in enumerate(bucket.params):
                    if not used_anywhere[i]:
                        continue
                    p = self.params[i]
                    start, size = bucket.offsets[slot], bucket.sizes[slot]
                    averaged = flat[start:start + size].view(p.shape)
                    if self.gradient_as_bucket_view:
                        p.grad = averaged
                    elif p.grad is None:
                        p.grad = averaged.clone()
                    else:
                        p.grad.copy_(averaged)
