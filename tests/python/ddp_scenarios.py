"""DistributedDataParallel scenarios, run on every rank by test_ddp.py:

    mpirun -np N python tests/python/ddp_scenarios.py OUT_DIR [SCENARIO...]

Each rank writes OUT_DIR/rank<r>.jsonl, a line per scenario: {"name",
"rank", "ok", "detail"} (files, as mpirun may splice the ranks' stdout
lines together); an exception is caught and reported as a failure of its
scenario so that the others still run. The reference is single-process
training in the same process: the mean of every rank's loss on its own
share of the batch (what the average of the ranks' gradients equals; for
models without batch norm, the loss of the whole batch of N·b).
"""
from __future__ import annotations

import contextlib
import gc
import json
import sys
import traceback
import weakref
from pathlib import Path

import numpy as np

import kiln
import kiln.distributed as dist
from kiln import nn
from kiln.nn import functional as F
from kiln.nn.parallel import DistributedDataParallel as DDP

IN, HIDDEN, OUT, BATCH, STEPS = 8, 16, 4, 6, 4


class Net(nn.Module):
    def __init__(self, batch_norm: bool = False, extra: bool = False) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(IN) if batch_norm else None
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, OUT)
        self.extra = nn.Linear(HIDDEN, OUT) if extra else None

    def forward(self, x, use_extra: bool = False):
        if self.norm is not None:
            x = self.norm(x)
        h = kiln.relu(self.fc2(kiln.relu(self.fc1(x))))
        out = self.fc3(h)
        return out + self.extra(h) if use_extra else out


def make(seed: int, **kwargs) -> Net:
    kiln.manual_seed(seed)
    return Net(**kwargs)


def data(world: int, steps: int = STEPS):
    rs = np.random.RandomState(1234)
    xs = rs.randn(steps, world * BATCH, IN).astype(np.float32)
    ys = rs.randint(0, OUT, size=(steps, world * BATCH)).astype(np.int64)
    return xs, ys


def share(a: np.ndarray, rank: int) -> kiln.Tensor:
    return kiln.tensor(a[rank * BATCH:(rank + 1) * BATCH])


def optimizer(kind: str, params):
    if kind == "sgd":
        return kiln.optim.SGD(params, lr=0.1, momentum=0.9)
    return kiln.optim.Adam(params, lr=0.01)


def max_difference(a: nn.Module, b: nn.Module) -> float:
    worst = 0.0
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        worst = max(worst, float(np.abs(p.detach().numpy() - q.detach().numpy()).max()))
    return worst


def train_both(kind: str, hybridize: str = "", flags=None, find_unused: bool = False,
               batch_norm: bool = False, extra: bool = False, bucket_cap_mb: float = 0.001,
               **ddp_options):
    """Trains DDP (rank r starts from seed r: construction must broadcast
    rank 0's weights) and the reference (seed 0); returns both models."""
    rank, world = dist.get_rank(), dist.get_world_size()
    flags = flags or [False] * world
    model = make(rank, batch_norm=batch_norm, extra=extra)
    reference = make(0, batch_norm=batch_norm, extra=extra)
    if hybridize == "model":
        model.hybridize()
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, find_unused_parameters=find_unused,
              **ddp_options)
    if hybridize == "wrapper":
        ddp.hybridize()  # hybridizes the wrapped model
    opt, opt_ref = optimizer(kind, ddp.parameters()), optimizer(kind, reference.parameters())
    xs, ys = data(world)

    def run(net, step, r):
        args = (share(xs[step], r), flags[r]) if extra else (share(xs[step], r),)
        return F.cross_entropy(net(*args), share(ys[step], r))

    for step in range(STEPS):
        opt.zero_grad()
        run(ddp, step, rank).backward()
        opt.step()
        opt_ref.zero_grad()
        losses = [run(reference, step, r) for r in range(world)]
        (sum(losses[1:], losses[0]) / world).backward()
        opt_ref.step()
    return ddp, reference


def equals_reference(kind: str, hybridize: str = "", execution: str = "sync",
                     **ddp_options) -> str:
    with kiln.execution(execution):  # async: copies and collectives wait on queued ops
        ddp, reference = train_both(kind, hybridize, **ddp_options)
    if hybridize and not ddp.module.cache_info().misses:
        raise AssertionError("the hybridized model never compiled")
    diff = max_difference(ddp.module, reference)
    assert diff < 1e-5, f"weights differ from single-process training by {diff}"
    return f"max difference {diff:.2e}"


