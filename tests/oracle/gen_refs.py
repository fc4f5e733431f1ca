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
    "cases_nn",
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
    return entry


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(0)
    entries = [run_case(c) for c in all_cases()]
    out.write_text(json.dumps({"torch_version": torch.__version__, "cases": entries}))
    print(f"wrote {len(entries)} op cases to {out}")


if __name__ == "__main__":
    main()
