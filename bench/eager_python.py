"""Eager kiln from Python against eager PyTorch, side by side in one run:
SCENARIOS.md's W1 (MLP 512-256-128-2) and W2 (LeNet on 1x1x28x28) at batch 1.
At that size the kernels take a few microseconds, so what this measures is
the per-op cost of the call path from Python to the kernel.

Both models get the same weights and their outputs are compared before any
timing. Each variant runs --reps repetitions of --calls calls, the variants
interleaved within a repetition so that a slow moment of the machine hits all
of them; the table gives the median and the best repetition in µs per call.
"grad": the parameters require grad, as a user runs a model (every op records
its backward node); "no_grad": under kiln.no_grad() / torch.no_grad().

    .venv/bin/python bench/eager_python.py [--reps 7] [--calls 1000]
"""
import argparse
import os

# One thread, for both frameworks: set before either library starts OpenMP.
os.environ["OMP_NUM_THREADS"] = "1"

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kiln  # noqa: E402
from models.workloads import lenet, mlp  # noqa: E402

WORKLOADS = {"W1 batch 1": (mlp, (1, 512)), "W2 batch 1": (lenet, (1, 1, 28, 28))}


def twin_models(build, input_shape):
    """The workload in torch and in kiln with torch's weights, and one input
    for each holding the same numbers."""
    torch.manual_seed(0)
    torch_model = build(torch.nn)
    kiln_model = build(kiln.nn)
    kiln_model.load_state_dict({k: v.detach().numpy() for k, v in
                                torch_model.state_dict().items()})
    x_np = np.random.default_rng(0).standard_normal(input_shape).astype(np.float32)
    return (kiln_model, kiln.tensor(x_np)), (torch_model, torch.from_numpy(x_np))


def check_same_outputs(name, kiln_pair, torch_pair):
    (km, kx), (tm, tx) = kiln_pair, torch_pair
    got = km(kx).detach().numpy()
    want = tm(tx).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                               err_msg=f"{name}: kiln and PyTorch outputs differ")


def time_calls(model, x, calls, grad_context):
    with grad_context():
        start = time.perf_counter()
        for _ in range(calls):
            model(x)
        return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="repetitions (at least 5)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per repetition")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    args = parser.parse_args()
    if args.reps < 5 or args.calls < 1:
        parser.error("--reps must be at least 5 (the median of fewer is noise) and --calls >= 1")
    torch.set_num_threads(1)

    variants = []  # (workload, mode, framework, model, input, grad context)
    for name, (build, shape) in WORKLOADS.items():
        kiln_pair, torch_pair = twin_models(build, shape)
        check_same_outputs(name, kiln_pair, torch_pair)
        for mode, contexts in (("grad", (kiln.enable_grad, torch.enable_grad)),
                               ("no_grad", (kiln.no_grad, torch.no_grad))):
            variants.append((name, mode, "kiln", *kiln_pair, contexts[0]))
            variants.append((name, mode, "torch", *torch_pair, contexts[1]))

    for *_, model, x, context in variants:
        time_calls(model, x, args.warmup, context)
    times = {v[:3]: [] for v in variants}
    for _ in range(args.reps):
        for name, mode, framework, model, x, context in variants:
            times[name, mode, framework].append(time_calls(model, x, args.calls, context))

    print(f"eager from Python, one thread, µs per call ({args.reps} x {args.calls} calls; "
          f"kiln {kiln.__version__}, PyTorch {torch.__version__})")
    header = (f"{'workload':<12} {'mode':<8} {'kiln median':>12} {'kiln best':>10} "
              f"{'torch median':>13} {'torch best':>11} {'kiln/torch':>11}")
    print(header)
    print("-" * len(header))
    for name in WORKLOADS:
        for mode in ("grad", "no_grad"):
            k, t = times[name, mode, "kiln"], times[name, mode, "torch"]
            k_med, t_med = statistics.median(k), statistics.median(t)
            print(f"{name:<12} {mode:<8} {k_med:>12.1f} {min(k):>10.1f} {t_med:>13.1f} "
                  f"{min(t):>11.1f} {k_med / t_med:>11.2f}")
    print("kiln/torch: ratio of the medians (below 1: kiln is faster)")


if __name__ == "__main__":
    main()