def no_sync_accumulates() -> str:
    rank, world = dist.get_rank(), dist.get_world_size()
    model, reference, local = make(rank), make(0), make(0)
    ddp = DDP(model, bucket_cap_mb=0.001)
    xs, ys = data(world, steps=2)
    with ddp.no_sync():
        F.cross_entropy(ddp(share(xs[0], rank)), share(ys[0], rank)).backward()
    # No communication yet: the gradient is this rank's own.
    F.cross_entropy(local(share(xs[0], rank)), share(ys[0], rank)).backward()
    local_diff = max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                     for p, q in zip(ddp.module.parameters(), local.parameters(), strict=True))
    assert local_diff < 1e-6, f"inside no_sync the gradient is not the local one ({local_diff})"
    F.cross_entropy(ddp(share(xs[1], rank)), share(ys[1], rank)).backward()
    for step in range(2):
        losses = [F.cross_entropy(reference(share(xs[step], r)), share(ys[step], r))
                  for r in range(world)]
        (sum(losses[1:], losses[0]) / world).backward()
    diff = max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
               for p, q in zip(ddp.module.parameters(), reference.parameters(), strict=True))
    assert diff < 1e-6, f"accumulated gradients differ from the reference by {diff}"
    return f"max difference {diff:.2e}"


def find_unused() -> str:
    """`extra` is used on rank 0 only: its gradient is rank 0's over N."""
    rank, world = dist.get_rank(), dist.get_world_size()
    flags = [r == 0 for r in range(world)]
    ddp, reference = train_both("sgd", flags=flags, find_unused=True, extra=True)
    diff = max_difference(ddp.module, reference)
    assert diff < 1e-5, f"weights differ from the reference by {diff}"
    # Unused everywhere: no gradient, as in single-process training.
    model = make(rank, extra=True)
    ddp = DDP(model, find_unused_parameters=True)
    F.cross_entropy(ddp(share(data(world)[0][0], rank)), kiln.tensor([0] * BATCH)).backward()
    assert model.extra.weight.grad is None, "a parameter no rank used got a gradient"
    assert model.fc1.weight.grad is not None
    return f"max difference {diff:.2e}"


def unused_without_find_raises() -> str:
    rank = dist.get_rank()
    ddp = DDP(make(rank, extra=True))
    try:
        ddp(kiln.randn(BATCH, IN)).sum().backward()
    except RuntimeError as e:
        message = str(e)
        assert "'extra.weight'" in message and "'extra.bias'" in message, message
        assert "find_unused_parameters=True" in message, message
        assert "'fc1.weight'" not in message, message
    else:
        raise AssertionError("an unused parameter went unnoticed")
    # The reducer is ready for the next iteration.
    ddp(kiln.randn(BATCH, IN), True).sum().backward()
    return "raised, then trained on"


