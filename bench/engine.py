"""The dependency engine (kiln.set_execution), side by side in one run.

1. d2l's microbenchmark (SCENARIOS.md §11): 10,000 x `y = y + 1` on a 1x2
   tensor, in async mode with y.wait_to_read() after every op against one
   kiln.synchronize() at the end (d2l measured 3.4x for MXNet; goal >= 2x),
   and async against sync mode on the same loop (goal: the engine costs at
   most 10% on this dispatch-bound loop), with the engine's cost per op;
   and the same with every op queued (inline_bytes=0: no small op runs at
   once), which shows what queueing an op and a round trip to a worker cost.
2. SCENARIOS.md's W1 training loop (MLP 512-256-128-2, SGD) in eager
   Python at batch 64, one thread per op: async against sync mode (the
   Python thread overlaps the kernels; goal >= 1.2x).
3. Two independent chains of 512x512 matmuls, and a model of two
   branches, one OpenMP thread per op: two engine workers against the same
   ops run serially (goal >= 1.7x on two cores), each followed by what
   the machine gives the same two halves without kiln's engine (two
   processes, one half each): on this VM one core often runs slower than
   the other for seconds, and then neither reaches 1.7x; and one chain
   with two workers and every thread, async against sync mode (an op that
   runs alone takes all the threads, not its worker's share).
4. W1-W3 (SCENARIOS.md's reference workloads) in eager Python in both
   modes (goal: async never more than 3% slower, or kiln picks sync by
   itself: async mode runs as sync when the process may use one core only,
   kiln.execution_in_effect() says so, and runs ops on the caller for a
   while when its workers wait for cores other programs keep busy; each
   row says how often that happened).

Variants are interleaved within each repetition, so a slow moment of the
machine hits all of them; times are the median repetition's, and ratios
the median of the repetitions' ratios.

    .venv/bin/python bench/engine.py [--reps 7] [--ops 10000]
"""
import argparse
import multiprocessing
import statistics
import time

import kiln
from models.workloads import lenet, mlp, my_model


def loop_ops(n: int, wait_each: bool) -> None:
    y = kiln.ones(1, 2)
    for _ in range(n):
        y = y + 1
        if wait_each:
            y.wait_to_read()
    kiln.synchronize()
    assert y[0, 0].item() == n + 1


def d2l_variants(n: int) -> dict:
    def sync() -> None:
        kiln.set_execution("sync")
        loop_ops(n, wait_each=False)

    def async_wait_each() -> None:
        kiln.set_execution("async")
        loop_ops(n, wait_each=True)

    def async_one_sync() -> None:
        kiln.set_execution("async")
        loop_ops(n, wait_each=False)

    def queued(wait_each: bool):
        def run() -> None:
            kiln.set_execution("async")
            limits = kiln.engine_limits()
            kiln.set_engine_limits(*limits[:2], inline_bytes=0)
            try:
                loop_ops(n, wait_each=wait_each)
            finally:
                kiln.set_engine_limits(*limits)
        return run

    return {"sync mode": sync, "async, wait_to_read each op": async_wait_each,
            "async, one synchronize at the end": async_one_sync,
            "every op queued, wait_to_read each": queued(True),
            "every op queued, one synchronize": queued(False)}


def w1_training(steps: int) -> None:
    kiln.manual_seed(0)
    nn = kiln.nn
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 2))
    opt = kiln.optim.SGD(model.parameters(), lr=0.01)
    x = kiln.randn(64, 512)
    target = kiln.randint(0, 2, (64,))
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
    loss.item()


def w1_variants(steps: int) -> dict:
    def sync() -> None:
        kiln.set_execution("sync")
        w1_training(steps)

    def run_async() -> None:
        kiln.set_execution("async")
        w1_training(steps)

    return {"sync mode": sync, "async mode": run_async}


