"""The compiler's performance goals, measured side by side in one run on one
thread: compiled kiln (from a C++ loop, traced and hybridized from Python)
against ONNX Runtime and PyTorch (eager, torch.jit.script, torch.compile) on
SCENARIOS.md's W1 (MLP 512-256-128-2) at batch 1, 64 and 1024 and W2 (LeNet on
Nx1x28x28) at batch 1, float32, everything in inference (no_grad, eval).

Every framework holds the same weights (torch's, seed 0: kiln gets them
through load_state_dict, ONNX as initializers of a graph built with
onnx.helper) and gets the same input; every mode's output is checked against
PyTorch eager (atol 1e-4) before any timing, and a mismatch exits non-zero
naming the mode. Each mode runs --repeats repetitions of --calls calls
(batch 1; larger batches take fewer calls, about 0.2 s a repetition), the
modes interleaved within a repetition so that a slow moment of the machine
hits all of them; tables give the median and best repetition in µs per call.
W1's GFLOP/s count 2*(512*256 + 256*128 + 128*2) flops per sample and are
set against this core's FP32 peak, measured by bench/fma_peak.cpp
(build/release/bench/kiln_bench_peak, else compiled here with g++).
"Faster than X" goals compare medians, kiln called from Python (traced) as X
is; kiln from C++ is shown beside it. What it prints (the tables, a summary
and the goals) also becomes the "compiled_models" section of
bench/RESULTS.md (--results-md PATH: another file; --no-results-md: none).

    OMP_NUM_THREADS=1 .venv/bin/python bench/compiled_models.py \
        [--repeats 7] [--calls 1000] [--no-torch-compile] [--json out.json]
        [--results-md bench/RESULTS.md | --no-results-md]
"""
import argparse
import contextlib
import json
import os
import sys

# One thread, for every framework: set before any of them starts OpenMP.
os.environ["OMP_NUM_THREADS"] = "1"

import pathlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kiln  # noqa: E402
import kiln.jit  # noqa: E402
from eager_python import lenet, mlp  # noqa: E402  (bench/ is on sys.path as the script's dir)
from harness import machine, results_md  # noqa: E402
from hybrid_python import python_loop  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOLERANCE = 1e-4
BASELINE = "PyTorch eager"
CPP, TRACED, HYBRID = "kiln compiled, C++ loop", "kiln traced (Python)", "kiln hybridized (Python)"
W1_FLOPS_PER_SAMPLE = 2 * (512 * 256 + 256 * 128 + 128 * 2)
REPETITION_S = 0.2  # the length of one repetition at batch > 1
# (name, builder, input shape, all modes?); W1 at 64 and 1024 skips jit.script and torch.compile.
CASES = [("W1 batch 1", mlp, (1, 512), True), ("W2 batch 1", lenet, (1, 1, 28, 28), True),
         ("W1 batch 64", mlp, (64, 512), False), ("W1 batch 1024", mlp, (1024, 512), False)]


