"""kiln beside PyTorch, ONNX Runtime, TensorFlow, JAX, MXNet and tinygrad, on
SCENARIOS.md's workloads: W1 (MLP 512-256-128-2) at batch 1, 64 and 1024 and
W2 (LeNet) at batch 1 and 64, in inference; a training step (forward,
cross-entropy, backward, SGD) of W1 at batch 64 (W3a) and of MyModel
(10-5-2) at batch 10 (W3b). float32 throughout.

How: this driver writes identical weights (PyTorch's default initialization,
seed 0) and inputs into .bench/data.npz, computes PyTorch eager's results
from them, then starts each framework in its own process, one after another
(its own venv's interpreter where pins conflict; bench/setup_frameworks.sh
makes them). Each runner computes its outputs (inference: the output; a
training step: the losses of 3 steps and the weights after them) and times
its modes; the driver accepts a mode's timings only when its outputs match
PyTorch eager's (atol and rtol 1e-4): a mismatch, a failure or a framework
that is not installed shows as such in the table. Each mode: warm-up, then
--repeats repetitions of --calls calls (fewer where a repetition would pass
~0.2 s at batch > 1 or ~1 s at batch 1; the JSON has the count), the modes
of a framework interleaved; median and best per call. Everything at 1
thread, then at 2 (a second table): OMP, MKL, TF, XLA, MXNet and tinygrad
thread settings are set in each runner's environment before it starts, and
the runner is pinned to that many cores by CPU affinity (harness/pinning.py),
as thread settings alone do not hold every library: JAX's XLA ran two
threads under OMP_NUM_THREADS=1.

This machine's FP32 FMA peak and L1/L2/L3/DRAM read bandwidth are measured
(bench/fma_peak.cpp, bench/bandwidth.cpp) for a roofline bound per case:
max(flops / peak, bytes / bandwidth of the level the working set fits in,
the share of it that faster levels hold read at their bandwidth).
Each kiln figure is set against PyTorch eager, the fastest other framework
and that bound. Output: tables on the terminal, --json, --png (bar chart of
the ratios).

    .venv/bin/python bench/run_all.py [--threads 1,2] [--frameworks kiln,torch,...]
        [--cases W1-b1,...] [--quick] [--repeats 7] [--calls 1000]
        [--json .bench/results.json] [--png .bench/results.png]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from harness import frameworks as fw  # noqa: E402
from harness import machine, pinning, report, results_md  # noqa: E402
from harness.reference import check_outputs, make_data, reference_outputs  # noqa: E402
from harness.workloads import CASES, CASES_BY_ID  # noqa: E402

ROOT = machine.ROOT
WORK_DIR = ROOT / ".bench"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [f.name for f in fw.FRAMEWORKS]
    parser.add_argument("--threads", default="1,2", help="thread counts, one table each")
    parser.add_argument("--frameworks", default=",".join(names),
                        help=f"comma-separated, of: {', '.join(names)}")
    parser.add_argument("--cases", default=",".join(c.id for c in CASES),
                        help="comma-separated case ids")
    parser.add_argument("--repeats", type=int, default=7, help="repetitions (at least 5)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per repetition")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--repetition-s", type=float, default=0.2,
                        help="target length of a repetition at batch > 1 (fewer calls)")
    parser.add_argument("--batch1-repetition-s", type=float, default=1.0,
                        help="the same at batch 1")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 5 x 20 calls, short repetitions; numbers are rough")
    parser.add_argument("--skip-modes", default="",
                        help="framework:mode pairs not to run, e.g. torch:compile")
    parser.add_argument("--no-machine", action="store_true",
                        help="skip the peak and bandwidth measurements (no roofline)")
    parser.add_argument("--timeout-s", type=int, default=1500,
                        help="a runner still running after this is stopped and reported")
    parser.add_argument("--work-dir", default=str(WORK_DIR),
                        help="data, runner outputs and logs (git-ignored .bench/)")
    parser.add_argument("--venv-root", default=str(WORK_DIR),
                        help="where bench/setup_frameworks.sh put the venv-<name> folders")
    parser.add_argument("--json", default=str(WORK_DIR / "results.json"), help="JSON output")
    parser.add_argument("--png", default=str(WORK_DIR / "results.png"), help="chart of ratios")
    parser.add_argument("--results-md", metavar="PATH", default=None,
                        help="write the tables into this file's run_all section (default: "
                             "bench/RESULTS.md, after a full run only)")
    parser.add_argument("--no-results-md", action="store_true",
                        help="leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    full_run = (not args.quick and args.frameworks == parser.get_default("frameworks")
                and args.cases == parser.get_default("cases") and not args.skip_modes)
    if args.no_results_md:
        args.results_md = None
    elif args.results_md is None and full_run:
        args.results_md = str(results_md.RESULTS_MD)
    if args.quick:
        args.repeats, args.calls, args.warmup = 5, 20, 5
        args.repetition_s, args.batch1_repetition_s = 0.02, 0.05
    args.threads = [int(t) for t in args.threads.split(",") if t]
    args.frameworks = [n for n in args.frameworks.split(",") if n]
    args.cases = [c for c in args.cases.split(",") if c]
    args.skip_modes = [m for m in args.skip_modes.split(",") if m]
    unknown = [n for n in args.frameworks if n not in fw.FRAMEWORKS_BY_NAME]
    unknown += [c for c in args.cases if c not in CASES_BY_ID]
    known_modes = {f"{f.name}:{m[0]}" for f in fw.FRAMEWORKS for m in f.modes}
    unknown += [m for m in args.skip_modes if m not in known_modes]
    if unknown:
        parser.error(f"unknown framework, case or mode: {', '.join(unknown)}")
    if args.repeats < 5 or args.calls < 1 or args.warmup < 1 or min(args.threads) < 1:
        parser.error("--repeats must be at least 5; --calls, --warmup and threads at least 1")
    return args


def write_data(work_dir, cases):
    """Writes data.npz (Python runners) and data-npy/ (the C++ runner, one
    .npy per key with '/' as '__'); returns PyTorch eager's outputs."""
    data = make_data(cases)
    np.savez(work_dir / "data.npz", **data)
    npy_dir = work_dir / "data-npy"
    npy_dir.mkdir(exist_ok=True)
    for key, value in data.items():
        np.save(npy_dir / (key.replace("/", "__") + ".npy"), value)
    return reference_outputs(data, cases)


