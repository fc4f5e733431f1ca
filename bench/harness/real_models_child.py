"""One framework at one thread count, for bench/real_models.py, which
starts it already pinned to its cores (harness/pinning.py: the affinity set
before it starts) with every thread knob of the environment set:

    python bench/harness/real_models_child.py FRAMEWORK JOB.json OUT.json

FRAMEWORK is kiln (traced and hybridized from Python; kiln.onnx.load for the
pretrained models), kiln-cpp (the saved .kiln file through the `kiln`
command-line tool: `kiln run` for the output, `kiln bench` for the time),
onnxruntime (an InferenceSession on the model kiln.onnx.export wrote, or on
the pretrained file) or torch (eager, torch.compile). Only that framework
is imported. Every mode's output is checked against the reference the
driver computed (PyTorch eager; ONNX Runtime for the pretrained models)
before it is timed; a mode that differs is reported and not timed.

Timing: within a case the modes are interleaved: each repetition calls
every mode for about `repetition_s` (at least one call), after as many
calls untimed. Each mode also reports process CPU time over wall time while
it was timed: more than the thread count means the pinning leaks.
"""
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))
from models import weights  # noqa: E402

TOLERANCE = 1e-4  # of the output's scale (at least 1), plus as much relative


def difference(got, want):
    """None when `got` matches `want`, else what differs."""
    if got.shape != want.shape:
        return f"shape {got.shape}, reference {want.shape}"
    if want.dtype.kind != "f":
        wrong = int(np.sum(got != want))
        return f"{wrong} of {want.size} values differ" if wrong else None
    scale = max(1.0, float(np.abs(want).max()))
    excess = np.abs(got - want) - TOLERANCE * (scale + np.abs(want))
    if np.isfinite(got).all() and excess.max() <= 0:
        return None
    return f"max |diff| {float(np.abs(got - want).max()):.3g} (scale {scale:.3g})"


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:160] if text else ''}"


class Mode:
    """`outputs()` -> [numpy arrays], computed first (a compiling mode
    compiles here); `call()` one timed call; or `timer(repeats,
    repetition_s)` -> (ms list, cpu per wall) for a loop that is not ours."""

    def __init__(self, name, outputs, call=None, timer=None):
        self.name, self.outputs, self.call, self.timer = name, outputs, call, timer
        self.record = {"mode": name}

    def loop(self, calls):
        """(ms per call, CPU seconds, wall seconds) over `calls` calls."""
        cpu, start = time.process_time(), time.perf_counter()
        for _ in range(calls):
            self.call()
        wall = time.perf_counter() - start
        return wall / calls * 1e3, time.process_time() - cpu, wall


def check(mode, references):
    """Computes the mode's outputs and compares them; True when it may be timed."""
    try:
        start = time.perf_counter()
        outputs = mode.outputs()
        mode.record["first_call_s"] = round(time.perf_counter() - start, 3)
    except Exception as e:  # noqa: BLE001 (a framework failing is a result)
        mode.record["status"] = f"failed: {first_line(e)}"
        return False
    if len(outputs) != len(references):
        mode.record["status"] = f"mismatch: {len(outputs)} outputs, reference {len(references)}"
        return False
    for i, (got, want) in enumerate(zip(outputs, references)):
        why = difference(np.asarray(got), want)
        if why:
            mode.record["status"] = f"mismatch: output {i}: {why}"
            return False
    mode.record["status"] = "ok"
    return True


def time_modes(modes, repeats, repetition_s):
    """Fills each timed mode's record with ms (one per repetition) and cpu_per_wall."""
    looped = [m for m in modes if m.timer is None]
    calls = {}
    for mode in looped:
        mode.loop(1)
        per_call_ms = min(mode.loop(1)[0], mode.loop(1)[0])
        calls[mode.name] = max(1, round(repetition_s * 1e3 / per_call_ms))
        mode.loop(calls[mode.name])  # warm-up
    cpu, wall = {m.name: 0.0 for m in looped}, {m.name: 0.0 for m in looped}
    for mode in looped:
        mode.record.update(calls=calls[mode.name], ms=[])
    for _ in range(repeats):
        for mode in looped:
            ms, used, took = mode.loop(calls[mode.name])
            mode.record["ms"].append(ms)
            cpu[mode.name] += used
            wall[mode.name] += took
    for mode in looped:
        mode.record["cpu_per_wall"] = round(cpu[mode.name] / wall[mode.name], 3)
    for mode in modes:
        if mode.timer is not None:
            ms, cpu_per_wall, note = mode.timer(repeats, repetition_s)
            mode.record.update(ms=ms, cpu_per_wall=cpu_per_wall, note=note)


# ---- the frameworks ----------------------------------------------------------

def kiln_modes(case, threads):
    import kiln
    import kiln.jit
    kiln.set_num_threads(threads)
    if case["kind"] == "onnx":
        feeds = np.load(case["feeds"])
        inputs = [kiln.from_numpy(np.asarray(feeds[n], order="C")) for n in case["names"]]
        model = kiln.onnx.load(case["path"])

        def outputs():
            got = model(*inputs)
            return [g.numpy() for g in (got if isinstance(got, tuple) else (got,))]
        return [Mode("kiln.onnx.load", outputs, lambda: model(*inputs))]
    state = dict(np.load(case["state"]))
    x = kiln.tensor(np.load(case["input"]))
    traced, hybrid = {}, weights.kiln_model(case["model"], state).hybridize()

    def traced_outputs():
        with kiln.no_grad():
            traced["fn"] = kiln.jit.trace(weights.kiln_model(case["model"], state), x,
                                          frozen=True)
            return [traced["fn"](x).numpy()]

    def traced_call():
        with kiln.no_grad():
            traced["fn"](x)

    def hybrid_call():
        with kiln.no_grad():
            return hybrid(x)
    return [Mode("kiln traced", traced_outputs, traced_call),
            Mode("kiln hybridized", lambda: [hybrid_call().numpy()], hybrid_call)]


