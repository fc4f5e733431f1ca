"""Real models (issue 25): SCENARIOS.md's W5 (4 x TransformerEncoderLayer(384,
6, 1536, gelu, batch_first), sequence 128) and W6 (ResNet-18 and
MobileNetV3-Small in torchvision's layout, 3 x 224 x 224) at batch 1 and 8,
and pretrained ONNX models from PyPI packages, float32 inference, at 1 and
2 threads. The goals: kiln compiled at most 0.8x ONNX Runtime's time and at
most 0.5x PyTorch eager's on every case.

W5 and W6 are written once against an `nn` namespace (bench/models/), built in
torch.nn and kiln.nn; kiln's twin loads torch's state_dict (torchvision's
initialization, seed 0, batch-norm statistics measured on a batch). The
contenders: kiln traced (kiln.jit.trace(model, x, frozen=True): an inference
graph, its weights constants and batch norm folded, as ONNX Runtime folds it)
and hybridized (model.hybridize()) from Python; the traced graph saved
(traced.save) and run by the `kiln` command-line tool (`kiln run` for its
output, `kiln bench` for its time: C++, no Python); PyTorch eager and
torch.compile; ONNX Runtime on the model kiln.onnx.export wrote. The
pretrained models (bench/models/onnx_zoo.py: the three PP-OCR models and those
of .cache/onnx-models that kiln loads today): kiln.onnx.load against
onnxruntime.InferenceSession on the same inputs.

This driver writes the weights, inputs, reference outputs (PyTorch eager;
ONNX Runtime for the pretrained models), .kiln and .onnx files into a
temporary folder, then starts one process per framework and thread count
(bench/harness/real_models_child.py), pinned to that many cores by CPU
affinity (bench/harness/pinning.py) with OMP/MKL/intra-op threads set, so
that a "1 thread" row runs on one core whatever a library starts. Every
mode's output is checked against the reference (1e-4 of the output's scale,
plus 1e-4 relative) before it is timed: a mode that differs is shown as a
mismatch, not timed, and the run exits 1. Each mode: warm-up, then
--repeats repetitions of about --repetition-s each (at least one call), the
modes of a process interleaved; tables give the median in ms per call.
"kiln" in the ratios and goals is kiln traced, called from Python as the
others are; kiln from C++ is shown beside it.

A full run (--threads 1,2, --batches 1,8, torch.compile, the pretrained
models, --repeats >= 5) rewrites the "real_models" section of
bench/RESULTS.md (--results-md PATH: another file; --no-results-md: none).
--quick: batch 1 only, 3 repetitions of ~0.15 s, for trying it.

    .venv/bin/python bench/real_models.py [--quick] [--threads 1,2] [--batches 1,8]
        [--repeats 7] [--repetition-s 0.4] [--no-torch-compile] [--no-onnx-models]
        [--json out.json] [--results-md PATH | --no-results-md]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from harness import machine, pinning, results_md  # noqa: E402
from models import mobilenet_v3, onnx_zoo, resnet, transformer, weights  # noqa: E402

CHILD = BENCH / "harness" / "real_models_child.py"
FRAMEWORKS = ("kiln", "kiln-cpp", "onnxruntime", "torch")
KILN, HYBRID, CPP = "kiln traced", "kiln hybridized", "kiln C++ (kiln bench)"
ORT, EAGER, COMPILE = "ONNX Runtime", "PyTorch eager", "torch.compile"
KILN_ONNX = "kiln.onnx.load"  # the pretrained models' kiln mode
MODES = (KILN, HYBRID, CPP, ORT, EAGER, COMPILE)
GOAL_ORT, GOAL_EAGER = 0.8, 0.5
MODULES = ("W5", "ResNet-18", "MobileNetV3-Small")
MODULE_GOALS, ONNX_GOALS = "W5, W6", "pretrained"


def flops(model, batch):
    if model == "W5":
        return transformer.flops(batch)
    return batch * (resnet.FLOPS_PER_IMAGE if model == "ResNet-18"
                    else mobilenet_v3.FLOPS_PER_IMAGE)


def write_kiln_files(model, state, x, case):
    """The traced graph saved (case["kiln_file"]) and kiln.onnx.export's file
    (case["onnx"]); what fails is noted in the case, for its contender to report."""
    import kiln
    import kiln.jit
    kx = kiln.tensor(x)
    with kiln.no_grad():
        try:
            traced = kiln.jit.trace(weights.kiln_model(model, state), kx, frozen=True)
            traced.save(case["kiln_file"])
        except Exception as e:  # noqa: BLE001
            case["kiln_file_error"] = f"{type(e).__name__}: {str(e)[:160]}"
        try:
            kiln.onnx.export(weights.kiln_model(model, state), (kx,), case["onnx"])
        except Exception as e:  # noqa: BLE001
            case["onnx_error"] = f"{type(e).__name__}: {str(e)[:160]}"


def prepare(work, args):
    """Writes every case's files into `work`; (cases for the job, [(model,
    why it is not benchmarked)])."""
    import numpy as np
    import torch
    cases, absent = [], []
    for model in MODULES:
        torch_model = weights.torch_model(model)
        state = weights.state_arrays(torch_model)
        slug = model.replace(" ", "_")
        np.savez(work / f"{slug}-state.npz", **state)
        for batch in args.batches:
            case = {"id": f"{model} batch {batch}", "kind": "module", "model": model,
                    "batch": batch, "flops": flops(model, batch),
                    "state": str(work / f"{slug}-state.npz")}
            files = {k: str(work / f"{slug}-b{batch}{ext}") for k, ext in (
                ("input", "-x.npy"), ("reference", "-ref.npz"), ("onnx", ".onnx"),
                ("kiln_file", ".kiln"))}
            case.update(files)
            x = weights.example_input(model, batch)
            np.save(files["input"], x)
            with torch.no_grad():
                np.savez(files["reference"], out0=torch_model(torch.from_numpy(x)).numpy())
            write_kiln_files(model, state, x, case)
            cases.append(case)
    if not args.onnx_models:
        return cases, absent
    import onnxruntime as ort
    for name, kind, path, _ in onnx_zoo.MODELS:
        if not path.exists():
            absent.append((name, f"{path} is absent (scripts/setup.sh fetches it)"))
            continue
        options = ort.SessionOptions()
        options.log_severity_level = 3
        feeds, slug = onnx_zoo.feeds(name), name.replace(" ", "_")
        try:
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
            reference = session.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            absent.append((name, f"ONNX Runtime fails on it: {type(e).__name__}: {e}"[:200]))
            continue
        np.savez(work / f"{slug}-feeds.npz", **feeds)
        np.savez(work / f"{slug}-ref.npz", **{f"out{i}": out for i, out in enumerate(reference)})
        names = [i.name for i in session.get_inputs()]
        cases.append({"id": name, "kind": "onnx", "description": kind, "path": str(path),
                      "names": names, "feeds": str(work / f"{slug}-feeds.npz"),
                      "reference": str(work / f"{slug}-ref.npz"),
                      "shapes": " ".join("x".join(map(str, feeds[n].shape)) or "scalar"
                                         for n in names)})
    return cases, absent


def run_children(threads, cases, args, work):
    """{(case id, mode): record} from every framework at `threads`, and
    {framework: the cores it was allowed}."""
    job = work / f"job-{threads}t.json"
    job.write_text(json.dumps({"threads": threads, "repeats": args.repeats,
                               "repetition_s": args.repetition_s,
                               "torch_compile": args.torch_compile, "cases": cases}))
    records, affinity = {}, {}
    for framework in FRAMEWORKS:
        out = work / f"{framework}-{threads}t.json"
        print(f"-- {framework}, {threads} thread(s), {pinning.describe(threads)}",
              file=sys.stderr, flush=True)
        argv = pinning.pinned([sys.executable, CHILD, framework, job, out], threads)
        done = subprocess.run(argv, env=pinning.thread_env(threads), cwd=ROOT)
        if done.returncode != 0 or not out.exists():
            for case in cases:
                records.setdefault((case["id"], framework), {
                    "status": f"failed: its process exited {done.returncode}"})
            continue
        result = json.loads(out.read_text())
        affinity[framework] = result["affinity"]
        for record in result["records"]:
            records[record["case"], record["mode"]] = record
    return records, affinity


def fmt(ms):
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.1f}"


def median(record):
    return statistics.median(record["ms"]) if record and record.get("ms") else None


def cell(record):
    if record is None:
        return "not run"
    if record.get("ms"):
        return fmt(median(record))
    return record["status"].split(":")[0].split(" (")[0]  # the whole reason: in the notes


def verdict(ratio, goal):
    if ratio is None:
        return "not measured"
    return f"{'met' if ratio <= goal else 'missed'} ({ratio:.2f}x)"


def ratio(mine, other):
    return mine / other if mine is not None and other else None


def print_modules(threads, cases, records, notes):
    """The W5/W6 table at `threads`; its goal rows [(case, goal, ratio, met)]."""
    print(f"### W5 and W6, {threads} thread{'s' if threads > 1 else ''} "
          f"({pinning.describe(threads)}): median ms per call\n")
    print("| case | " + " | ".join(MODES) + " | kiln GFLOP/s | kiln / ORT | kiln / eager |")
    print("|---|" + "---:|" * (len(MODES) + 3))
    goals = []
    for case in (c for c in cases if c["kind"] == "module"):
        row = {mode: records.get((case["id"], mode)) for mode in MODES}
        mine = median(row[KILN])
        to_ort, to_eager = ratio(mine, median(row[ORT])), ratio(mine, median(row[EAGER]))
        gflops = f"{case['flops'] / mine * 1e-6:.1f}" if mine else ""
        print(f"| {case['id']} | " + " | ".join(cell(row[m]) for m in MODES)
              + f" | {gflops} | {verdict(to_ort, GOAL_ORT)} | {verdict(to_eager, GOAL_EAGER)} |")
        goals += [(case["id"], f"<= {GOAL_ORT}x ONNX Runtime", to_ort, GOAL_ORT),
                  (case["id"], f"<= {GOAL_EAGER}x PyTorch eager", to_eager, GOAL_EAGER)]
        for mode, record in row.items():
            if record and record.get("status", "ok").startswith("skipped"):
                continue  # said once, below the tables
            if record and record.get("status", "ok") != "ok":
                notes.append(f"{threads}t, {case['id']}, {mode}: {record['status']}")
            elif mode == COMPILE and record:
                notes.append(f"{threads}t, {case['id']}, {mode}: first call (compiling) "
                             f"{record.get('first_call_s', 0):.0f} s; {record.get('note')}")
    print()
    return goals


def print_onnx_models(threads, cases, records, notes):
    onnx_cases = [c for c in cases if c["kind"] == "onnx"]
    if not onnx_cases:
        return []
    print(f"### Pretrained ONNX models, {threads} thread{'s' if threads > 1 else ''}: "
          "median ms per call\n")
    print(f"| model | what | input | {KILN_ONNX} | ONNX Runtime | kiln / ORT |")
    print("|---|---|---|---:|---:|---:|")
    goals = []
    for case in onnx_cases:
        mine, theirs = records.get((case["id"], KILN_ONNX)), records.get((case["id"], ORT))
        to_ort = ratio(median(mine), median(theirs))
        print(f"| {case['id']} | {case['description']} | {case['shapes']} | {cell(mine)} | "
              f"{cell(theirs)} | {verdict(to_ort, GOAL_ORT)} |")
        goals.append((case["id"], f"<= {GOAL_ORT}x ONNX Runtime", to_ort, GOAL_ORT))
        for mode, record in ((KILN_ONNX, mine), (ORT, theirs)):
            if record and record.get("status", "ok") != "ok":
                notes.append(f"{threads}t, {case['id']}, {mode}: {record['status']}")
    print()
    return goals


def print_cpu_use(threads, records, affinity):
    """How many cores each framework's timed calls kept busy: CPU time over
    wall time, the largest over its modes; above `threads` would mean the
    pinning leaks."""
    use = {}
    for (_, mode), record in records.items():
        if "cpu_per_wall" in record:
            use[mode] = max(use.get(mode, 0), record["cpu_per_wall"])
    shown = ", ".join(f"{mode} {value:.2f}" for mode, value in use.items())
    cores = sorted({tuple(a) for a in affinity.values()})
    print(f"Cores allowed: {', '.join(str(list(c)) for c in cores)}. CPU time / wall time "
          f"while timed, largest per mode: {shown}.\n")


def measure_and_print(args):
    print(f"## Real models, float32, inference ({machine.framework_versions()})\n")
    print(f"W5: {transformer.LAYERS} x TransformerEncoderLayer({transformer.D_MODEL}, "
          f"{transformer.HEADS}, {transformer.FEEDFORWARD}, gelu, batch_first), sequence "
          f"{transformer.SEQ}. W6: ResNet-18, MobileNetV3-Small (torchvision's layout), "
          f"3x224x224. Batches {', '.join(map(str, args.batches))}; {args.repeats} "
          f"repetitions of ~{args.repetition_s} s. kiln = kiln traced, from Python. "
          f"Goals: kiln <= {GOAL_ORT}x ONNX Runtime and <= {GOAL_EAGER}x PyTorch eager.\n")
    runs, goals, notes = {}, [], []
    with tempfile.TemporaryDirectory(prefix="kiln-real-models-") as tmp:
        work = pathlib.Path(tmp)
        cases, absent = prepare(work, args)
        for threads in args.threads:
            records, affinity = run_children(threads, cases, args, work)
            for case in (c for c in cases if c["kind"] == "module" and not args.torch_compile):
                records[case["id"], COMPILE] = {"status": "skipped (--no-torch-compile)"}
            goals += [(threads, MODULE_GOALS, *g)
                      for g in print_modules(threads, cases, records, notes)]
            goals += [(threads, ONNX_GOALS, *g)
                      for g in print_onnx_models(threads, cases, records, notes)]
            print_cpu_use(threads, records, affinity)
            runs[threads] = {"affinity": affinity, "records": [
                {"case": case, "mode": mode, **r} for (case, mode), r in records.items()]}
    if not args.torch_compile:
        notes.append(f"{COMPILE}: skipped (--no-torch-compile)")
    notes += [f"{name}: {why}" for name, why in absent]
    if notes:
        print("Notes:\n\n" + "\n".join(f"- {n}" for n in dict.fromkeys(notes)) + "\n")
    print_goals(args.threads, goals)
    return runs, goals


def print_goals(thread_counts, goals):
    """Met / measured per thread count and goal (the tables mark each case)."""
    kinds = [(MODULE_GOALS, f"<= {GOAL_ORT}x ONNX Runtime"),
             (MODULE_GOALS, f"<= {GOAL_EAGER}x PyTorch eager"),
             (ONNX_GOALS, f"<= {GOAL_ORT}x ONNX Runtime")]
    print("### Goals: cases where kiln (traced, from Python) met each\n")
    print("| threads | " + " | ".join(f"{what}: {goal}" for what, goal in kinds) + " |")
    print("|---:|" + "---|" * len(kinds))
    for threads in thread_counts:
        cells = []
        for what, goal in kinds:
            rows = [g for g in goals if g[:2] == (threads, what) and g[3] == goal]
            measured = [value <= limit for *_, value, limit in rows if value is not None]
            cells.append(f"{sum(measured)} of {len(measured)}"
                         + (f" ({len(rows) - len(measured)} not measured)"
                            if len(measured) < len(rows) else ""))
        print(f"| {threads} | " + " | ".join(cells) + " |")
    print()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, a process each")
    parser.add_argument("--batches", default="1,8", help="batch sizes of W5 and W6")
    parser.add_argument("--repeats", type=int, default=7, help="repetitions (at least 3)")
    parser.add_argument("--repetition-s", type=float, default=0.4,
                        help="seconds of calls per repetition of a mode (at least one call)")
    parser.add_argument("--quick", action="store_true",
                        help="batch 1 only, 3 repetitions of ~0.15 s: for trying it")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false",
                        help="skip torch.compile (it compiles for tens of seconds per case)")
    parser.add_argument("--no-onnx-models", dest="onnx_models", action="store_false",
                        help="only W5 and W6, not the pretrained ONNX models")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers here")
    parser.add_argument("--results-md", metavar="PATH", default=None,
                        help="write the tables into this file's real_models section "
                             "(default: bench/RESULTS.md, after a full run)")
    parser.add_argument("--no-results-md", action="store_true",
                        help="leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.repeats, args.repetition_s = "1", 3, 0.15
    args.threads = [int(t) for t in args.threads.split(",") if t]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    if (args.repeats < 3 or args.repetition_s <= 0 or not args.threads or not args.batches
            or min(args.threads + args.batches) < 1):
        parser.error("--repeats must be at least 3; threads, batches and --repetition-s positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    with results_md.tee_stdout() as printed:
        runs, goals = measure_and_print(args)
    full = (args.threads == [1, 2] and args.batches == [1, 8] and args.repeats >= 5
            and args.torch_compile and args.onnx_models and not args.quick)
    if args.no_results_md or not (full or args.results_md):
        if not args.no_results_md:
            print("real_models: not a full run (--threads 1,2 --batches 1,8, torch.compile, "
                  "the ONNX models, --repeats >= 5): bench/RESULTS.md left alone",
                  file=sys.stderr)
    else:
        body = (results_md.stamp(machine.describe()) + " Written by bench/real_models.py; "
                f"{time.perf_counter() - started:.0f} s in all.\n\n"
                + results_md.demote_headings(printed.getvalue().strip()))
        path = results_md.write_section("real_models", body,
                                        args.results_md or results_md.RESULTS_MD)
        print(f"Tables written into {os.path.relpath(path)}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "goals": [
                {"threads": t, "case": c, "goal": g, "ratio": r, "met": None if r is None
                 else r <= limit} for t, _, c, g, r, limit in goals]}, f, indent=1)
    mismatches = [(t, r["case"], r["mode"]) for t, run in runs.items() for r in run["records"]
                  if r.get("status", "").startswith("mismatch")]
    if mismatches:
        sys.exit("real_models: outputs differ from the reference (not timed): "
                 + "; ".join(f"{t}t {case}, {mode}" for t, case, mode in mismatches))


if __name__ == "__main__":
    main()
