"""SCENARIOS.md's W4, an LSTM language model (Embedding(256, 128),
LSTM(128 -> 256, 2 layers, batch_first), Linear(256 -> 256)) on token ids of
batch 1 and 32 by sequence 64, float32, inference (eval, no_grad): compiled
kiln against kiln eager, PyTorch eager (nn.LSTM), torch.jit.script,
torch.compile and ONNX Runtime (on the model exported by torch.onnx.export,
two ONNX LSTM nodes), side by side at 1 thread and at 2. Issue 22's goal:
compiled kiln faster than each of them.

Each thread count runs in a process of its own (this script, started again
with --child), whose OMP/MKL thread settings are set before any library
starts: kiln reads OMP_NUM_THREADS, PyTorch gets torch.set_num_threads and
ONNX Runtime intra_op_num_threads. Every framework holds the same weights
(torch's, seed 0; kiln gets them through load_state_dict, whose names are
PyTorch's) and gets the same tokens; every mode's output is checked against
PyTorch eager (atol 1e-4) before any timing, and a mismatch exits non-zero
naming the mode. Modes run --repeats repetitions (about 0.3 s each: --calls
calls at batch 1, fewer at batch 32), interleaved within a repetition so
that a slow moment of the machine hits all of them; tables give the median
and best repetition in ms per call.

torch.compile is timed twice: as it comes, Dynamo does not trace nn.LSTM
and runs the whole forward eagerly (graph break "Dynamo does not support
RNN, GRU, or LSTM"), and with torch._dynamo.config.allow_rnn = True (its
experimental support, which compiles the model; tens of seconds per batch
size). "kiln compiled" in the goals is kiln.jit.trace called from Python,
as the other frameworks are; the same graph called from a C++ loop is shown
beside it. What the parent prints also becomes the "rnn_w4" section of
bench/RESULTS.md after a full run (--results-md PATH: another file;
--no-results-md: none).

    .venv/bin/python bench/rnn_w4.py [--threads 1,2] [--batches 1,32] [--repeats 7]
        [--calls 100] [--no-torch-compile] [--json out.json] [--no-results-md]
"""
import argparse
import contextlib
import copy
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
VOCAB, EMBED, HIDDEN, LAYERS, SEQ = 256, 128, 256, 2, 64
TOLERANCE = 1e-4
BASELINE = "PyTorch eager"
CPP, TRACED, HYBRID, EAGER = ("kiln compiled, C++ loop", "kiln traced (Python)",
                              "kiln hybridized (Python)", "kiln eager")
COMPILE, COMPILE_RNN = "torch.compile", "torch.compile (allow_rnn)"
REPETITION_S = 0.3  # the length of one repetition of one mode, roughly
# Multiply-adds x 2 per token: the input projections of both layers, the
# recurrent products and the head (the gates' pointwise work not counted).
FLOPS_PER_TOKEN = 2 * (4 * HIDDEN * (EMBED + HIDDEN) + LAYERS * 4 * HIDDEN * HIDDEN
                       + HIDDEN * VOCAB)


def build(nn):
    """W4 in torch.nn or kiln.nn: (batch, seq) token ids -> (batch, seq, vocab)."""
    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens):
            out, _ = self.lstm(self.embed(tokens))
            return self.head(out)

    return LanguageModel()


def loop(fn, x, context):
    """A mode timed from Python: calls -> ms per call."""
    def run(calls):
        with context():
            start = time.perf_counter()
            for _ in range(calls):
                fn(x)
            return (time.perf_counter() - start) / calls * 1e3
    return run


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:140] if text else ''}"


def onnx_mode(torch_model, tokens, threads):
    """ONNX Runtime on torch.onnx.export's graph (TorchScript exporter, opset
    17, which writes nn.LSTM as ONNX LSTM): (output, timer, note)."""
    import io
    import warnings

    import onnx
    import onnxruntime as ort
    import torch
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(torch_model, (torch.from_numpy(tokens),), buffer, dynamo=False,
                          input_names=["tokens"], output_names=["logits"], opset_version=17)
    model = onnx.load_from_string(buffer.getvalue())
    lstm_nodes = sum(node.op_type == "LSTM" for node in model.graph.node)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"])
    feed = {"tokens": tokens}
    return (session.run(None, feed)[0], loop(lambda f: session.run(None, f), feed,
                                             contextlib.nullcontext),
            f"{len(model.graph.node)} ONNX nodes, {lstm_nodes} of them LSTM")