def load_outputs(prefix):
    """{"case/mode/name": array} from PREFIX.npz or PREFIX-outputs/*.npy."""
    npz = pathlib.Path(str(prefix) + ".npz")
    if npz.exists():
        with np.load(npz) as f:
            return {k: f[k] for k in f.files}
    folder = pathlib.Path(str(prefix) + "-outputs")
    if not folder.is_dir():
        return {}
    return {p.stem.replace("__", "/"): np.load(p) for p in folder.glob("*.npy")}


def mode_outputs(outputs, case_id, mode_id):
    prefix = f"{case_id}/{mode_id}/"
    return {k[len(prefix):]: v for k, v in outputs.items() if k.startswith(prefix)}


def accept(record, reference, outputs):
    """A runner's record made a row: timings kept only for matching outputs."""
    row = {"status": record.get("status", "no status"), "calls": record.get("calls")}
    times = record.get("us_per_call") or []
    if row["status"] == "ok":
        why = check_outputs(reference, mode_outputs(outputs, record["case"], record["mode"]))
        if why:
            row["status"] = f"output mismatch: {why}"
            row["rejected_us_per_call"] = times
            return row
        if not times:
            row["status"] = "failed: no timings"
            return row
        row.update({"median_us": float(np.median(times)), "best_us": float(min(times)),
                    "us_per_call": times})
    return row


