"""Runs the ONNX backend test cases Debian ships (libonnx-testdata) through
kiln: each case is a model.onnx and test_data_set_*/ folders of input and
expected-output protobufs. kiln imports the model, runs every data set and
compares at ONNX's default tolerance (rtol 1e-3, atol 1e-7). Models are
called as ONNX Runtime calls them: every graph input given at call time,
none bound as a constant; an input that carries a shape, axes or a bound
is read by kiln.onnx.load's SpecializedModel on each call. A case whose
outputs are random draws (Bernoulli, Dropout in training, ...) cannot match
numpy's generator: when only its values differ it counts as "random", not
as a pass and not as a wrong answer.

    python tests/onnx/conformance.py            # the report, per group
    python tests/onnx/conformance.py --update   # rewrite passing.txt

tests/python/test_onnx_import.py runs it under pytest: every case in
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


def read_value(path, value_type):
    """A tensor, or for a sequence (optional) the list (None or value) it holds,
    read as the model declares the value."""
    kind = value_type.WhichOneof("value") if value_type is not None else "tensor_type"
    if kind == "tensor_type":
        return numpy_helper.to_array(onnx.load_tensor(str(path)))
    proto = {"sequence_type": onnx.SequenceProto, "optional_type": onnx.OptionalProto}[kind]()
    proto.ParseFromString(pathlib.Path(path).read_bytes())
    if kind == "sequence_type":
        return numpy_helper.to_list(proto)
    return numpy_helper.to_optional(proto)


def read_all(data_set, prefix, values):
    """The data set's values in index order (input_0, input_1, ..., input_10),
    each read as `values` (the graph's inputs or outputs) declares it."""
    paths = glob.glob(f"{data_set}/{prefix}_*.pb")
    paths.sort(key=lambda p: int(pathlib.Path(p).stem.split("_")[-1]))
    return [read_value(p, values[i].type if i < len(values) else None)
            for i, p in enumerate(paths)]


def to_kiln(value):
    if value is None:
        return None
    if isinstance(value, list):
        return [to_kiln(element) for element in value]
    return kiln.from_numpy(np.array(value, copy=True))


def compare(got, want):
    """None when `got` (kiln's) matches `want`, else (status, detail)."""
    if want is None or isinstance(want, list):
        if want is None:
            return None if got is None else ("mismatch", "a value where None is expected")
        if not isinstance(got, list) or len(got) != len(want):
            return "mismatch", f"{type(got).__name__} vs a list of {len(want)}"
        for g, w in zip(got, want):
            if (failed := compare(g, w)) is not None:
                return failed
        return None
    if got is None or isinstance(got, list):
        return "mismatch", f"{type(got).__name__} vs a tensor"
    got = got.detach().numpy()
    if got.shape != want.shape or got.dtype != want.dtype:
        return "mismatch", f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "biu":
        return None if np.array_equal(got, want) else ("mismatch", "values differ")
    if not np.allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True):
        return "mismatch", f"max abs diff {np.nanmax(np.abs(got - want))}"
    return None


UNSUPPORTED = ("has no kiln translation", "which kiln does not have", "symbolic dimension",
               "is not one kiln reads", "imports no version of the default ONNX op set")


# Cases whose expected outputs contradict the ONNX spec for the model as
# shipped, so that a runtime following the spec cannot match them: a
# mismatch there counts as unsupported, with the reason.
# tests/python/test_onnx_training_ops.py checks kiln against ONNX's reference
# evaluator on them instead.
DATA_CONTRADICTS_SPEC = {
    "node/test_adam_multiple": "its outputs were computed with epsilon=1e-2, which the model's "
                               "Adam node does not set (the spec's default is 1e-6); ONNX's "
                               "generator sets it since, Debian's 1.12 data predate that",
}


# Ops whose outputs are random draws: a case's expected values come from
# numpy's generator, which no other runtime reproduces.
RANDOM_OPS = {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Multinomial", "Dropout"}


def draws_random(graph):
    for node in graph.node:
        if node.op_type in RANDOM_OPS:
            return True
        for attribute in node.attribute:
            if attribute.HasField("g") and draws_random(attribute.g):
                return True
    return False


def load(folder):
    return kiln.onnx.load(folder / "model.onnx")


def run_case(folder):
    """("pass" | "unsupported" | "error" | "mismatch" | "random", detail)."""
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    initialized = {proto.name for proto in graph.initializer}
    graph_inputs = [value for value in graph.input if value.name not in initialized]
    for data_set in sorted(glob.glob(str(folder / "test_data_set_*"))):
        try:
            inputs = read_all(data_set, "input", graph_inputs)
            wants = read_all(data_set, "output", graph.output)
        except Exception:  # noqa: BLE001  (maps and other types kiln does not read)
            return "unsupported", "inputs or outputs that are not tensors, sequences or optionals"
        try:
            model = load(folder)
        except Exception as e:  # noqa: BLE001
            text = str(e)
            unsupported = any(reason in text for reason in UNSUPPORTED)
            return ("unsupported" if unsupported else "error"), text.split("\n")[0][:300]
        try:
            got = model(*[to_kiln(a) for a in inputs])
        except Exception as e:  # noqa: BLE001  (any kiln error fails the case)
            return "error", str(e).split("\n")[0][:300]
        got = list(got) if isinstance(got, tuple) else [got]
        for g, want in zip(got, wants):
            if (failed := compare(g, want)) is None:
                continue
            values_only = failed[1] == "values differ" or failed[1].startswith("max abs diff")
            if values_only and draws_random(graph):  # shapes and dtypes did match
                return "random", "random draws: shapes and dtypes match, values cannot"
            if values_only and f"{folder.parent.name}/{folder.name}" in DATA_CONTRADICTS_SPEC:
                return "unsupported", DATA_CONTRADICTS_SPEC[f"{folder.parent.name}/{folder.name}"]
            return failed
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
          f"{'mismatch':>9} {'random':>7} {'rate':>6}")
    for group, row in rows.items():
        print(f"{group:20} {row['total']:6} {row.get('pass', 0):6} {row.get('unsupported', 0):12} "
              f"{row.get('error', 0):6} {row.get('mismatch', 0):9} {row.get('random', 0):7} "
              f"{row['pass_rate']:6.1%}")
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