def own_forward(model, tag):
    """`model` with a forward whose code object is its own: Dynamo keeps what
    it compiled (or that it gave up on a frame) on the code object, so two
    torch.compile modes of one class would otherwise share it."""
    forward = type(model).forward
    code = forward.__code__.replace(co_name=f"forward_{tag}")
    function = types.FunctionType(code, forward.__globals__, code.co_name, forward.__defaults__,
                                  forward.__closure__)
    model.forward = types.MethodType(function, model)
    return model


def dynamo_first_call(compiled, allow_rnn, tx):
    """Calls `compiled` once (it compiles) under allow_rnn; (compiled, a note
    saying why Dynamo made no graph, if it made none)."""
    import torch
    from torch._dynamo.utils import counters
    graphs = counters["stats"]["unique_graphs"]
    gave_up = set(counters["unimplemented"])
    with torch._dynamo.config.patch(allow_rnn=allow_rnn), torch.no_grad():
        compiled(tx)
    if counters["stats"]["unique_graphs"] > graphs:
        return compiled, ""
    # Its reason: one new in this call, else (Dynamo gave up on the same
    # frame for an earlier batch size) the ones it gave before.
    reasons = ([r for r in counters["unimplemented"] if r not in gave_up]
               or list(counters["unimplemented"]))
    reasons = [r.splitlines()[0] for r in reasons]
    return compiled, ("no graph: the forward runs eagerly"
                      + (f" (Dynamo: {reasons[0][:80]})" if reasons else ""))


def build_modes(batch, threads, use_torch_compile):
    """[(mode, output as numpy or None, timer or why there is none, note)]."""
    import numpy as np
    import torch

    import kiln
    import kiln.jit
    torch.manual_seed(0)
    torch_model = build(torch.nn).eval()
    weights = {k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()}
    tokens = np.random.default_rng(0).integers(0, VOCAB, (batch, SEQ)).astype(np.int64)
    tx, kx = torch.from_numpy(tokens), kiln.tensor(tokens)

    def kiln_twin():
        model = build(kiln.nn).eval()
        model.load_state_dict(weights)
        return model
    eager, hybrid = kiln_twin(), kiln_twin().hybridize()
    with kiln.no_grad():
        traced = kiln.jit.trace(kiln_twin(), kx)
        hybrid(kx)  # the first call records and compiles

    def cpp_loop(calls):
        with kiln.no_grad():
            return kiln._C.jit._seconds_per_call_from_cpp(traced._compiled, [kx], calls) * 1e3

    def kiln_mode(name, fn, timer=None, note=""):
        with kiln.no_grad():
            out = fn(kx).detach().numpy().copy()
        return name, out, timer or loop(fn, kx, kiln.no_grad), note

    def torch_mode(name, make):
        try:
            start = time.perf_counter()
            made = make()  # torch.compile compiles here, on its first call
            fn, note = made if isinstance(made, tuple) else (made, "")
            with torch.no_grad():
                out = fn(tx).numpy().copy()
            seconds = time.perf_counter() - start
            if seconds > 1:
                note = f"{note}; first call (compiling) {seconds:.0f} s".lstrip("; ")
            return name, out, loop(fn, tx, torch.no_grad), note
        except Exception as e:  # noqa: BLE001 (a framework failing is a result, not a crash)
            return name, None, f"failed: {first_line(e)}", ""

    def compiled(tag, allow_rnn):
        def make():
            model = own_forward(copy.deepcopy(torch_model), tag)
            return dynamo_first_call(torch.compile(model), allow_rnn, tx)
        return make

    modes = [kiln_mode(CPP, lambda x: traced._compiled.run([x])[0], cpp_loop),
             kiln_mode(TRACED, traced), kiln_mode(HYBRID, hybrid), kiln_mode(EAGER, eager),
             torch_mode(BASELINE, lambda: torch_model),
             torch_mode("torch.jit.script", lambda: torch.jit.script(torch_model))]
    if use_torch_compile:
        modes.append(torch_mode(COMPILE, compiled("default", False)))
        modes.append(torch_mode(COMPILE_RNN, compiled("allow_rnn", True)))
    else:
        modes += [(name, None, "skipped (--no-torch-compile)", "")
                  for name in (COMPILE, COMPILE_RNN)]
    try:
        out, timer, note = onnx_mode(torch_model, tokens, threads)
        modes.append(("ONNX Runtime", out, timer, note))
    except Exception as e:  # noqa: BLE001
        modes.append(("ONNX Runtime", None, f"failed: {first_line(e)}", ""))
    return modes