def buffers_broadcast() -> str:
    """Batch norm first: its running statistics depend on the data only.
    Each forward starts from rank 0's buffers, then updates them with this
    rank's batch."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp, reference = train_both("sgd", batch_norm=True)
    diff = max_difference(ddp.module, reference)
    assert diff < 1e-5, f"weights differ from the reference by {diff}"
    xs, _ = data(world)
    norm = nn.BatchNorm1d(IN)
    for step in range(STEPS):
        norm(share(xs[step], 0 if step < STEPS - 1 else rank))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        ours = getattr(ddp.module.norm, name).numpy()
        expected = getattr(norm, name).numpy()
        assert np.allclose(ours, expected, rtol=1e-5, atol=1e-6), (name, ours, expected)
    return "running statistics follow rank 0"


def first_bucket_issued_before_backward_ends() -> str:
    """From the profiler's trace of one backward, on this thread: the
    all-reduce of bucket 0 is issued before the last backward node starts."""
    rank = dist.get_rank()
    kiln.manual_seed(rank)
    model = nn.Sequential(*[nn.Linear(32, 32) for _ in range(4)])
    ddp = DDP(model, bucket_cap_mb=0.003)  # a bucket per layer
    loss = ddp(kiln.randn(BATCH, 32)).sum()
    with kiln.profiler.profile() as prof:
        loss.backward()
    events = list(prof.events())
    issued = [e for e in events if e.name.startswith("DDP: all_reduce bucket")]
    assert [e.name for e in issued] == [f"DDP: all_reduce bucket {i}" for i in range(4)], \
        [e.name for e in issued]
    nodes = [e for e in events if e.depth == 0 and e.thread == issued[0].thread
             and e.name.endswith(("Backward0", "Backward"))]
    last_node = max(nodes, key=lambda e: e.start_us)
    assert issued[0].start_us < last_node.start_us, \
        f"bucket 0 issued at {issued[0].start_us} us, last backward node at {last_node.start_us}"
    later = [e for e in issued if e.start_us < last_node.start_us]
    return f"{len(later)} of {len(issued)} buckets issued before the last node ({last_node.name})"


def compiled_equals_reference(kind: str, hybridize: bool = False, execution: str = "sync") -> str:
    """kiln.compile of forward, loss, backward and the optimizer step around
    DDP: the bucket all-reduces are graph ops, and replaying the step trains
    as single-process training over the whole batch. In async execution
    each step's loss is also all-reduced eagerly right behind the step, as
    a training loop logs it (traced_collectives_async_execution says why
    that could hang)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model, reference = make(rank), make(0)
    if hybridize:
        model.hybridize()  # recorded inline by the step's recording
    ddp = DDP(model, bucket_cap_mb=0.001)
    opt, opt_ref = optimizer(kind, ddp.parameters()), optimizer(kind, reference.parameters())
    xs, ys = data(world)

    @kiln.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    with kiln.execution(execution):
        for s in range(STEPS):
            loss = step(share(xs[s], rank), share(ys[s], rank))
            if execution == "async":
                dist.all_reduce(loss)
            opt_ref.zero_grad()
            losses = [F.cross_entropy(reference(share(xs[s], r)), share(ys[s], r))
                      for r in range(world)]
            mean = sum(losses[1:], losses[0]) / world
            mean.backward()
            opt_ref.step()
            if execution == "async":
                got, want = loss.item() / world, mean.item()
                assert abs(got - want) < 1e-5, f"step {s}: summed loss / world {got}, not {want}"
    info = step.cache_info()
    assert (len(info.misses), info.hits) == (1, STEPS - 1), info  # recorded once, then replayed
    diff = max_difference(ddp.module, reference)
    assert diff < 1e-5, f"weights differ from single-process training by {diff}"
    averaged = max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                   for p, q in zip(ddp.module.parameters(), reference.parameters(), strict=True))
    assert averaged < 1e-5, f"the last step's .grad is not the average ({averaged})"
    return f"max difference {diff:.2e} after {STEPS} steps, {STEPS - 1} replayed"