def matmul_chains(length: int):
    """Two chains of `length` matmuls; the inputs are drawn once, outside
    the timed calls (drawing them is serial work on the generator: timed,
    it took a fifth of the serial time and capped the ratio at 1.66x)."""
    kiln.set_execution("sync")
    kiln.manual_seed(0)
    a0 = kiln.randn(512, 512)
    b0 = kiln.randn(512, 512)
    w = kiln.randn(512, 512) * (1 / 512 ** 0.5)

    def run() -> None:
        a, b = a0, b0
        for _ in range(length):
            a = a @ w  # chain 1
            b = b @ w  # chain 2: reads w too, independent of chain 1
        kiln.synchronize()
        a.wait_to_read()
        b.wait_to_read()
    return run


def chain_variants(length: int) -> dict:
    chains = matmul_chains(length)

    def serial() -> None:
        kiln.set_execution("sync")
        chains()

    def parallel() -> None:
        kiln.set_execution("async")
        chains()

    return {"serial (sync mode)": serial, "2 workers (async mode)": parallel}


def lone_chain_variants(length: int, size: int = 1024) -> dict:
    """One chain: each op runs alone, and with two workers takes every
    thread, not its worker's half (Note [A lone op takes every thread])."""
    kiln.set_execution("sync")
    kiln.manual_seed(0)
    a0 = kiln.randn(size, size)
    w = kiln.randn(size, size) * (1 / size ** 0.5)

    def in_mode(mode: str):
        def run() -> None:
            kiln.set_execution(mode)
            a = a0
            for _ in range(length):
                a = a @ w
            a.wait_to_read()
        return run
    return {"sync mode": in_mode("sync"), "2 workers (async mode)": in_mode("async")}


def inference(build, shape):
    """`calls` forward calls under no_grad, the last output read at the end
    (a user's loop over batches that looks at the result)."""
    kiln.manual_seed(0)
    model = build(kiln.nn)
    x = kiln.randn(*shape)

    def run(calls: int) -> None:
        with kiln.no_grad():
            for _ in range(calls):
                out = model(x)
            out.wait_to_read()
    return run


def training(build, shape, classes):
    """`calls` SGD steps (W3: forward, cross-entropy, backward, update), the
    loss read at the end."""
    kiln.manual_seed(0)
    model = build(kiln.nn)
    opt = kiln.optim.SGD(model.parameters(), lr=0.01)
    x = kiln.randn(*shape)
    target = kiln.randint(0, classes, (shape[0],))

    def run(calls: int) -> None:
        for _ in range(calls):
            opt.zero_grad()
            loss = kiln.nn.functional.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
        loss.item()
    return run


# Calls per repetition: about 40 ms each, so that one slow moment of the
# host (this VM's come and go within tens of ms) moves one repetition only.
WORKLOADS = {  # name: (workload, calls per repetition)
    "W1 batch 1": (lambda: inference(mlp, (1, 512)), 2500),
    "W1 batch 64": (lambda: inference(mlp, (64, 512)), 200),
    "W1 batch 1024": (lambda: inference(mlp, (1024, 512)), 12),
    "W2 batch 1": (lambda: inference(lenet, (1, 1, 28, 28)), 1000),
    "W2 batch 64": (lambda: inference(lenet, (64, 1, 28, 28)), 45),
    "W3a (W1 step, batch 64)": (lambda: training(mlp, (64, 512), 2), 60),
    "W3b (MyModel step, batch 10)": (lambda: training(my_model, (10, 10), 2), 350),
}


def mode_variants(run, calls: int) -> dict:
    def in_mode(mode: str):
        def go() -> None:
            kiln.set_execution(mode)
            run(calls)
        return go
    return {"sync": in_mode("sync"), "async": in_mode("async")}


