"""libgomp's spinning, bounded before libgomp loads (docs/kernels.md, "Threads").

libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded
(importing kiln._C loads it). Its default lets a waiting thread spin
300000 times before sleeping, about 40 ms on the 2-core EPYC kiln's
benchmarks run on: while other programs keep the cores busy, a spinning
thread holds a core its partner needs, and a call on two threads took
100-450x its time on one (bench/threads.py). So when the user set neither
variable and libgomp is not loaded yet, importing this module sets
GOMP_SPINCOUNT to DEFAULT_SPINCOUNT for the load (kiln/__init__.py imports
it first), and restore() takes it out of os.environ again, so
programs kiln starts see the environment the user gave. A process that
loaded libgomp earlier (torch imported first) keeps libgomp's defaults:
set GOMP_SPINCOUNT (or OMP_WAIT_POLICY) before starting Python to choose.
"""
import os

# About 15-40 us of spinning (a pause costs 40-140 ns on current x86): longer
# than the gap between back-to-back steps of a plan, shorter than a
# scheduler's time slice.
DEFAULT_SPINCOUNT = "200"


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as maps:
            return "libgomp" in maps.read()
    except OSError:  # not Linux: nothing to say, leave the environment alone
        return True


def _bound_spinning() -> bool:
    """Sets GOMP_SPINCOUNT for libgomp's load; True when it did."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return False
    if _libgomp_loaded():
        return False
    os.environ["GOMP_SPINCOUNT"] = DEFAULT_SPINCOUNT
    return True


SET_FOR_LOAD = _bound_spinning()


def restore() -> None:
    """Takes out what this module set, once libgomp has read it."""
    if SET_FOR_LOAD:
        os.environ.pop("GOMP_SPINCOUNT", None)
