"""What every framework's runner (bench/harness/run_<framework>.py) shares:
reading the job the driver wrote, the weights and inputs, timing the modes,
and writing back the outputs and timings. Imports only NumPy and the
standard library, so it runs in every framework's venv (MXNet's has
NumPy 1.23).

A runner is started as `python run_<framework>.py JOB.json` and builds, per
case, a list of Mode objects. For each mode it computes the outputs the
driver checks against PyTorch eager (inference: the model's output; training:
the loss of each of STEPS_CHECKED steps from the initial weights, then the
weights), and times calls. Within a case the modes are interleaved: every
repetition times each mode once, so that a slow moment of the machine hits
all of them.
"""
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness.workloads import CASES_BY_ID, parameter_shapes  # noqa: E402


class Mode:
    """One way of running a case in a framework.

    outputs(): {name: numpy array}, computed first (a compiling mode compiles
    here). step(): one timed call, blocking until its result is computed (for
    frameworks that dispatch asynchronously). Either may raise: the mode is
    then reported as failed with the exception, and the others go on."""

    def __init__(self, id, label, outputs=None, step=None, unavailable=None, timer=None):
        self.id = id
        self.label = label
        self.outputs = outputs
        self.step = step
        self.unavailable = unavailable  # why this mode cannot run here, or None
        self.timer = timer  # calls -> µs per call, for a loop that is not Python's

    def time(self, calls):
        """µs per call over `calls` calls."""
        if self.timer:
            return self.timer(calls)
        start = time.perf_counter()
        for _ in range(calls):
            self.step()
        return (time.perf_counter() - start) / calls * 1e6


class Data:
    """The weights and inputs every framework gets (the driver's .npz)."""

    def __init__(self, data):
        self.data = data

    def weights(self, model):
        """{state_dict name: float32 array} of the model's initial weights."""
        return {name: self.data[f"{model}/param/{name}"].copy()
                for name, _ in parameter_shapes(model)}

    def input(self, case):
        return self.data[f"input/{case.id}"].copy()

    def target(self, case):
        return self.data[f"target/{case.id}"].copy()


class Job(Data):
    """The driver's instructions, and the shared data."""

    def __init__(self, path):
        with open(path) as f:
            spec = json.load(f)
        self.spec = spec
        self.threads = int(spec["threads"])
        self.repeats = int(spec["repeats"])
        self.calls = int(spec["calls"])
        self.warmup = int(spec["warmup"])
        self.repetition_s = float(spec["repetition_s"])
        self.batch1_repetition_s = float(spec["batch1_repetition_s"])
        self.cases = [CASES_BY_ID[c] for c in spec["cases"]]
        self.out = spec["out"]
        self.skip = set(spec.get("skip", []))  # "framework:mode" not to run
        with np.load(spec["data"]) as data:
            super().__init__({k: data[k] for k in data.files})


def training_outputs(losses, params):
    """The outputs of a training check: the STEPS_CHECKED losses and the
    weights after them, under their state_dict names."""
    out = {"losses": np.asarray([float(v) for v in losses], dtype=np.float32)}
    for name, value in params.items():
        out[f"param/{name}"] = np.asarray(value, dtype=np.float32)
    return out


def _calls_for(job, case, seconds_per_call):
    """Calls per repetition: job.calls, fewer when one repetition would take
    longer than the target (~0.2 s at batch > 1, ~1 s at batch 1)."""
    target = job.batch1_repetition_s if case.batch == 1 else job.repetition_s
    return max(5, min(job.calls, round(target / max(seconds_per_call, 1e-9))))


def _failure(e):
    text = str(e).strip().splitlines()
    detail = f": {text[0][:160]}" if text else ""
    return f"failed: {type(e).__name__}{detail}"


def run_case(job, case, modes, outputs_store, framework=""):
    """Checks (computes outputs) and times the modes of one case; returns a
    record per mode. outputs_store collects "case/mode/name" -> array."""
    records, timed = [], []
    for mode in modes:
        record = {"case": case.id, "mode": mode.id, "label": mode.label}
        records.append(record)
        if f"{framework}:{mode.id}" in job.skip:
            record["status"] = "skipped (--skip-modes)"
            continue
        if mode.unavailable:
            record["status"] = f"not available: {mode.unavailable}"
            continue
        try:
            start = time.perf_counter()
            for name, value in mode.outputs().items():
                outputs_store[f"{case.id}/{mode.id}/{name}"] = np.asarray(value)
            record["first_call_s"] = time.perf_counter() - start
            mode.time(min(job.warmup, 20))  # settles compile-on-call paths
            record["calls"] = _calls_for(job, case, mode.time(3) * 1e-6)
            mode.time(min(job.warmup, max(2, record["calls"] // 5)))
            record["status"] = "ok"
            timed.append((mode, record))
        except Exception as e:  # noqa: BLE001 (any failure is a result to report)
            record["status"] = _failure(e)
            record["traceback"] = traceback.format_exc(limit=4)
    for record in (r for _, r in timed):
        record["us_per_call"] = []
    for _ in range(job.repeats):
        for mode, record in timed:
            if record["status"] != "ok":
                continue
            try:
                record["us_per_call"].append(mode.time(record["calls"]))
            except Exception as e:  # noqa: BLE001
                record["status"] = _failure(e)
    return records


def main(framework, versions, build_modes):
    """The whole runner: `build_modes(job, case)` -> [Mode] for each case.
    Writes JOB.out + ".json" (timings, statuses) and ".npz" (outputs)."""
    job = Job(sys.argv[1])
    records, outputs = [], {}
    for case in job.cases:
        try:
            modes = build_modes(job, case)
        except Exception as e:  # noqa: BLE001 (a model that cannot be built is a result)
            records.append({"case": case.id, "mode": "*", "label": framework,
                            "status": _failure(e), "traceback": traceback.format_exc(limit=4)})
            continue
        records.extend(run_case(job, case, modes, outputs, framework))
        print(f"  {framework}: {case.id} done", file=sys.stderr, flush=True)
    np.savez(job.out + ".npz", **outputs)
    with open(job.out + ".json", "w") as f:
        json.dump({"framework": framework, "versions": versions(), "threads": job.threads,
                   "affinity": sorted(os.sched_getaffinity(0)), "records": records}, f, indent=1)