class TwoBranches:
    """A model whose two branches (each 4 x Linear 512->512 + ReLU on a
    batch of 128) only meet at the end: independent work for two workers."""

    def __init__(self):
        nn = kiln.nn

        def branch():
            layers = []
            for _ in range(4):
                layers += [nn.Linear(512, 512), nn.ReLU()]
            return nn.Sequential(*layers)
        kiln.manual_seed(0)
        self.a, self.b = branch(), branch()
        for p in [*self.a.parameters(), *self.b.parameters()]:
            p.requires_grad_(False)  # inference weights: traced as constants
        self.x = kiln.randn(128, 512)

    def __call__(self, calls: int = 1) -> None:
        with kiln.no_grad():
            for _ in range(calls):
                out = self.a(self.x) + self.b(self.x)
                out.wait_to_read()

    def compiled(self):
        """The model traced: one plan whose two branches are concurrent steps."""
        with kiln.no_grad():
            traced = kiln.jit.trace(lambda x: self.a(x) + self.b(x), (self.x,))

        def run(calls: int = 1) -> None:
            with kiln.no_grad():
                for _ in range(calls):
                    traced(self.x).wait_to_read()
        return run


def one_chain(length: int):
    """One of matmul_chains' two chains: half its work."""
    kiln.manual_seed(0)
    a0 = kiln.randn(512, 512)
    w = kiln.randn(512, 512) * (1 / 512 ** 0.5)

    def run() -> None:
        a = a0
        for _ in range(length):
            a = a @ w
        a.wait_to_read()
    return run


def one_branch(calls: int):
    """One of TwoBranches' branches, called as its model is: half its work."""
    model = TwoBranches()

    def run() -> None:
        with kiln.no_grad():
            for _ in range(calls):
                model.a(model.x).wait_to_read()
    return run


def _half_process(conn, work: str, size: int) -> None:
    """A process of TwoProcesses: one thread, sync mode, runs its half
    each time it is told to, until told to stop."""
    kiln.set_num_threads(1)
    kiln.set_num_interop_threads(1)
    kiln.set_execution("sync")
    run = one_chain(size) if work == "chain" else one_branch(size)
    while conn.recv():
        run()
        conn.send(True)


class TwoProcesses:
    """What this machine gives two independent halves of work right now:
    two processes, one half each, told to start together; no engine and
    nothing shared. Serial time over theirs is about what two workers can
    reach at the time. It is 2x on two free cores; on this VM a core often
    runs slower than the other for seconds, and the ratio falls with it (a
    matmul chain pinned to each CPU in turn took 43 ms on one and 72 ms on
    the other)."""

    def __init__(self, work: str, size: int):
        context = multiprocessing.get_context("spawn")  # no fork of OpenMP's threads
        self.conns, self.processes = [], []
        for _ in range(2):
            ours, theirs = context.Pipe()
            process = context.Process(target=_half_process, args=(theirs, work, size),
                                      daemon=True)
            process.start()
            self.conns.append(ours)
            self.processes.append(process)

    def __call__(self) -> None:
        for conn in self.conns:
            conn.send(True)
        for conn in self.conns:
            conn.recv()

    def close(self) -> None:
        for conn in self.conns:
            conn.send(False)
        for process in self.processes:
            process.join()


def busy(before: int) -> str:
    """What the engine's busy-cores fallback did since `before`."""
    n = kiln.engine_stats()["busy_fallbacks"] - before
    return f"; cores busy: async ran ops on the caller {n}x" if n else ""


def fallbacks() -> int:
    return kiln.engine_stats()["busy_fallbacks"]


class Timings(dict):
    """Each variant's median time; ratio() pairs the variants' runs of the
    same repetition (run back to back), so a slow stretch of the machine
    longer than one run moves one pair, not one side of the ratio."""

    def __init__(self, runs: dict):
        super().__init__({name: statistics.median(t) for name, t in runs.items()})
        self.runs = runs

    def ratio(self, a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(self.runs[a], self.runs[b]))