def measure_peak():
    """(GFLOP/s or None, where the number came from)."""
    binary = ROOT / "build/release/bench/kiln_bench_peak"
    with tempfile.TemporaryDirectory() as tmp:
        source = str(binary.relative_to(ROOT))
        if not binary.exists():
            built = pathlib.Path(tmp) / "kiln_bench_peak"
            cmd = ["g++", "-O2", "-mavx2", "-mfma", "-std=c++20",
                   str(ROOT / "bench/fma_peak.cpp"), "-o", str(built)]
            try:
                subprocess.run(cmd, check=True, capture_output=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as e:
                return None, f"{source} not built and g++ failed ({type(e).__name__})"
            binary, source = built, f"{source} not built: bench/fma_peak.cpp compiled with g++"
        try:
            out = subprocess.run([str(binary)], check=True, capture_output=True, text=True,
                                 timeout=120).stdout
            return float(out.split("fp32_peak_gflops")[1].split()[0]), source
        except (OSError, subprocess.SubprocessError, IndexError, ValueError) as e:
            return None, f"{source} failed ({type(e).__name__})"


def onnx_session(weights, torch_model, input_shape):
    """torch_model (a Sequential) as an ONNX graph (opset 17) holding
    `weights` (its state_dict as numpy), checked, in a one-thread session."""
    with torch.no_grad():
        output_shape = list(torch_model(torch.zeros(input_shape)).shape)
    def pair(v):
        return list(v) if isinstance(v, (tuple, list)) else [v, v]
    nodes, value = [], "x"
    for i, layer in enumerate(torch_model):
        kind, out, params = type(layer).__name__, f"h{i}", [f"{i}.weight", f"{i}.bias"]
        if kind == "Linear":
            nodes.append(helper.make_node("Gemm", [value, *params], [out], transB=1))
        elif kind == "Conv2d":
            nodes.append(helper.make_node("Conv", [value, *params], [out],
                                          kernel_shape=pair(layer.kernel_size),
                                          strides=pair(layer.stride),
                                          pads=pair(layer.padding) * 2))
        elif kind == "AvgPool2d":
            nodes.append(helper.make_node("AveragePool", [value], [out],
                                          kernel_shape=pair(layer.kernel_size),
                                          strides=pair(layer.stride)))
        elif kind in ("ReLU", "Sigmoid", "Flatten"):
            nodes.append(helper.make_node({"ReLU": "Relu"}.get(kind, kind), [value], [out],
                                          **({"axis": 1} if kind == "Flatten" else {})))
        else:
            raise NotImplementedError(f"onnx_session: no ONNX form for {kind}")
        value = out
    graph = helper.make_graph(
        nodes, "model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what opset 17 came with
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def build_modes(build, input_shape, all_modes, use_torch_compile):
    """[(mode, its output as numpy or None, timer or why it has none)], and a
    kiln twin of the model with the kiln input (to time kiln.jit.trace)."""
    torch.manual_seed(0)
    torch_model = build(torch.nn).eval()
    weights = {k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()}
    x_np = np.random.default_rng(0).standard_normal(input_shape).astype(np.float32)
    tx, kx = torch.from_numpy(x_np), kiln.tensor(x_np)

    def kiln_twin():
        model = build(kiln.nn).eval()
        model.load_state_dict(weights)
        return model
    hybrid = kiln_twin().hybridize()
    with kiln.no_grad():
        traced = kiln.jit.trace(kiln_twin(), kx)
        hybrid(kx)  # the first call records and compiles
    session, feed = onnx_session(weights, torch_model, input_shape), {"x": x_np}

    def cpp_loop(calls):
        with kiln.no_grad():
            return kiln._C.jit._seconds_per_call_from_cpp(traced._compiled, [kx], calls) * 1e6

    def kiln_mode(name, fn, timer=None):
        with kiln.no_grad():
            out = fn(kx).detach().numpy().copy()
        return name, out, timer or python_loop(fn, kx, kiln.no_grad)

    def torch_mode(name, fn):
        with torch.no_grad():
            out = fn(tx).numpy().copy()
        return name, out, python_loop(fn, tx, torch.no_grad)

    modes = [kiln_mode(CPP, lambda x: traced._compiled.run([x])[0], cpp_loop),
             kiln_mode(TRACED, traced), kiln_mode(HYBRID, hybrid),
             ("ONNX Runtime", session.run(None, feed)[0],
              python_loop(lambda f: session.run(None, f), feed, contextlib.nullcontext)),
             torch_mode(BASELINE, torch_model)]
    if all_modes:
        modes.append(torch_mode("torch.jit.script", torch.jit.script(torch_model)))
        if not use_torch_compile:
            modes.append(("torch.compile", None, "skipped (--no-torch-compile)"))
        else:
            try:
                start = time.perf_counter()
                mode = torch_mode("torch.compile", torch.compile(torch_model))  # compiles here
                print(f"  torch.compile compiled in {time.perf_counter() - start:.1f} s",
                      file=sys.stderr)
                modes.append(mode)
            except Exception as e:  # noqa: BLE001 (any failure of torch.compile is a result)
                reason = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
                modes.append(("torch.compile", None, f"failed: {type(e).__name__}: {reason}"))
    return modes, kiln_twin(), kx


def check_same_outputs(case, modes):
    """Every mode's output within TOLERANCE of PyTorch eager's, or exit 1."""
    want = next(out for name, out, _ in modes if name == BASELINE)
    bad = []
    for name, got, _ in modes:
        if got is None:
            continue
        if got.shape != want.shape:
            bad.append(f"  {name}: shape {got.shape}, {BASELINE} {want.shape}")
        elif not np.allclose(got, want, rtol=0, atol=TOLERANCE):
            bad.append(f"  {name}: max |diff| {np.max(np.abs(got - want)):.3g} > {TOLERANCE}")
    if bad:
        sys.exit(f"compiled_models: {case}: outputs differ from {BASELINE}, not timing:\n"
                 + "\n".join(bad))


def time_modes(modes, calls, warmup, repeats):
    """{mode: [µs per call, one per repetition]}, the modes interleaved."""
    timed = [(name, timer) for name, out, timer in modes if out is not None]
    for _, timer in timed:  # also lets torch.jit's profiling executor settle
        timer(warmup)
    times = {name: [] for name, _ in timed}
    for _ in range(repeats):
        for name, timer in timed:
            times[name].append(timer(calls))
    return times


def print_table(case, batch, modes, times, calls, repeats, peak):
    w1 = case.startswith("W1")
    print(f"### {case}: µs per call ({repeats} x {calls} calls)\n")
    print("| mode | median µs | best µs | / PyTorch eager |"
          + (" GFLOP/s | % of peak |" if w1 else ""))
    print("|---|---:|---:|---:|" + ("---:|---:|" if w1 else ""))
    base = statistics.median(times[BASELINE])
    for name, _, timer in modes:
        if name not in times:
            print(f"| {name} | {timer} | | |" + (" | |" if w1 else ""))
            continue
        med = statistics.median(times[name])
        row = f"| {name} | {med:.2f} | {min(times[name]):.2f} | {med / base:.2f} |"
        if w1:
            gflops = W1_FLOPS_PER_SAMPLE * batch / med * 1e-3
            row += f" {gflops:.1f} | " + (f"{gflops / peak:.0%} |" if peak else "n/a |")
        print(row)
    print()


def print_summary(results):
    """One table: a row per workload, a column per mode, median µs per call."""
    names = []
    for r in results.values():
        names += [name for name, _, _ in r["modes"] if name not in names]
    print("### Summary: median µs per call\n")
    print("| workload | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for case, r in results.items():
        cells = []
        for name in names:
            t = r["times"].get(name)
            med = statistics.median(t) if t else None
            cells.append("" if med is None else f"{med:.1f}" if med < 100 else f"{med:.0f}")
        print(f"| {case} | " + " | ".join(cells) + " |")
    print()


def goals(results, peak, peak_source, compile_ms):
    """[(goal, measured, verdict)]."""
    def med(case, mode):
        return statistics.median(results[case]["times"][mode])
    rows = [("W1 batch 1 from C++ <= 12 µs", f"{med('W1 batch 1', CPP):.2f} µs",
             med("W1 batch 1", CPP) <= 12),
            ("W1 batch 1 from Python <= 13 µs (traced)", f"{med('W1 batch 1', TRACED):.2f} µs",
             med("W1 batch 1", TRACED) <= 13),
            ("W1 batch 1 from Python <= 13 µs (hybridized)",
             f"{med('W1 batch 1', HYBRID):.2f} µs", med("W1 batch 1", HYBRID) <= 13),
            ("W2 batch 1 from C++ <= 25 µs", f"{med('W2 batch 1', CPP):.2f} µs",
             med("W2 batch 1", CPP) <= 25)]
    for case in ("W1 batch 1", "W2 batch 1"):
        mine = med(case, TRACED)
        for name, _, status in results[case]["modes"]:
            if name.startswith("kiln"):
                continue
            goal = f"{case}: kiln faster than {name}"
            if name not in results[case]["times"]:
                rows.append((goal, status, None))
                continue
            rows.append((goal, f"kiln {mine:.2f} µs (C++ {med(case, CPP):.2f}) vs "
                               f"{med(case, name):.2f} µs", mine < med(case, name)))
    for case in ("W1 batch 64", "W1 batch 1024"):
        batch = int(case.split()[-1])
        gflops = W1_FLOPS_PER_SAMPLE * batch / med(case, CPP) * 1e-3
        if peak is None:
            rows.append((f"{case} >= 85% of FP32 peak (C++)",
                         f"{gflops:.1f} GFLOP/s; peak unavailable: {peak_source}", None))
        else:
            rows.append((f"{case} >= 85% of FP32 peak (C++)",
                         f"{gflops:.1f} of {peak:.1f} GFLOP/s = {gflops / peak:.0%}",
                         gflops / peak >= 0.85))
    rows.append(("W2 compile time (trace + passes + plan) <= 50 ms",
                 f"{compile_ms:.2f} ms (median of 5)", compile_ms <= 50))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="repetitions (at least 5)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per repetition at batch 1")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first at batch 1")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip torch.compile (it takes tens of seconds to compile)")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers here")
    parser.add_argument("--results-md", metavar="PATH", default=str(results_md.RESULTS_MD),
                        help="write the tables into this file's compiled_models section")
    parser.add_argument("--no-results-md", action="store_true",
                        help="leave bench/RESULTS.md alone")
    args = parser.parse_args()
    if args.repeats < 5 or args.calls < 1 or args.warmup < 1:
        parser.error("--repeats must be at least 5, --calls and --warmup at least 1")
    torch.set_num_threads(1)
    started = time.perf_counter()
    with results_md.tee_stdout() as printed:
        rows = measure_and_print(args)
    if not args.no_results_md and args.results_md:
        body = (results_md.stamp(machine.describe()) + " Written by bench/compiled_models.py; "
                f"{time.perf_counter() - started:.0f} s in all.\n\n"
                + results_md.demote_headings(printed.getvalue().strip()))
        path = results_md.write_section("compiled_models", body, args.results_md)
        print(f"Tables written into {os.path.relpath(path)}", file=sys.stderr)
    return rows


def measure_and_print(args):
    """Measures every case, prints the tables and the goals; the goal rows."""
    peak, peak_source = measure_peak()
    print(f"## Compiled models, one thread, float32, no_grad (kiln {kiln.__version__}, "
          f"PyTorch {torch.__version__}, ONNX Runtime {ort.__version__})\n")
    print("FP32 peak of this core: " + (f"{peak:.1f} GFLOP/s" if peak else "unavailable")
          + f" ({peak_source})\n")

    results, compile_ms = {}, None
    for case, build, shape, all_modes in CASES:
        modes, kiln_model, kx = build_modes(build, shape, all_modes, not args.no_torch_compile)
        check_same_outputs(case, modes)
        calls, warmup = args.calls, args.warmup
        if shape[0] > 1:  # about REPETITION_S a repetition, judged by PyTorch eager
            eager = next(timer for name, _, timer in modes if name == BASELINE)
            eager(2)
            calls = max(5, min(args.calls, round(REPETITION_S / (eager(3) * 1e-6))))
            warmup = max(2, calls // 5)
        times = time_modes(modes, calls, warmup, args.repeats)
        results[case] = {"modes": modes, "times": times, "calls": calls}
        print_table(case, shape[0], modes, times, calls, args.repeats, peak)
        if case == "W2 batch 1":
            samples = []
            with kiln.no_grad():
                for _ in range(5):
                    start = time.perf_counter()
                    kiln.jit.trace(kiln_model, kx)
                    samples.append((time.perf_counter() - start) * 1e3)
            compile_ms = statistics.median(samples)

    print_summary(results)
    print("### Goals\n")
    print("| goal | measured | verdict |")
    print("|---|---|---|")
    rows = goals(results, peak, peak_source, compile_ms)
    for goal, measured, met in rows:
        verdict = "not measured" if met is None else ("met" if met else "not met")
        print(f"| {goal} | {measured} | {verdict} |")

    if args.json:
        out = {"threads": 1, "dtype": "float32", "repeats": args.repeats,
               "kiln_version": kiln.__version__, "torch_version": torch.__version__,
               "onnxruntime_version": ort.__version__,
               "fp32_peak_gflops": peak, "fp32_peak_source": peak_source,
               "w2_compile_ms": compile_ms, "cases": {}, "goals": [
                   {"goal": g, "measured": m, "met": met} for g, m, met in rows]}
        for case, r in results.items():
            base = statistics.median(r["times"][BASELINE])
            out["cases"][case] = {"calls": r["calls"], "us_per_call": {
                name: ({"median": statistics.median(t), "best": min(t), "all": t,
                        "ratio_to_torch_eager": statistics.median(t) / base}
                       if (t := r["times"].get(name)) else {"status": status})
                for name, _, status in r["modes"]}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
