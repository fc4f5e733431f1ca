"""Runs the ONNX backend test cases Debian ships (libonnx-testdata) through
kiln: each case is a model.onnx and test_data_set_*/ folders of input and
expected-output protobufs. kiln imports the model, runs every data set and
compares at ONNX's default tolerance (rtol 1e-3, atol 1e-7). Models are
called as ONNX Runtime calls them: every graph input given at call time,
none bound as a constant; an input that carries a shape, axes or a bound
is read by kiln.onnx.load's SpecializedModel on each call.

    python tests/onnx/conformance.py            # the report, per group
    python tests/onnx/conformance.py --update   # rewrite passing.txt

tests/python/test_onnx_conformance.py runs it under pytest: every case in
passing.txt must still pass, so the pass rate can only grow."""
import collections
import glob
import json
import os
import pathlib
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import kiln

DATA = pathlib.Path(os.environ.get("KILN_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data"))
GROUPS = ["node", "simple", "pytorch-converted", "pytorch-operator"]
PASSING = pathlib.Path(__file__).with_name("passing.txt")


def cases():
    for group in GROUPS:
        for folder in sorted((DATA / group).iterdir()):
            if (folder / "model.onnx").exists():
                yield f"{group}/{folder.name}", folder


def read_tensor(path):
    return numpy_helper.to_array(onnx.load_tensor(str(path)))


def read_all(data_set, prefix):
    """The data set's tensors in index order (input_0, input_1, ..., input_10)."""
    paths = glob.glob(f"{data_set}/{prefix}_*.pb")
    paths.sort(key=lambda p: int(pathlib.Path(p).stem.split("_")[-1]))
    return [read_tensor(p) for p in paths]


UNSUPPORTED = ("has no kiln translation", "which kiln does not have", "symbolic dimension",
               "is not one kiln reads", "imports no version of the default ONNX op set")


def load(folder):
    return kiln.onnx.load(folder / "model.onnx")


def run_case(folder):
    """("pass" | "unsupported" | "error" | "mismatch", detail)."""
    for data_set in sorted(glob.glob(str(folder / "test_data_set_*"))):
        try:
            inputs, wants = read_all(data_set, "input"), read_all(data_set, "output")
        except Exception:  # noqa: BLE001  (sequences, optionals: not tensors)
            return "unsupported", "inputs or outputs that are not tensors"
        try:
            model = load(folder)
        except Exception as e:  # noqa: BLE001
            text = str(e)
            unsupported = any(reason in text for reason in UNSUPPORTED)
            return ("unsupported" if unsupported else "error"), text.split("\n")[0][:300]
        try:
            got = model(*[kiln.from_numpy(np.array(a, copy=True)) for a in inputs])
        except Exception as e:  # noqa: BLE001  (any kiln error fails the case)
            return "error", str(e).split("\n")[0][:300]
        got = list(got) if isinstance(got, tuple) else [got]
        for g, want in zip(got, wants):
            g = g.detach().numpy()
            if g.shape != want.shape or g.dtype != want.dtype:
                return "mismatch", f"{g.dtype}{list(g.shape)} vs {want.dtype}{list(want.shape)}"
            if want.dtype.kind in "biu":
                if not np.array_equal(g, want):
                    return "mismatch", "values differ"
            elif not np.allclose(g, want, rtol=1e-3, atol=1e-7, equal_nan=True):
                return "mismatch", f"max abs diff {np.nanmax(np.abs(g - want))}"
    return "pass", ""


def run_all():
    results = {}
    for name, folder in cases():
        results[name] = run_case(folder)
    return results


def summary(results):
    per_group = collections.defaultdict(collections.Counter)
    for name, (status, _) in results.items():
        per_group[name.split("/")[0]][status] += 1
    rows = {}
    for group in GROUPS:
        counts = per_group[group]
        total = sum(counts.values())
        rows[group] = {"total": total, **counts,
                       "pass_rate": round(counts["pass"] / total, 3) if total else 0.0}
    return rows


def listed_passing():
    if not PASSING.exists():
        return []
    return [line.strip() for line in PASSING.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def main():
    results = run_all()
    rows = summary(results)
    print(f"{'group':20} {'cases':>6} {'pass':>6} {'unsupported':>12} {'error':>6} "
          f"{'mismatch':>9} {'rate':>6}")
    for group, row in rows.items():
        print(f"{group:20} {row['total']:6} {row.get('pass', 0):6} {row.get('unsupported', 0):12} "
              f"{row.get('error', 0):6} {row.get('mismatch', 0):9} {row['pass_rate']:6.1%}")
    if "--update" in sys.argv:
        passing = sorted(name for name, (status, _) in results.items() if status == "pass")
        header = "# ONNX backend cases kiln passes (tests/onnx/conformance.py --update).\n"
        PASSING.write_text(header + "\n".join(passing) + "\n")
    if "--json" in sys.argv:
        out = sys.argv[sys.argv.index("--json") + 1]
        pathlib.Path(out).write_text(json.dumps({"groups": rows, "cases": results}, indent=1))
    if "--failures" in sys.argv:
        for name, (status, detail) in sorted(results.items()):
            if status in ("error", "mismatch"):
                print(f"{status:9} {name}: {detail}")


if __name__ == "__main__":
    main()
