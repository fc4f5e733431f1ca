"""The data every framework gets, and what it must compute (driver side).

make_data: PyTorch's default initialization of each model (seed 0) and the
inputs (NumPy's generator, seed 0: standard normal for W1 and MyModel,
uniform [0, 1) for LeNet as SCENARIOS.md's kiln.rand, class labels for the
training steps). reference_outputs: what PyTorch eager computes from them,
which every framework's outputs are checked against (check_outputs)."""
import numpy as np
import torch

from harness import run_torch
from harness.runner import Data
from harness.workloads import CASES, MODELS, parameter_shapes

# atol and rtol of the check: float32 results of the same math summed in
# another order differ by ~1e-6 here; a real error is far larger.
TOLERANCE = 1e-4


def make_data(cases=CASES, seed=0):
    """{npz key: array}: "<model>/param/<name>", "input/<case>", "target/<case>"."""
    data = {}
    torch.manual_seed(seed)
    for model_name in MODELS:
        model = run_torch.build_model(model_name)
        for name, value in model.state_dict().items():
            data[f"{model_name}/param/{name}"] = value.detach().numpy().copy()
        assert [n for n, _ in parameter_shapes(model_name)] == list(model.state_dict())
    rng = np.random.default_rng(seed)
    for case in cases:
        if case.model == "LeNet":
            x = rng.random(case.input_shape, dtype=np.float32)
        else:
            x = rng.standard_normal(case.input_shape, dtype=np.float32)
        data[f"input/{case.id}"] = x
        if case.training:
            data[f"target/{case.id}"] = rng.integers(0, case.classes, case.batch, dtype=np.int64)
    return data


def reference_outputs(data, cases=CASES):
    """{case id: {output name: array}} from PyTorch eager (the same code as
    run_torch's eager modes, run here on one thread)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        source = Data(data)
        out = {}
        for case in cases:
            if case.training:
                mode = run_torch.training_mode(source, case, "reference", "PyTorch eager")
                out[case.id] = mode.outputs()
                continue
            model = run_torch.build_model(case.model, source.weights(case.model)).eval()
            with torch.no_grad():
                out[case.id] = {"out": model(torch.from_numpy(source.input(case))).numpy()}
        return out
    finally:
        torch.set_num_threads(previous)


def check_outputs(want, got):
    """None when `got` ({name: array}) matches `want` within TOLERANCE, else
    what differs, for the table ("output mismatch: ...")."""
    missing = sorted(set(want) - set(got))
    if missing:
        return f"no output {missing[0]}"
    for name, expected in want.items():
        actual = np.asarray(got[name])
        if actual.shape != expected.shape:
            return f"{name}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        actual = actual.astype(np.float64)
        if not np.all(np.isfinite(actual)):
            return f"{name}: not finite"
        if not np.allclose(actual, expected, rtol=TOLERANCE, atol=TOLERANCE):
            diff = float(np.max(np.abs(actual - expected)))
            return f"{name}: max |diff| {diff:.3g} > {TOLERANCE:g}"
    return None