def measure(variants: dict, reps: int, setup=None) -> Timings:
    """Each variant runs once untimed first (a pool's threads start,
    buffers and primitives are made), then `reps` times, interleaved."""
    times = {name: [] for name in variants}
    for name, run in variants.items():
        if setup:
            setup(name)
        run()
    for _ in range(reps):
        for name, run in variants.items():
            if setup:
                setup(name)
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    kiln.set_execution("sync")
    return Timings(times)


def print_two_processes(two: TwoProcesses, serial, ratio: float, reps: int) -> None:
    """The same work in two processes, measured right after the row and not
    interleaved with it: the busy-cores watch (Note [Busy cores]) would count
    the two processes as other programs keeping the cores busy, and send the
    next second of async ops to the caller."""
    timings = measure({"serial": serial, "2 processes": two}, reps)
    two.close()
    machine = timings.ratio("serial", "2 processes")
    print(f"  {'serial / 2 processes, one half each':<36} {machine:8.2f}x  (no engine: what the "
          f"machine gave just after;")
    print(f"    2 workers / 2 processes {ratio / machine:.2f})")


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--chain", type=int, default=16)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--branch-calls", type=int, default=10)
    args = parser.parse_args()

    kiln.set_execution("async")
    in_effect = kiln.execution_in_effect()
    kiln.set_execution("sync")
    print(f"engine: {kiln.engine_usable_cores()} usable cores, async mode runs as {in_effect} "
          f"(sync by itself with one core); load average {_load()}")
    print(f"== d2l async microbenchmark: {args.ops} x `y = y + 1` (1x2), median of "
          f"{args.reps}, µs per op")
    kiln.set_num_interop_threads(1)
    d2l = measure(d2l_variants(args.ops), args.reps)
    for name, t in d2l.items():
        print(f"  {name:<36} {t / args.ops * 1e6:8.2f}")
    wait_each = d2l["async, wait_to_read each op"]
    one_sync = d2l["async, one synchronize at the end"]
    sync = d2l["sync mode"]
    each_ratio = d2l.ratio("async, wait_to_read each op", "async, one synchronize at the end")
    async_ratio = d2l.ratio("async, one synchronize at the end", "sync mode")
    print(f"  wait each op / one sync at the end   {each_ratio:8.2f}x  (goal >= 2x; "
          f"MXNet 3.4x)")
    print(f"  async / sync mode                    {async_ratio:8.2f}x  (goal <= 1.10x)")
    print(f"  engine cost per op (async - sync)    {(one_sync - sync) / args.ops * 1e6:8.2f} µs  "
          f"(MXNet 30-60 µs)")
    print(f"  round trip per op (wait each - sync) {(wait_each - sync) / args.ops * 1e6:8.2f} µs")
    q_each = d2l["every op queued, wait_to_read each"]
    q_one = d2l["every op queued, one synchronize"]
    print(f"  every op queued (inline_bytes=0): wait each / one sync {q_each / q_one:5.2f}x, "
          f"async / sync {q_one / sync:5.2f}x,")
    print(f"    queueing cost per op {(q_one - sync) / args.ops * 1e6:5.2f} µs, "
          f"round trip to a worker {(q_each - sync) / args.ops * 1e6:5.2f} µs")

    print()
    print(f"== W1 training loop, eager Python, batch 64, 1 thread per op, {args.steps} steps, "
          f"median of {args.reps}, ms per step")
    threads = kiln.get_num_threads()
    kiln.set_num_threads(1)
    kiln.set_num_interop_threads(1)
    seen = fallbacks()
    w1 = measure(w1_variants(args.steps), args.reps)
    for name, t in w1.items():
        print(f"  {name:<36} {t / args.steps * 1e3:8.3f}")
    print(f"  sync / async                         {w1.ratio('sync mode', 'async mode'):8.2f}x  "
          f"(goal >= 1.2x{busy(seen)})")

    print()
    print(f"== two independent chains of {args.chain} 512x512 matmuls, one thread per op, "
          f"median of {args.reps}, ms")
    kiln.set_num_interop_threads(2)
    seen = fallbacks()
    chains = measure(chain_variants(args.chain), args.reps)
    for name, t in chains.items():
        print(f"  {name:<36} {t * 1e3:8.2f}")
    ratio = chains.ratio("serial (sync mode)", "2 workers (async mode)")
    print(f"  serial / 2 workers                   {ratio:8.2f}x  (goal >= 1.7x on two cores"
          f"{busy(seen)})")
    serial_chains = chain_variants(args.chain)["serial (sync mode)"]
    print_two_processes(TwoProcesses("chain", args.chain), serial_chains, ratio, args.reps)
    model = TwoBranches()
    seen = fallbacks()
    calls = args.branch_calls

    def serial_branches() -> None:
        kiln.set_execution("sync")
        model(calls)
    branches = measure({"serial (sync mode)": serial_branches,
                        "2 workers (async mode)": lambda: (kiln.set_execution("async"),
                                                           model(calls))}, args.reps)
    print(f"== a two-branch model (2 x 4 Linear 512->512, batch 128, eager, no_grad), one thread "
          f"per op, {calls} calls each waited for, median of {args.reps}, ms per call")
    for name, t in branches.items():
        print(f"  {name:<36} {t / calls * 1e3:8.2f}")
    ratio = branches.ratio("serial (sync mode)", "2 workers (async mode)")
    print(f"  serial / 2 workers                   {ratio:8.2f}x  (goal >= 1.7x on two cores"
          f"{busy(seen)})")
    print_two_processes(TwoProcesses("branch", calls), serial_branches, ratio, args.reps)
    compiled = model.compiled()

    def with_threads(n: int):
        def run() -> None:
            kiln.set_num_threads(n)
            compiled(calls)
        return run
    kiln.set_execution("sync")
    plan = measure({"compiled, 1 thread": with_threads(1),
                    "compiled, 2 threads: 2 steps side by side": with_threads(2)}, args.reps)
    kiln.set_num_threads(1)
    for name, t in plan.items():
        print(f"  {name:<42} {t / calls * 1e3:8.2f}")
    ratio = plan.ratio("compiled, 1 thread", "compiled, 2 threads: 2 steps side by side")
    print(f"  1 thread / concurrent steps          {ratio:8.2f}x")

    print()
    print(f"== one chain of 8 1024x1024 matmuls, two workers, {threads} threads in all, "
          f"median of {args.reps}, ms")
    kiln.set_num_threads(threads)
    kiln.set_num_interop_threads(2)  # each worker's share: half the threads
    lone = measure(lone_chain_variants(8), args.reps)
    for name, t in lone.items():
        print(f"  {name:<42} {t * 1e3:8.2f}")
    ratio = lone.ratio("2 workers (async mode)", "sync mode")
    print(f"  async / sync                         {ratio:8.2f}x  (an op alone takes every thread; "
          f"on its share, up to 2x)")
    kiln.set_num_threads(1)

    print()
    print(f"== W1-W3 in both modes, eager Python, one thread, one worker, median of {args.reps}, "
          f"µs per call")
    kiln.set_num_interop_threads(1)
    for name, (make, calls) in WORKLOADS.items():
        seen = fallbacks()
        times = measure(mode_variants(make(), calls), args.reps)
        sync_t, async_t = times["sync"] / calls * 1e6, times["async"] / calls * 1e6
        picked = "; kiln ran it as sync: one core" if in_effect == "sync" else busy(seen)
        print(f"  {name:<30} sync {sync_t:9.1f}  async {async_t:9.1f}  async/sync "
              f"{times.ratio('async', 'sync'):5.2f}x  (goal <= 1.03x{picked})")
    kiln.set_num_threads(threads)
    print(f"load average at the end {_load()} (ratios from a busy machine are noise: rerun)")


if __name__ == "__main__":
    main()
