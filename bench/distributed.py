"""Data-parallel training (SCENARIOS.md §12): W1's training step (MLP
512-256-128-2, cross-entropy, SGD) at batch 64 per rank under
nn.parallel.DistributedDataParallel, on 1 and 2 ranks of one thread each.

For each run it prints the step time and throughput per rank (and, timed
in the same processes in alternating blocks, the same step without DDP and
the DDP step compiled with kiln.compile, its all-reduces graph ops), the
all-reduce time per step (measured on the communication thread from the
work handles' start and finish times), and the share of it hidden behind
backward's computation: the part of each all-reduce that falls between the
start of backward and the end of its last node, over the whole. W1's
gradients (658 KB) fit the first bucket (1 MiB) at the default cap, so that
bucket waits for backward's last gradient and nothing can hide; the rows
with a smaller cap split them so that the first layers' all-reduce runs
while the first layer's gradients are computed.

    .venv/bin/python bench/distributed.py [--steps 200]

Each configuration is one mpirun launch of this file with --worker; rank 0
writes its numbers to a file this process reads.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BATCH, WARMUP, ROUNDS = 64, 20, 4
RUNS = [(1, 25.0), (2, 25.0), (2, 0.1), (2, 0.001)]


def worker(steps: int, bucket_cap_mb: float, out: str) -> None:
    import kiln
    import kiln.distributed as dist
    from kiln import nn
    from kiln.nn import functional as F

    kiln.set_num_threads(1)
    dist.init_process_group("mpi")
    from models.workloads import mlp

    def w1() -> nn.Module:
        kiln.manual_seed(0)
        return mlp(nn)

    ddp = nn.parallel.DistributedDataParallel(w1(), bucket_cap_mb=bucket_cap_mb)
    plain = w1()  # the same step without DDP, timed alongside
    ddp_compiled = nn.parallel.DistributedDataParallel(w1(), bucket_cap_mb=bucket_cap_mb)
    kiln.manual_seed(1 + dist.get_rank())
    x, y = kiln.randn(BATCH, 512), kiln.randint(0, 2, (BATCH,))

    def stepper(model: nn.Module, compiled: bool = False) -> Callable[[], None]:
        opt = kiln.optim.SGD(model.parameters(), lr=0.01)

        def step(x: kiln.Tensor, y: kiln.Tensor) -> None:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        run = kiln.compile(step) if compiled else step
        return lambda: run(x, y)

    steps_of = {"ddp": stepper(ddp), "plain": stepper(plain),
                "compiled": stepper(ddp_compiled, compiled=True)}
    for step in steps_of.values():
        for _ in range(WARMUP):
            step()
    stats = ddp.reducer.stats
    for key in stats:
        stats[key] = 0
    seconds = dict.fromkeys(steps_of, 0.0)
    dist.barrier()
    for _ in range(ROUNDS):  # interleaved, so that a slow moment hits both
        for name, step in steps_of.items():
            start = time.perf_counter()
            for _ in range(steps // ROUNDS):
                step()
            seconds[name] += time.perf_counter() - start
    done = steps // ROUNDS * ROUNDS
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({
            "step_ms": seconds["ddp"] / done * 1e3, "buckets": len(ddp.reducer.buckets),
            "plain_ms": seconds["plain"] / done * 1e3,
            "compiled_ms": seconds["compiled"] / done * 1e3,
            "allreduce_ms": stats["allreduce_s"] / done * 1e3,
            "exposed_ms": stats["exposed_wait_s"] / done * 1e3,
            "hidden": stats["hidden_s"] / stats["allreduce_s"] if stats["allreduce_s"] else 0.0,
        }))
    dist.destroy_process_group()


def launch(mpirun: str, ranks: int, cap: float, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
                        sys.executable, __file__, "--worker", "--steps", str(steps),
                        "--bucket-cap-mb", str(cap), "--out", str(out)],
                       check=True, env=env, timeout=600)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.bucket_cap_mb, args.out)
        return
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("bench/distributed.py: mpirun not found (apt install openmpi-bin); skipped")
        return
    print(f"DDP training of W1 (SCENARIOS.md W3a), batch {BATCH} per rank, 1 thread per rank, "
          f"{args.steps} steps (bench/distributed.py)")
    print(f"{'ranks':>5} {'bucket MB':>9} {'buckets':>7} {'step ms':>8} {'no DDP ms':>9} "
          f"{'compiled ms':>11} "
          f"{'samples/s/rank':>14} {'all-reduce ms':>13} {'waited ms':>9} {'hidden':>7}")
    for ranks, cap in RUNS:
        r = launch(mpirun, ranks, cap, args.steps)
        print(f"{ranks:>5} {cap:>9g} {r['buckets']:>7} {r['step_ms']:>8.3f} {r['plain_ms']:>9.3f} "
              f"{r['compiled_ms']:>11.3f} "
              f"{BATCH / r['step_ms'] * 1e3:>14.0f} {r['allreduce_ms']:>13.3f} "
              f"{r['exposed_ms']:>9.3f} {r['hidden']:>7.0%}")


if __name__ == "__main__":
    main()
