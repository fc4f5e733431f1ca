"""Where unrolling a scan is faster than running it as a loop: the numbers
behind unroll_loops' rule (src/kiln/jit/passes/unroll.cpp), side by side in
one run.

Per body and trip count, the same function is traced twice under no_grad:
  loop      KILN_UNROLL=0    the scan node runs its step's plan per iteration
  unrolled  KILN_UNROLL=all  the step inlined once per iteration (select the
                             slices, stack the ys)
and each is called from a C++ loop (no Python per call). Both are checked
bit for bit against eager before any timing. Modes are interleaved within a
repetition; the table gives the best of --repeats repetitions in µs per
call (on a shared machine the least disturbed repetition is the steadier
estimate) and unrolled / loop.

    OMP_NUM_THREADS=1 .venv/bin/python bench/unroll_loops.py [--repeats 5] [--quick]
"""
import argparse
import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # before kiln starts OpenMP

import numpy as np  # noqa: E402

import kiln  # noqa: E402
import kiln.jit  # noqa: E402

TRIPS = (1, 2, 4, 8, 16, 32, 64)
REPETITION_S = 0.15  # one repetition, both modes


def rnd(*shape):
    return kiln.tensor(np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32))


def scan_case(make_step, carry_shape, x_shape):
    """fn(h, xs) = kiln.scan(step, h, xs), with the step's weights built once."""
    step = make_step()

    def build(trips):
        return (lambda h, xs: kiln.scan(step, h, xs)), (rnd(*carry_shape), rnd(trips, *x_shape))
    return build


def add_step():  # 1 op: h + x, which is also the y
    return lambda h, x: (h + x,) * 2


def add_step_no_ys():  # 1 op, no ys: nothing to stack
    return lambda h, x: (h + x, ())


def chain_step():  # 8 elementwise ops
    def step(h, x):
        a = (h * x).sin() + 0.5
        b = (a * h).cos() - x
        return b.tanh() * 0.9, a
    return lambda h, x: step(h, x)


def rnn_step(hidden):  # matmul + add + tanh
    w = rnd(hidden, hidden) * (1.0 / hidden ** 0.5)
    return lambda: (lambda h, x: ((h @ w + x).tanh(),) * 2)


def fori_case(trips):  # a counter the unrolled copies fold: acc * 0.5 + a * i
    def fn(a):
        return kiln.fori_loop(0, trips, lambda i, acc: acc * 0.5 + a * i.float(), kiln.zeros(16))
    return fn, (rnd(16),)


# The y of a step is its carry's size (f32[n]: 4n bytes) but in the "no ys"
# and fori_loop rows.
CASES = [
    ("add, f32[16]", scan_case(add_step, (16,), (16,))),
    ("add, f32[256]", scan_case(add_step, (256,), (256,))),
    ("add, f32[1024]", scan_case(add_step, (1024,), (1024,))),
    ("add, f32[4096]", scan_case(add_step, (4096,), (4096,))),
    ("add, f32[16384]", scan_case(add_step, (16384,), (16384,))),
    ("add, f32[16384], no ys", scan_case(add_step_no_ys, (16384,), (16384,))),
    ("8 elementwise, f32[16]", scan_case(chain_step, (16,), (16,))),
    ("8 elementwise, f32[1024]", scan_case(chain_step, (1024,), (1024,))),
    ("rnn [1, 64]", scan_case(rnn_step(64), (1, 64), (1, 64))),
    ("rnn [16, 256]", scan_case(rnn_step(256), (16, 256), (16, 256))),
    ("fori_loop, f32[16]", fori_case),
]


def traced(fn, args, mode):
    os.environ["KILN_UNROLL"] = mode
    try:
        with kiln.no_grad():
            return kiln.jit.trace(fn, args)
    finally:
        del os.environ["KILN_UNROLL"]


def cpp_timer(compiled, args):
    def run(calls):
        with kiln.no_grad():
            seconds = kiln._C.jit._seconds_per_call_from_cpp(compiled._compiled, list(args), calls)
            return seconds * 1e6
    return run


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def measure(name, fn, args, trips, repeats):
    with kiln.no_grad():
        want = [t.numpy() for t in flat(fn(*args))]
    modes = {m: traced(fn, args, m) for m in ("0", "all")}
    for mode, compiled in modes.items():
        got = [t.numpy() for t in flat(compiled(*args))]
        if not all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want)):
            sys.exit(f"unroll_loops: {name} x{trips} (KILN_UNROLL={mode}) differs from eager")
    if "scan" in str(modes["all"].graph) or "scan" not in str(modes["0"].graph):
        sys.exit(f"unroll_loops: {name} x{trips}: the modes did not give loop and unrolled graphs")
    timers = {m: cpp_timer(c, args) for m, c in modes.items()}
    per_call = max(t(20) for t in timers.values())
    calls = max(20, int(REPETITION_S * 1e6 / per_call / len(timers)))
    best = {m: float("inf") for m in timers}
    for _ in range(repeats):
        for m, t in timers.items():
            best[m] = min(best[m], t(calls))
    return best["0"], best["all"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="repetitions (at least 3)")
    parser.add_argument("--quick", action="store_true", help="trip counts 1, 8 and 64 only")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3")
    trips_list = (1, 8, 64) if args.quick else TRIPS
    print(f"## Unrolled scan against the loop (kiln {kiln.__version__}), one thread\n")
    print("best µs per call; ratio < 1: unrolling is faster\n")
    print("| body | " + " | ".join(f"x{n}" for n in trips_list) + " |")
    print("|---|" + "---:|" * len(trips_list))
    for name, build in CASES:
        cells = []
        for trips in trips_list:
            fn, fn_args = build(trips)
            loop, unrolled = measure(name, fn, fn_args, trips, args.repeats)
            cells.append(f"{loop:.2f} / {unrolled:.2f} = {unrolled / loop:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print("\ncells: loop µs / unrolled µs = unrolled / loop")


if __name__ == "__main__":
    main()