def check_outputs(case, modes):
    """Every mode within TOLERANCE of PyTorch eager, or exit 1 naming it."""
    import numpy as np
    want = next(out for name, out, _, _ in modes if name == BASELINE)
    bad = []
    for name, got, _, _ in modes:
        if got is None:
            continue
        if got.shape != want.shape:
            bad.append(f"  {name}: shape {got.shape}, {BASELINE} {want.shape}")
        elif not np.allclose(got, want, rtol=0, atol=TOLERANCE):
            bad.append(f"  {name}: max |diff| {np.max(np.abs(got - want)):.3g} > {TOLERANCE}")
    if bad:
        sys.exit(f"rnn_w4: {case}: outputs differ from {BASELINE}, not timing:\n" + "\n".join(bad))


def child(args):
    """Measures every batch at args.child threads; writes JSON to args.out."""
    import torch
    torch.set_num_threads(args.child)
    results = {}
    for batch in args.batches:
        case = f"W4 batch {batch}"
        print(f"-- {case}, {args.child} thread(s)", file=sys.stderr, flush=True)
        modes = build_modes(batch, args.child, not args.no_torch_compile)
        check_outputs(case, modes)
        timed = [(name, timer) for name, out, timer, _ in modes if out is not None]
        eager = dict(timed)[BASELINE]
        eager(1)
        per_call_ms = eager(2)
        calls = max(3, min(args.calls, round(REPETITION_S * 1e3 / per_call_ms)))
        for _, timer in timed:  # also lets torch.jit's profiling executor settle
            timer(max(2, calls // 3))
        times = {name: [] for name, _ in timed}
        for _ in range(args.repeats):
            for name, timer in timed:
                times[name].append(timer(calls))
        results[case] = {"batch": batch, "calls": calls, "modes": [
            {"mode": name, "note": note, **({"ms": times[name]} if name in times
                                            else {"status": timer})}
            for name, _, timer, note in modes]}
    with open(args.out, "w") as f:
        json.dump({"threads": args.child, "cases": results}, f)


def median(ms):
    return statistics.median(ms)


def fmt(ms):
    return f"{ms:.3f}" if ms < 10 else f"{ms:.2f}" if ms < 100 else f"{ms:.1f}"


def print_run(run, repeats):
    """One thread count: a table per batch; returns its goal rows."""
    threads, goals = run["threads"], []
    for case, r in run["cases"].items():
        tokens = r["batch"] * SEQ
        print(f"### {case}, {threads} thread{'s' if threads > 1 else ''}: ms per call "
              f"({repeats} x {r['calls']} calls)\n")
        print("| mode | median ms | best ms | / PyTorch eager | GFLOP/s | note |")
        print("|---|---:|---:|---:|---:|---|")
        base = median(next(m["ms"] for m in r["modes"] if m["mode"] == BASELINE))
        for m in r["modes"]:
            if "ms" not in m:
                print(f"| {m['mode']} | {m['status']} | | | | {m['note']} |")
                continue
            med = median(m["ms"])
            gflops = FLOPS_PER_TOKEN * tokens / med * 1e-6
            print(f"| {m['mode']} | {fmt(med)} | {fmt(min(m['ms']))} | {med / base:.2f} | "
                  f"{gflops:.1f} | {m['note']} |")
        print()
        mine = next(m["ms"] for m in r["modes"] if m["mode"] == TRACED)
        for m in r["modes"]:
            if m["mode"].startswith("kiln"):
                continue
            goal = f"{case}, {threads}t: kiln compiled faster than {m['mode']}"
            if "ms" not in m:
                goals.append((goal, m["status"], None))
                continue
            by_median, by_best = median(mine) / median(m["ms"]), min(mine) / min(m["ms"])
            goals.append((goal, f"{fmt(median(mine))} vs {fmt(median(m['ms']))} ms: "
                                f"{by_median:.2f}x by median, {by_best:.2f}x by best",
                          by_median < 1))
    return goals


def run_child(threads, args, work):
    out = pathlib.Path(work) / f"w4-{threads}t.json"
    argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", str(threads),
            "--out", str(out), "--batches", ",".join(map(str, args.batches)),
            "--repeats", str(args.repeats), "--calls", str(args.calls)]
    if args.no_torch_compile:
        argv.append("--no-torch-compile")
    env = dict(os.environ)
    env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                          "OPENBLAS_NUM_THREADS")})
    done = subprocess.run(argv, env=env, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"rnn_w4: the {threads}-thread run failed (exit {done.returncode})")
    return json.loads(out.read_text())