def onnxruntime_modes(case, threads):
    import onnxruntime as ort
    if case.get("onnx_error"):
        raise RuntimeError(f"kiln.onnx.export failed: {case['onnx_error']}")
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3  # unused initializers and declared ranks: not ours to fix
    path = case["path"] if case["kind"] == "onnx" else case["onnx"]
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    if case["kind"] == "onnx":
        feeds = dict(np.load(case["feeds"]))
    else:
        feeds = {session.get_inputs()[0].name: np.load(case["input"])}
    return [Mode("ONNX Runtime", lambda: session.run(None, feeds),
                 lambda: session.run(None, feeds))]


def torch_modes(case, threads, use_torch_compile):
    import torch
    torch.set_num_threads(threads)
    model = weights.MODELS[case["model"]](torch.nn)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(case["state"]).items()})
    model.eval()
    x = torch.from_numpy(np.load(case["input"]))

    def mode(name, fn):
        def call():
            with torch.no_grad():
                return fn(x)
        return Mode(name, lambda: [call().numpy()], call)
    modes = [mode("PyTorch eager", model)]
    if not use_torch_compile:
        return modes
    torch._dynamo.reset()  # each case compiles afresh, at its own static shape
    compiled = mode("torch.compile", torch.compile(model))

    def outputs():
        from torch._dynamo.utils import counters
        graphs, known = counters["stats"]["unique_graphs"], set(counters["unimplemented"])
        out = compiled.call()  # compiles
        graphs = counters["stats"]["unique_graphs"] - graphs
        reasons = [r.splitlines()[0][:80] for r in counters["unimplemented"] if r not in known]
        compiled.record["note"] = (f"Dynamo made {graphs} graph(s)" if graphs else
                                   "Dynamo made no graph: it runs eagerly")
        if reasons:
            compiled.record["note"] += f"; graph breaks: {'; '.join(reasons)}"
        return [out.numpy()]
    compiled.outputs = outputs
    return modes + [compiled]


def cli_timer(binary, path, threads):
    def timer(repeats, repetition_s):
        def bench(iterations, warmup):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            out = subprocess.run([binary, "bench", path, "--threads", str(threads),
                                  "--iterations", str(iterations), "--warmup", str(warmup)],
                                 check=True, capture_output=True, text=True).stdout
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            found = re.search(r"p50 ([\d.]+).*min ([\d.]+)", out)
            if not found:
                raise RuntimeError(f"kiln bench printed no latency line: {out!r}")
            return float(found[1]) / 1e3, float(found[2]) / 1e3, cpu / wall
        p50, _, _ = bench(2, 1)
        iterations = repeats * max(1, round(repetition_s * 1e3 / p50))
        p50, best, cpu_per_wall = bench(iterations, max(1, iterations // repeats))
        # One run of `iterations` calls: its median call and fastest call
        return [p50, best], round(cpu_per_wall, 3), f"kiln bench: p50 and min of {iterations}"
    return timer


def kiln_cpp_modes(case, threads, work):
    if case.get("kiln_file_error"):
        raise RuntimeError(f"saving the traced model failed: {case['kiln_file_error']}")
    binary = str(BENCH.parent / "build/release/kiln")
    out = str(pathlib.Path(work) / f"{case['id'].replace(' ', '_')}-cli-out.npy")

    def outputs():
        subprocess.run([binary, "run", case["kiln_file"], "-i", case["input"], "-o", out],
                       check=True, capture_output=True, text=True)
        return [np.load(out)]
    return [Mode("kiln C++ (kiln bench)", outputs,
                 timer=cli_timer(binary, case["kiln_file"], threads))]


def main():
    framework, job_path, out_path = sys.argv[1:4]
    job = json.loads(pathlib.Path(job_path).read_text())
    threads, records = job["threads"], []
    for case in job["cases"]:
        if framework in ("torch", "kiln-cpp") and case["kind"] == "onnx":
            continue
        print(f"  {framework}, {threads}t: {case['id']}", file=sys.stderr, flush=True)
        try:
            if framework == "kiln":
                modes = kiln_modes(case, threads)
            elif framework == "kiln-cpp":
                modes = kiln_cpp_modes(case, threads, pathlib.Path(out_path).parent)
            elif framework == "onnxruntime":
                modes = onnxruntime_modes(case, threads)
            else:
                modes = torch_modes(case, threads, job["torch_compile"])
        except Exception as e:  # noqa: BLE001
            records.append({"case": case["id"], "mode": framework,
                            "status": f"failed: {first_line(e)}"})
            continue
        with np.load(case["reference"]) as saved:  # out0, out1, ...
            references = [saved[f"out{i}"] for i in range(len(saved.files))]
        timed = [m for m in modes if check(m, references)]
        try:
            time_modes(timed, job["repeats"], job["repetition_s"])
        except Exception as e:  # noqa: BLE001
            for mode in timed:
                mode.record["status"] = f"failed while timed: {first_line(e)}"
        records += [{"case": case["id"], **m.record} for m in modes]
    pathlib.Path(out_path).write_text(json.dumps(
        {"framework": framework, "threads": threads,
         "affinity": sorted(os.sched_getaffinity(0)), "records": records}))


if __name__ == "__main__":
    main()
