"""Runs every case of the op test table in PyTorch and writes the reference
file the C++ op-table test reads: python gen_refs.py OUT.json"""
from __future__ import annotations

import importlib
import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from oracle import Case, default_tolerances  # noqa: E402

CASE_MODULES = [
    "cases_copy",
    "cases_unary",
    "cases_binary",
    "cases_reduction",
    "cases_view",
    "cases_shape",
    "cases_linalg",
    "cases_conv_pool",
    "cases_conv_pool3d",
    "cases_nn",
    "cases_random",
    "cases_fused",
    "cases_attention",
    "cases_rnn",
    "cases_sort_scan",
    "cases_tensor_misc",
    "cases_resample_pad",
    "cases_resize",
    "cases_sampling",
    "cases_scatter_reduce",
    "cases_math_more",
    "cases_small_int",
    "cases_dynamic",
    "cases_spectral",
    "cases_vision",
    "cases_geometry",
]


def all_cases() -> list[Case]:
    cases = []
    here = pathlib.Path(__file__).parent
    for name in CASE_MODULES:
        if not (here / f"{name}.py").exists():
            continue
        cases.extend(importlib.import_module(name).CASES)
    ids = [c.case_id() for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SystemExit(f"duplicate case ids: {sorted(dupes)}")
    return cases


def encode_array(arr: np.ndarray) -> dict:
    flat = arr.reshape(-1)
    if arr.dtype == np.bool_:
        data = [bool(v) for v in flat]
    elif np.issubdtype(arr.dtype, np.integer):
        data = [int(v) for v in flat]
    else:  # floats: JSON has no nan/inf, so they travel as strings
        data = [float(v) if np.isfinite(v) else str(float(v)) for v in flat]
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": data}


def to_torch(arr: np.ndarray | None, spec):
    if arr is None:
        return None
    if spec.wrapped:
        return arr.item()  # PyTorch gets a real Python number
    return torch.from_numpy(np.array(arr, order="C"))


def run_case(case: Case) -> dict:
    rng = np.random.RandomState(case.seed() % (2**31))
    arrays = [spec.make(rng) for spec in case.inputs]
    entry = {
        "id": case.case_id(),
        "op": case.op,
        "attrs": case.attrs,
        "inputs": [],
    }
    for spec, arr in zip(case.inputs, arrays):
        if arr is None:
            entry["inputs"].append({"absent": True})
            continue
        enc = encode_array(arr)
        enc["layout"] = spec.layout
        enc["wrapped"] = spec.wrapped
        entry["inputs"].append(enc)
    if case.error is not None:
        entry["error"] = case.error
        return entry
    result = case.torch_fn(*[to_torch(a, s) for a, s in zip(arrays, case.inputs)], **{})
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    entry["outputs"] = [encode_array(o.detach().numpy()) for o in outputs]
    if case.compare_outputs is not None:
        entry["compare_outputs"] = list(case.compare_outputs)
    dtypes = [o["dtype"] for o in entry["outputs"]] + [i.get("dtype", "") for i in entry["inputs"]]
    rtol, atol = default_tolerances(dtypes, case.reduce_len)
    entry["rtol"] = case.rtol if case.rtol is not None else rtol
    entry["atol"] = case.atol if case.atol is not None else atol
    add_gradients(case, arrays, entry)
    return entry


def differentiable(spec, arr) -> bool:
    return (arr is not None and not spec.wrapped and spec.requires_grad
            and spec.dtype in ("float32", "float64"))


def add_gradients(case: Case, arrays, entry: dict) -> None:
    """PyTorch's gradients of the row's floating outputs w.r.t. its floating
    inputs, for a fixed random upstream gradient."""
    if not case.grad or any(a is not None and a.size > 4096 for a in arrays):
        return  # large rows are there for forward accuracy; they would bloat the file
    wanted = [i for i, (s, a) in enumerate(zip(case.inputs, arrays)) if differentiable(s, a)]
    if not wanted:
        return
    tensors = []
    for i, (spec, arr) in enumerate(zip(case.inputs, arrays)):
        t = to_torch(arr, spec)
        if i in wanted:
            t = t.clone().requires_grad_(True)
        tensors.append(t)
    try:
        result = case.torch_fn(*tensors)
    except RuntimeError:
        return  # e.g. an in-place lambda on a leaf: no gradient row
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    with_grad = [k for k, o in enumerate(outputs) if o.is_floating_point() and o.requires_grad]
    if not with_grad:
        return
    rng = np.random.RandomState((case.seed() + 1) % (2**31))
    grad_outputs = [torch.from_numpy(rng.standard_normal(outputs[k].shape)
                                     .astype(outputs[k].detach().numpy().dtype))
                    for k in with_grad]
    grads = torch.autograd.grad([outputs[k] for k in with_grad], [tensors[i] for i in wanted],
                                grad_outputs, allow_unused=True)
    entry["grad_outputs"] = [None] * len(outputs)
    for k, g in zip(with_grad, grad_outputs):
        entry["grad_outputs"][k] = encode_array(g.numpy())
    entry["grads"] = [None] * len(case.inputs)
    for i, g in zip(wanted, grads):
        g = torch.zeros_like(tensors[i]) if g is None else g
        entry["grads"][i] = encode_array(g.detach().numpy())
    entry["fd"] = case.fd


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(0)
    entries = [run_case(c) for c in all_cases()]
    out.write_text(json.dumps({"torch_version": torch.__version__, "cases": entries}))
    print(f"wrote {len(entries)} op cases to {out}")


if __name__ == "__main__":
    main()