def _last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def run_framework(framework, threads, cases, args, reference):
    """{(case id, mode id): row} for every mode of `framework` in `cases`."""
    work = pathlib.Path(args.work_dir)
    prefix = work / "out" / f"{framework.name}-{threads}t"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for stale in (pathlib.Path(f"{prefix}.json"), pathlib.Path(f"{prefix}.npz")):
        stale.unlink(missing_ok=True)
    for stale in pathlib.Path(f"{prefix}-outputs").glob("*.npy"):
        stale.unlink()
    def wanted(case):
        return [m for m, _ in framework.modes_for(case)
                if f"{framework.name}:{m}" not in args.skip_modes]
    runnable = [c for c in cases if wanted(c)]
    job = {"data": str(work / "data.npz"), "npy_dir": str(work / "data-npy"), "out": str(prefix),
           "cases": [c.id for c in runnable],
           "case_specs": [(c.id, c.model, c.training) for c in runnable], "threads": threads,
           "repeats": args.repeats, "calls": args.calls, "warmup": args.warmup,
           "repetition_s": args.repetition_s, "batch1_repetition_s": args.batch1_repetition_s,
           "skip": args.skip_modes}
    job_path = work / "out" / f"{framework.name}-{threads}t.job.json"
    job_path.write_text(json.dumps(job, indent=1))

    rows, info = {}, {"versions": {}}
    argv, why_not = fw.command(framework, job_path, args.venv_root) if runnable else (None, "")
    if argv:
        log = work / "logs" / f"run-{framework.name}-{threads}t.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        print(f"-- {framework.label}, {threads} thread(s), {pinning.describe(threads)}",
              file=sys.stderr, flush=True)
        info["cores"] = pinning.cores(threads)
        try:
            done = subprocess.run(pinning.pinned(argv, threads), cwd=ROOT,
                                  env=fw.thread_env(framework, threads, args.venv_root),
                                  capture_output=True, text=True, timeout=args.timeout_s)
            log.write_text(done.stdout + done.stderr)
            if done.returncode != 0:
                why_not = f"runner failed (exit {done.returncode}): {_last_line(done.stderr)}"
        except subprocess.TimeoutExpired:
            why_not = f"runner stopped after {args.timeout_s} s"
        info["runner_s"] = round(time.perf_counter() - start, 1)
        info["log"] = str(log)
        result_path = pathlib.Path(f"{prefix}.json")
        if result_path.exists():
            result = json.loads(result_path.read_text())
            info["versions"] = result.get("versions", {})
            info["affinity"] = result.get("affinity")  # what the runner saw (C++: not told)
            outputs = load_outputs(prefix)
            for record in result["records"]:
                rows[record["case"], record["mode"]] = accept(
                    record, reference.get(record["case"], {}), outputs)
            why_not = why_not or "not reported by the runner"
        elif not why_not:
            why_not = "runner wrote no results"
    for case in cases:
        crash = rows.get((case.id, "*"))  # the runner could not build this case's models
        for mode_id, _ in framework.modes_for(case):
            if f"{framework.name}:{mode_id}" in args.skip_modes:
                rows[case.id, mode_id] = {"status": "skipped (--skip-modes)"}
            elif (case.id, mode_id) not in rows:
                rows[case.id, mode_id] = crash or {"status": why_not}
        if not framework.modes_for(case):
            rows[case.id, "*"] = {"status": f"n/a: {framework.no_training_reason}"}
    return rows, info


def _shown(path):
    """`path` relative to the working directory when it lies under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def main(argv=None):
    args = parse_args(argv)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cases = [CASES_BY_ID[c] for c in args.cases]
    frameworks = [fw.FRAMEWORKS_BY_NAME[n] for n in args.frameworks]
    started = time.perf_counter()
    print("== writing weights and inputs, computing PyTorch eager's outputs", file=sys.stderr)
    reference = write_data(work, cases)

    results = {"machine": machine.describe(), "cases": [c.id for c in cases],
               "settings": {k: getattr(args, k) for k in (
                   "repeats", "calls", "warmup", "repetition_s", "batch1_repetition_s",
                   "quick")}, "runs": []}
    tables = []  # what print_tables printed, one text per thread count
    for threads in args.threads:
        if args.no_machine:
            measured = {"threads": threads, "fp32_peak_gflops": None, "read_gbs": {},
                        "peak_source": "skipped (--no-machine)"}
        else:
            print(f"== measuring FP32 peak and read bandwidth, {threads} thread(s)",
                  file=sys.stderr)
            measured = machine.measure(threads)
        run = {"threads": threads, "machine": measured, "frameworks": {}, "rows": []}
        for framework in frameworks:
            rows, info = run_framework(framework, threads, cases, args, reference)
            run["frameworks"][framework.name] = info
            for (case_id, mode_id), row in rows.items():
                run["rows"].append({"framework": framework.name, "mode": mode_id,
                                    "label": report.label_of(framework.name, mode_id),
                                    "case": case_id, **row})
        report.add_ratios(run, cases, frameworks)
        results["runs"].append(run)
        with results_md.tee_stdout() as printed:
            report.print_tables(run, results, cases, frameworks)
        tables.append(printed.getvalue())
    results["total_s"] = round(time.perf_counter() - started, 1)

    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"JSON: {_shown(args.json)}", end="")
    if args.png:
        why = report.write_chart(results, cases, frameworks, args.png)
        print(f"; chart: {_shown(args.png)}" if why is None else f"; no chart: {why}", end="")
    if args.results_md:
        body = (results_md.stamp(results["machine"]) + " Written by bench/run_all.py; "
                f"{results['total_s']:.0f} s in all.\n\n"
                + results_md.demote_headings("\n\n".join(t.strip() for t in tables)))
        path = results_md.write_section("run_all", body, args.results_md)
        print(f"; tables: {_shown(str(path))}", end="")
    print(f" ({results['total_s']:.0f} s in all)")
    return results


if __name__ == "__main__":
    main()
