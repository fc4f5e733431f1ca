"""What a symbolic graph costs per call against a static one, side by side in
one run (issue 21's goal: at most 5% more): SCENARIOS.md's W1 (MLP
512-256-128-2) at batch 1 and 64 and W2 (LeNet) at batch 1, float32, one
thread, no_grad.

Per case, four modes over the same weights and input:
  static traced     kiln.jit.trace(net, x)                     (one size)
  symbolic traced   kiln.jit.trace(net, x, dynamic_shapes=...) (any batch)
  static, C++ loop  the static trace called from C++ (no Python per call)
  symbolic, C++ loop
The symbolic trace has run at three other batch sizes before timing, so its
call finds its size among several plans, as a model serving many batch sizes
does. Outputs of every mode are checked against kiln eager (bitwise) before
any timing. Modes are interleaved within a repetition; the table gives the
median and best of --repeats repetitions in µs per call, and the ratio of
symbolic to static (by median, and by best: on a shared machine the least
disturbed repetition is the steadier estimate).

    OMP_NUM_THREADS=1 .venv/bin/python bench/symbolic_shapes.py [--repeats 9] [--calls 2000]
"""
import argparse
import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"  # before kiln starts OpenMP

import statistics  # noqa: E402

import numpy as np  # noqa: E402

import kiln  # noqa: E402
import kiln.jit  # noqa: E402
from eager_python import lenet, mlp  # noqa: E402  (bench/ is on sys.path as the script's dir)
from hybrid_python import python_loop  # noqa: E402

GOAL = 1.05
CASES = [("W1 batch 1", mlp, (1, 512)), ("W1 batch 64", mlp, (64, 512)),
         ("W2 batch 1", lenet, (1, 1, 28, 28))]
OTHER_BATCHES = (3, 17, 128)  # sizes the symbolic trace has planned before it is timed
REPETITION_S = 0.4  # one repetition at batch > 1, all modes


def cpp_loop(traced, x):
    def run(calls):
        with kiln.no_grad():
            return kiln._C.jit._seconds_per_call_from_cpp(traced._compiled, [x], calls) * 1e6
    return run


def build_modes(build, shape):
    kiln.manual_seed(0)
    net = build(kiln.nn).eval()
    x = kiln.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    with kiln.no_grad():
        static = kiln.jit.trace(net, x)
        symbolic = kiln.jit.trace(net, x, dynamic_shapes={"input": {0: "batch"}})
        for b in OTHER_BATCHES:
            symbolic(kiln.randn(b, *shape[1:]))
        want = net(x).numpy()
        for name, traced in (("static", static), ("symbolic", symbolic)):
            if not np.array_equal(traced(x).numpy(), want):
                sys.exit(f"symbolic_shapes: the {name} trace differs from eager, not timing")
    return [("static traced", python_loop(static, x, kiln.no_grad)),
            ("symbolic traced", python_loop(symbolic, x, kiln.no_grad)),
            ("static, C++ loop", cpp_loop(static, x)),
            ("symbolic, C++ loop", cpp_loop(symbolic, x))], symbolic


def measure(case, build, shape, args):
    modes, symbolic = build_modes(build, shape)
    calls = args.calls
    if shape[0] > 1:  # about REPETITION_S a repetition for the slowest mode
        per_call_us = max(timer(20) for _, timer in modes)
        calls = max(20, int(REPETITION_S * 1e6 / per_call_us / len(modes)))
    for _, timer in modes:
        timer(max(1, calls // 10))
    times = {name: [] for name, _ in modes}
    for _ in range(args.repeats):
        for name, timer in modes:
            times[name].append(timer(calls))
    median = {name: statistics.median(t) for name, t in times.items()}
    best = {name: min(t) for name, t in times.items()}
    print(f"### {case}, float32, one thread ({args.repeats} x {calls} calls)\n")
    print("| mode | median µs | best µs |")
    print("|---|---:|---:|")
    for name in times:
        print(f"| {name} | {median[name]:.2f} | {best[name]:.2f} |")
    print(f"\nmemory: {symbolic.memory_formula()}\n")
    rows = []
    for label, static_name, symbolic_name in (("from Python", "static traced", "symbolic traced"),
                                              ("C++ loop", "static, C++ loop",
                                               "symbolic, C++ loop")):
        by_median = median[symbolic_name] / median[static_name]
        by_best = best[symbolic_name] / best[static_name]
        rows.append((f"{case}, {label}", by_median, by_best))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="repetitions (at least 5)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per repetition at batch 1")
    args = parser.parse_args()
    if args.repeats < 5 or args.calls < 1:
        parser.error("--repeats must be at least 5 and --calls at least 1")
    print(f"## Symbolic against static graphs (kiln {kiln.__version__})\n")
    rows = []
    for case, build, shape in CASES:
        rows += measure(case, build, shape, args)
    print(f"### Symbolic / static, µs per call (goal: at most {GOAL:.2f})\n")
    print("| case | by median | by best | goal |")
    print("|---|---:|---:|---|")
    for name, by_median, by_best in rows:
        verdict = "meets" if min(by_median, by_best) <= GOAL else "misses"
        print(f"| {name} | {by_median:.3f} | {by_best:.3f} | {verdict} |")


if __name__ == "__main__":
    main()
