"""DistributedDataParallel: one model per process, gradients averaged over
the processes during backward, as torch.nn.parallel.DistributedDataParallel.

    dist.init_process_group("mpi")             # mpirun -np 4 python train.py
    model = nn.parallel.DistributedDataParallel(model)
    loss = criterion(model(x), y); loss.backward(); opt.step()

Construction broadcasts rank 0's parameters and buffers, so every rank
starts from the same weights. Each forward first broadcasts rank 0's
buffers (batch-norm statistics) when broadcast_buffers. Backward all-reduces
the gradients in buckets while it runs (nn/parallel/_reducer.py); when
backward returns, every parameter's .grad holds the average over the ranks.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import kiln
from kiln import _C
from kiln import distributed as dist
from kiln._C import Tensor
from kiln.nn.module import Module
from kiln.nn.parallel._reducer import Reducer, recording

__all__ = ["DistributedDataParallel"]


def _broadcast_coalesced(tensors: list[Tensor], src: int = 0) -> None:
    """Overwrites `tensors` with rank src's: one broadcast per dtype, through
    a flat buffer, then copies back with kiln ops (which bump the versions
    compiled models key their packed weights on)."""
    by_dtype: dict[Any, list[Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    with kiln.no_grad():
        for group in by_dtype.values():
            flat = kiln.cat([t.detach().reshape(-1) for t in group])
            dist.broadcast(flat, src)
            offset = 0
            for t in group:
                n = t.numel()
                t.detach().copy_(flat[offset:offset + n].view(t.shape))
                offset += n


def _broadcast_recorded(tensors: list[Tensor], src: int = 0) -> None:
    """_broadcast_coalesced as graph ops, for a step being recorded. The
    graph's collective is an all-reduce, so every rank but src contributes
    zeros to a sum: 0 + v is v exactly (inf, NaN and integers included; a
    bool sum is an or). Buffers are small, so the doubled traffic is cheap."""
    rank = dist.get_rank()
    by_dtype: dict[Any, list[Tensor]] = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    with kiln.no_grad():
        for dtype, group in by_dtype.items():
            parts = [t.detach() if rank == src else kiln.zeros_like(t) for t in group]
            token = _C.dispatch("all_reduce_start", parts, {"op": "sum"})
            total = sum(t.numel() for t in group)
            flat = _C.dispatch("all_reduce_wait", [token], {"numel": total, "dtype": dtype})
            offset = 0
            for t in group:
                n = t.numel()
                t.detach().copy_(flat[offset:offset + n].view(t.shape))
                offset += n


class DistributedDataParallel(Module):
    """Wraps `module` for data-parallel training over the default process
    group (kiln.distributed.init_process_group first).

    bucket_cap_mb: size of the gradient buckets (default 25; the first is
    capped at 1 MiB). find_unused_parameters: parameters that got no
    gradient in a backward count as ready with a zero gradient (without it,
    such a backward raises, naming them). broadcast_buffers: rank 0's buffers
    overwrite the others' at the start of each forward outside no_sync().
    gradient_as_bucket_view: .grad becomes a view into the bucket (saves a
    copy). device_ids, output_device and dim are accepted for PyTorch's
    signature (kiln's DDP is for CPU processes: one model per process).
    static_graph is accepted and changes nothing."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, process_group: Any = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, init_sync: bool = True) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call kiln.distributed.init_process_group(\"mpi\") "
                               "first, in a program launched with mpirun")
        if process_group is not None:
            raise NotImplementedError("DistributedDataParallel: only the default process group "
                                      "is supported (process_group=None)")
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise ValueError("DistributedDataParallel: kiln runs one CPU model per process; "
                             f"device_ids={device_ids!r}, output_device={output_device!r} "
                             "must be None")
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got "
                             f"{bucket_cap_mb}")
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.require_backward_grad_sync = True
        self.dim = dim
        if init_sync:
            _broadcast_coalesced([p for _, p in module.named_parameters()]
                                 + [b for _, b in self._named_buffers()])
        reducer = Reducer(named, self.bucket_bytes_cap, find_unused_parameters,
                          gradient_as_bucket_view)
        object.__setattr__(self, "reducer", reducer)

    def _named_buffers(self) -> list[tuple[str, Tensor]]:
        # Read on each use: a module may assign a new tensor to a buffer.
        return [(name, b) for name, b in self.module.named_buffers() if b is not None]

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if recording():
            self._check_recordable()
        sync = self.require_backward_grad_sync
        if self.broadcast_buffers and sync:
            buffers = [b for _, b in self._named_buffers()]
            if buffers and recording():
                _broadcast_recorded(buffers)
            elif buffers:
                _broadcast_coalesced(buffers)
        output = self.module(*inputs, **kwargs)
        if sync and kiln.is_grad_enabled():
            self._watch_outputs(output)
        return output

    def _check_recordable(self) -> None:
        """A compiled step (kiln.compile of forward, backward and step)
        records the gradient all-reduces as graph ops; what still needs a
        decision or an MPI call outside the graph on every step is refused,
        naming it."""
        cannot = ("DistributedDataParallel: cannot record this forward into a compiled step "
                  "(kiln.compile, kiln.jit.trace): ")
        if not self.require_backward_grad_sync:
            raise RuntimeError(cannot + "inside no_sync() the step would be recorded without "
                               "its all-reduces and replay so; call the compiled step outside "
                               "no_sync(), or accumulate with eager steps")
        if self.find_unused_parameters:
            raise RuntimeError(cannot + "find_unused_parameters=True decides on every backward "
                               "which parameters got a gradient, which a graph cannot; "
                               "construct it without find_unused_parameters, or keep the step "
                               "eager")

    def _watch_outputs(self, output: Any) -> None:
        """A hook on each output that backward will reach: backward queues
        the end-of-backward callback as soon as it starts."""
        for t in _tensors_in(output):
            if t.requires_grad and not t.is_leaf:
                t.register_hook(_start_backward(self.reducer))

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward inside this context accumulates gradients locally, with
        no communication; the first backward after it averages the sum."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        self.reducer.sync_enabled = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous
            self.reducer.sync_enabled = previous

    def hybridize(self, *args: Any, **kwargs: Any) -> DistributedDataParallel:
        """Hybridizes the wrapped module (its compiled backward hands each
        parameter's gradient to the reducer's hooks as eager backward does);
        the wrapper itself stays eager: its all-reduces run from the
        gradient hooks. kiln.compile of a whole training step records them
        as graph ops instead."""
        self.module.hybridize(*args, **kwargs)
        return self

    def extra_repr(self) -> str:
        return (f"bucket_cap_mb={self.bucket_bytes_cap / (1024 * 1024):g}, "
                f"find_unused_parameters={self.find_unused_parameters}, "
                f"broadcast_buffers={self.broadcast_buffers}")


def _tensors_in(output: Any) -> Iterator[Tensor]:
    """The tensors in a forward's output (nested tuples, lists, dicts)."""
    if isinstance(output, Tensor):
        yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors_in(item)
    elif isinstance(output, dict):
        for item in output.values():
            yield from _tensors_in(item)


def _start_backward(reducer: Reducer) -> Any:
    def hook(_: Tensor) -> None:
        reducer.start_backward()
    return hook