def measure_and_print(args):
    from harness.machine import framework_versions  # main() put bench/ on the path
    print(f"## W4 (LSTM language model), float32, no_grad ({framework_versions()})\n")
    print(f"Embedding({VOCAB}, {EMBED}), LSTM({EMBED} -> {HIDDEN}, {LAYERS} layers, "
          f"batch_first), Linear({HIDDEN} -> {VOCAB}); sequence {SEQ}; "
          f"{FLOPS_PER_TOKEN * SEQ / 1e6:.0f} MFLOP per sequence in the products.\n")
    runs, goals = [], []
    with tempfile.TemporaryDirectory() as work:
        for threads in args.threads:
            runs.append(run_child(threads, args, work))
            goals += print_run(runs[-1], args.repeats)
    print("### Goals: kiln compiled (traced, from Python) faster than each, by median\n")
    print("| goal | kiln vs other | verdict |")
    print("|---|---|---|")
    for goal, measured, met in goals:
        verdict = "not measured" if met is None else ("met" if met else "not met")
        print(f"| {goal} | {measured} | {verdict} |")
    return runs, goals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts, one process each")
    parser.add_argument("--batches", default="1,32", help="batch sizes (sequence 64)")
    parser.add_argument("--repeats", type=int, default=7, help="repetitions (at least 3)")
    parser.add_argument("--calls", type=int, default=100,
                        help="calls per repetition at most (batch 1; fewer at batch 32)")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip both torch.compile modes (allow_rnn compiles for tens of s)")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers here")
    parser.add_argument("--results-md", metavar="PATH", default=None,
                        help="write the tables into this file's rnn_w4 section "
                             "(default: bench/RESULTS.md, after a full run)")
    parser.add_argument("--no-results-md", action="store_true",
                        help="leave bench/RESULTS.md alone")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",") if t]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    if args.repeats < 3 or args.calls < 1 or min(args.threads) < 1 or min(args.batches) < 1:
        parser.error("--repeats must be at least 3; --calls, threads and batches at least 1")
    if args.child:
        return child(args)

    sys.path.insert(0, str(BENCH))
    from harness import machine, results_md
    started = time.perf_counter()
    with results_md.tee_stdout() as printed:
        runs, goals = measure_and_print(args)
    full = (args.threads == [1, 2] and args.batches == [1, 32] and args.repeats >= 5
            and not args.no_torch_compile)
    if args.no_results_md or not (full or args.results_md):
        if not args.no_results_md:
            print("rnn_w4: not a full run (--threads 1,2 --batches 1,32, torch.compile, "
                  "--repeats >= 5): bench/RESULTS.md left alone", file=sys.stderr)
    else:
        body = (results_md.stamp(machine.describe()) + " Written by bench/rnn_w4.py; "
                f"{time.perf_counter() - started:.0f} s in all.\n\n"
                + results_md.demote_headings(printed.getvalue().strip()))
        path = results_md.write_section("rnn_w4", body, args.results_md or results_md.RESULTS_MD)
        print(f"Tables written into {os.path.relpath(path)}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "goals": [{"goal": g, "measured": m, "met": met}
                                               for g, m, met in goals]}, f, indent=2)
    return runs, goals


if __name__ == "__main__":
    main()