def compiled_step_broadcasts_buffers() -> str:
    """A compiled step over a model with batch norm: each replay starts from
    rank 0's buffers (recorded as an all-reduce where the other ranks add
    zeros), so it trains exactly as the eager DDP step, buffers included,
    while the ranks' own batches make their statistics differ in between."""
    rank, world = dist.get_rank(), dist.get_world_size()
    eager = DDP(make(rank, batch_norm=True), bucket_cap_mb=0.001)
    compiled = DDP(make(rank, batch_norm=True), bucket_cap_mb=0.001)
    opts = [optimizer("sgd", m.parameters()) for m in (eager, compiled)]
    xs, ys = data(world)

    def train(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = kiln.compile(lambda x, y: train(compiled, opts[1], x, y))
    for s in range(STEPS):
        x, y = share(xs[s], rank), share(ys[s], rank)
        train(eager, opts[0], x, y)
        step(x, y)
    info = step.cache_info()
    assert (len(info.misses), info.hits) == (1, STEPS - 1), info  # recorded once, then replayed
    diff = max_difference(eager.module, compiled.module)
    assert diff < 1e-5, f"weights differ from the eager DDP step by {diff}"
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        ours = getattr(compiled.module.norm, name).numpy()
        expected = getattr(eager.module.norm, name).numpy()
        assert np.allclose(ours, expected, rtol=1e-5, atol=1e-6), (name, ours, expected)
    # Rank 0's statistics, then this rank's last batch: they differ across
    # ranks, so equality above means the broadcast ran on every replay.
    gathered = [kiln.zeros(IN) for _ in range(world)]
    dist.all_gather(gathered, compiled.module.norm.running_mean.clone())
    if world > 1:
        assert not np.allclose(gathered[0].numpy(), gathered[1].numpy())
    return f"weights and buffers equal the eager step's (max difference {diff:.2e})"


def compiled_plan_overlaps() -> str:
    """The profiler's trace of one replayed step: an all_reduce_start step
    per bucket, its wait later, and backward steps of the plan between."""
    rank = dist.get_rank()
    kiln.manual_seed(rank)
    model = nn.Sequential(*[nn.Linear(32, 32) for _ in range(4)])
    ddp = DDP(model, bucket_cap_mb=0.003)  # a bucket per layer
    opt = kiln.optim.SGD(ddp.parameters(), lr=0.01)

    @kiln.compile
    def step(x):
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()

    x = kiln.randn(BATCH, 32)
    step(x)  # records
    with kiln.profiler.profile() as prof:
        step(x)
    events = list(prof.events())
    start = next(e for e in events if e.name == "all_reduce_start")
    # The plan's steps: the start's siblings on its thread.
    names = [e.name for e in sorted(events, key=lambda e: e.start_us)
             if e.thread == start.thread and e.depth == start.depth]
    buckets = len(ddp.reducer.buckets)
    assert names.count("all_reduce_start") == names.count("all_reduce_wait") == buckets, names
    first_start, first_wait = names.index("all_reduce_start"), names.index("all_reduce_wait")
    between = [n for n in names[first_start:first_wait] if not n.startswith("all_reduce")]
    assert between, f"nothing runs between the first start and its wait: {names}"
    return (f"{buckets} buckets, {len(names)} plan steps; between bucket 0's start and wait: "
            f"{', '.join(between)}")


def compiled_all_reduce(x):
    """The graph ops DDP emits, called directly: a sum over the ranks."""
    token = kiln._C.dispatch("all_reduce_start", [x * 2], {"op": "sum"})
    return kiln._C.dispatch("all_reduce_wait", [token], {"numel": x.numel(), "dtype": x.dtype})


def compiled_desync_raises() -> str:
    """Replayed plans whose all-reduces differ between ranks: every rank
    raises the desync error from all_reduce_wait, and the group stays
    usable."""
    rank, world = dist.get_rank(), dist.get_world_size()
    three, four = kiln.compile(compiled_all_reduce), kiln.compile(compiled_all_reduce)
    assert three(kiln.ones(3)).tolist() == [2.0 * world] * 3  # records, on every rank
    assert four(kiln.ones(4)).tolist() == [2.0 * world] * 4
    try:
        four(kiln.ones(4)) if rank == 0 else three(kiln.ones(3))  # replays
    except RuntimeError as e:
        assert "ranks called different collectives" in str(e), str(e)
        assert "all_reduce(float32 [4]" in str(e) and "all_reduce(float32 [3]" in str(e), str(e)
    else:
        raise AssertionError("different all-reduces in replayed plans did not raise")
    assert three(kiln.ones(3)).tolist() == [2.0 * world] * 3
    assert three.cache_info().hits == 2 - (rank == 0)
    return "raised on every rank; the group still works"


def traced_collectives_async_execution() -> str:
    """A traced graph holding all_reduce_start/_wait, run in async
    execution, then an eager all-reduce of its output. Queued to an engine
    worker, the graph issued its all-reduce after the eager call, which
    waited for the graph's output while the graph waited for its own
    all-reduce behind it: a deadlock no timeout ended. It runs on the
    caller's thread, issuing in program order."""
    world = dist.get_world_size()
    x = kiln.ones(20000)  # large enough to be queued whole
    traced = kiln.jit.trace(compiled_all_reduce, (x,))
    with kiln.execution("async"):
        for _ in range(3):
            out = traced(x)
            dist.all_reduce(out)
            assert out[0].item() == 2.0 * world * world, out[0].item()
    return "3 traced runs, each followed by an eager all-reduce"


def compiled_step_refuses_what_it_cannot_record() -> str:
    """What needs a host-side decision or an MPI call outside the graph on
    every step is refused while a step records, naming it; eager still
    works afterwards."""
    rank = dist.get_rank()
    cases = [
        (DDP(make(rank), find_unused_parameters=True), False,
         "find_unused_parameters=True decides"),
        (DDP(make(rank)), True, "inside no_sync()"),
    ]
    for ddp, in_no_sync, message in cases:
        @kiln.compile
        def step(x, ddp=ddp):
            ddp(x).sum().backward()

        context = ddp.no_sync() if in_no_sync else contextlib.nullcontext()
        try:
            with context:
                step(kiln.randn(BATCH, IN))
        except RuntimeError as e:
            assert message in str(e), str(e)
        else:
            raise AssertionError(f"a compiled step ran where '{message}' was expected")
        ddp(kiln.randn(BATCH, IN)).sum().backward()
    return f"{len(cases)} refusals"


def rewrapping_frees_the_old_reducer() -> str:
    """The parameters hold DDP's hooks; they must not keep the wrapper's
    reducer alive, or a model wrapped twice would reduce twice."""
    model = make(dist.get_rank())
    first = DDP(model)
    F.cross_entropy(first(kiln.randn(BATCH, IN)), kiln.tensor([0] * BATCH)).backward()
    old = weakref.ref(first.reducer)
    del first
    gc.collect()
    assert old() is None, "the first wrapper's reducer outlived it"
    second = DDP(model)
    model.zero_grad()
    F.cross_entropy(second(kiln.randn(BATCH, IN)), kiln.tensor([0] * BATCH)).backward()
    assert second.reducer.stats["backwards"] == 1
    return "freed"


def sampler_takes_the_group() -> str:
    sampler = kiln.utils.data.DistributedSampler(list(range(10)), shuffle=False)
    world, rank = dist.get_world_size(), dist.get_rank()
    assert (sampler.num_replicas, sampler.rank) == (world, rank)
    assert list(sampler) == [(rank + k * world) % 10 for k in range(len(sampler))]
    return "num_replicas and rank from the process group"


SCENARIOS = {
    "sgd_eager": lambda: equals_reference("sgd"),
    "adam_eager": lambda: equals_reference("adam"),
    "sgd_hybridized": lambda: equals_reference("sgd", hybridize="model"),
    "adam_hybridized": lambda: equals_reference("adam", hybridize="wrapper"),
    "sgd_async_execution": lambda: equals_reference("sgd", execution="async"),
    "adam_gradient_as_bucket_view": lambda: equals_reference("adam",
                                                             gradient_as_bucket_view=True),
    "no_sync": no_sync_accumulates,
    "find_unused_parameters": find_unused,
    "unused_without_find_raises": unused_without_find_raises,
    "buffers_broadcast": buffers_broadcast,
    "bucket_issued_during_backward": first_bucket_issued_before_backward_ends,
    "sgd_compiled_step": lambda: compiled_equals_reference("sgd"),
    "adam_compiled_step": lambda: compiled_equals_reference("adam"),
    "adam_compiled_step_hybridized": lambda: compiled_equals_reference("adam", hybridize=True),
    "sgd_compiled_step_async_execution": lambda: compiled_equals_reference("sgd",
                                                                           execution="async"),
    "compiled_step_broadcasts_buffers": compiled_step_broadcasts_buffers,
    "compiled_plan_overlaps": compiled_plan_overlaps,
    "compiled_desync_raises": compiled_desync_raises,
    "traced_collectives_async_execution": traced_collectives_async_execution,
    "compiled_step_refuses_what_it_cannot_record": compiled_step_refuses_what_it_cannot_record,
    "rewrapping_frees_the_old_reducer": rewrapping_frees_the_old_reducer,
    "sampler_takes_the_group": sampler_takes_the_group,
}


def main() -> None:
    dist.init_process_group("mpi", timeout=60)
    rank = dist.get_rank()
    out = Path(sys.argv[1]) / f"rank{rank}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = sys.argv[2:] or list(SCENARIOS)
    for name in names:
        try:
            ok, detail = True, SCENARIOS[name]()
        except Exception as e:  # reported, so that the other scenarios run
            ok, detail = False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        with out.open("a") as f:
            f.write(json.dumps({"name": name, "rank": rank, "ok": ok, "detail": detail}) + "\n")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
