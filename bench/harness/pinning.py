"""Holding a benchmark process to N cores: the environment every library
reads its thread count from, and the CPU affinity, set before the program
starts (pinned(): a trampoline pins itself and execs it) so that the process
and every thread it ever starts run on those cores alone. Thread-count
settings alone are not enough: JAX's XLA starts two threads under
OMP_NUM_THREADS=1 (its W1 batch-1024 time fell below the one-core
roofline), and ONNX Runtime or oneDNN may add helpers of their own.
Imports only the standard library."""
import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "KILN_BENCH_THREADS")


def cores(threads):
    """The first `threads` cores this process may run on (all of them when
    it may run on fewer)."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:threads]


def thread_env(threads, env=None):
    """`env` (default: os.environ) with every thread variable at `threads`."""
    out = dict(os.environ if env is None else env)
    out.update({name: str(threads) for name in THREAD_VARIABLES})
    return out


def describe(threads):
    chosen = cores(threads)
    short = "" if len(chosen) == threads else f" (only {len(chosen)} allowed)"
    return f"pinned to core{'s' if len(chosen) > 1 else ''} {','.join(map(str, chosen))}{short}"


# Run as `python -c TRAMPOLINE CORES PROGRAM ARGS...`: pins itself, then
# becomes PROGRAM (exec keeps the affinity). Unlike a preexec_fn, safe in a
# driver that has started threads of its own (PyTorch's, for its reference).
TRAMPOLINE = ("import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')});"
              " os.execvp(sys.argv[2], sys.argv[2:])")


def pinned(argv, threads, python=None):
    """`argv` started on cores(threads) alone, with every thread it starts."""
    import sys
    chosen = ",".join(map(str, cores(threads)))
    return [python or sys.executable, "-c", TRAMPOLINE, chosen, *map(str, argv)]
