"""bench/run_all.py, the side-by-side benchmark, on what the main .venv has:
one quick end-to-end run (kiln, PyTorch, ONNX Runtime, and JAX with no venv
for it) checked for its JSON, chart and statuses; the output check against a
deliberately wrong output; the roofline and ratio arithmetic; a framework
whose install failed. The timings themselves are never asserted on."""
import json
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402
from harness import frameworks, machine, report  # noqa: E402
from harness.reference import TOLERANCE, check_outputs  # noqa: E402
from harness.workloads import CASES_BY_ID, cost_of  # noqa: E402

CASES = ["W1-b1", "W3b-b10"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One --quick run at one thread; torch.compile is skipped (it compiles
    for seconds), JAX's venv root is empty (so it is not installed)."""
    work = tmp_path_factory.mktemp("bench")
    venvs = tmp_path_factory.mktemp("no-venvs")
    results = run_all.main([
        "--quick", "--threads", "1", "--cases", ",".join(CASES),
        "--frameworks", "kiln,torch,onnxruntime,jax", "--skip-modes", "torch:compile",
        "--work-dir", str(work), "--venv-root", str(venvs),
        "--json", str(work / "results.json"), "--png", str(work / "results.png")])
    return work, results


def rows_of(results):
    return {(r["framework"], r["mode"], r["case"]): r for r in results["runs"][0]["rows"]}


def test_quick_run_writes_json_and_png(quick_run):
    work, results = quick_run
    on_disk = json.loads((work / "results.json").read_text())
    assert on_disk["cases"] == CASES
    assert [run["threads"] for run in on_disk["runs"]] == [1]
    png = (work / "results.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_quick_run_times_checked_modes(quick_run):
    _, results = quick_run
    rows = rows_of(results)
    for key in [("kiln", "eager", "W1-b1"), ("kiln", "jit-trace", "W1-b1"),
                ("kiln", "cpp-loop", "W1-b1"), ("kiln", "eager", "W3b-b10"),
                ("torch", "eager", "W1-b1"), ("torch", "jit-script", "W3b-b10"),
                ("onnxruntime", "session", "W1-b1")]:
        row = rows[key]
        assert row["status"] == "ok", (key, row["status"])
        assert len(row["us_per_call"]) == 5 and row["median_us"] > 0
        assert row["best_us"] <= row["median_us"]
    kiln_row = rows["kiln", "eager", "W1-b1"]
    torch_median = rows["torch", "eager", "W1-b1"]["median_us"]
    assert kiln_row["ratios"]["vs_torch_eager"] == pytest.approx(
        kiln_row["median_us"] / torch_median)
    bound = results["runs"][0]["cases"]["W1-b1"]["roofline"]
    assert bound["level"] in machine.LEVELS and bound["bound_us"] > 0
    assert kiln_row["ratios"]["vs_roofline"] == pytest.approx(
        kiln_row["median_us"] / bound["bound_us"])


def test_quick_run_reports_what_did_not_run(quick_run):
    _, results = quick_run
    rows = rows_of(results)
    assert rows["jax", "jit", "W1-b1"]["status"].startswith("not installed: no venv-jax")
    assert "median_us" not in rows["jax", "jit", "W1-b1"]
    assert rows["torch", "compile", "W1-b1"]["status"] == "skipped (--skip-modes)"
    assert rows["onnxruntime", "*", "W3b-b10"]["status"].startswith("n/a: inference only")
    # kiln.compile of a whole training step, from Python and from a C++ loop:
    # timed only because its losses and weights matched PyTorch's.
    for mode in ("compile", "cpp-loop"):
        assert rows["kiln", mode, "W3b-b10"]["status"] == "ok", rows["kiln", mode, "W3b-b10"]
        assert rows["kiln", mode, "W3b-b10"]["median_us"] > 0


def test_a_wrong_output_is_caught(quick_run):
    """The kiln runner's real outputs pass the check; the same outputs with
    one value moved by 10x the tolerance do not, and lose their timings."""
    work, _ = quick_run
    reference = run_all.reference_outputs(dict(np.load(work / "data.npz")),
                                          [CASES_BY_ID[c] for c in CASES])
    outputs = run_all.load_outputs(work / "out" / "kiln-1t")
    record = {"case": "W1-b1", "mode": "eager", "status": "ok", "calls": 20,
              "us_per_call": [1.0] * 5}
    assert run_all.accept(record, reference["W1-b1"], outputs)["status"] == "ok"

    outputs["W1-b1/eager/out"] = outputs["W1-b1/eager/out"].copy()
    outputs["W1-b1/eager/out"][0, 1] += 10 * TOLERANCE
    row = run_all.accept(record, reference["W1-b1"], outputs)
    assert row["status"].startswith("output mismatch: out: max |diff|")
    assert "median_us" not in row

    training = reference["W3b-b10"]
    wrong = dict(training, **{"param/2.bias": training["param/2.bias"] + 1e-3})
    assert check_outputs(training, wrong).startswith("param/2.bias")
    assert check_outputs(training, {"losses": training["losses"]}).startswith("no output")
    assert "shape" in check_outputs({"out": np.zeros((1, 2))}, {"out": np.zeros((2, 1))})
    assert check_outputs({"out": np.zeros(2)}, {"out": np.array([0.0, np.nan])}) == \
        "out: not finite"


def test_cost_counts_flops_and_bytes():
    w1 = cost_of(CASES_BY_ID["W1-b1"])
    assert w1.flops == 2 * (512 * 256 + 256 * 128 + 128 * 2)
    # MyModel at batch 10 by hand: 67 parameters, 100 inputs, activations
    # 10x5 (fc1), 10x5 (relu), 10x2 (fc2) = 120, the last written only.
    params, inputs, activations, last = 5 * 10 + 5 + 2 * 5 + 2, 100, 120, 20
    training = cost_of(CASES_BY_ID["W3b-b10"])
    assert training.bytes_moved == 4 * (6 * params + inputs + 4 * activations)
    fwd = 2 * 10 * (10 * 5 + 5 * 2)
    assert training.flops == 3 * fwd - 2 * 10 * 10 * 5 + 2 * params
    from harness.workloads import Case
    infer = cost_of(Case("x", "W3b", "MyModel", 10, False))
    assert infer.bytes_moved == 4 * (params + inputs + 2 * activations - last)
    assert infer.working_set == 4 * (params + inputs + activations)


MACHINE = {"threads": 1, "fp32_peak_gflops": 100.0,
           "read_gbs": {"l1": 200.0, "l2": 100.0, "l3": 50.0, "dram": 10.0},
           "cache_bytes": {"l1": 32 << 10, "l2": 512 << 10, "l3": 32 << 20}}


def test_roofline_takes_the_level_the_working_set_fits_in():
    case = CASES_BY_ID["W1-b1"]
    cost = cost_of(case)
    assert 512 << 10 < cost.working_set < 1 << 20
    bound = machine.roofline(case, MACHINE)
    assert bound["level"] == "l3" and bound["bound_by"] == "L3 bandwidth"
    # 32 KiB of the set read from L1, the rest of 512 KiB from L2, the
    # remainder from L3.
    l1, l2 = 32 << 10, 512 << 10
    seconds = cost.bytes_moved / cost.working_set * (
        l1 / 200e9 + (l2 - l1) / 100e9 + (cost.working_set - l2) / 50e9)
    assert bound["bound_us"] == pytest.approx(seconds * 1e6)
    assert bound["compute_us"] == pytest.approx(cost.flops / 100e9 * 1e6)
    assert bound["compute_us"] < bound["memory_us"]
    # Two threads: the set spreads over two private L2s.
    two = machine.roofline(case, dict(MACHINE, threads=2))
    assert two["level"] == "l2"
    big = machine.roofline(CASES_BY_ID["W1-b1024"], MACHINE)
    assert big["bound_by"] == "compute"
    assert big["bound_us"] == pytest.approx(cost_of(CASES_BY_ID["W1-b1024"]).flops / 100e3)
    assert machine.roofline(case, dict(MACHINE, fp32_peak_gflops=None)) is None


def test_ratios_skip_kiln_and_rejected_rows():
    def row(framework, mode, median, status="ok"):
        r = {"framework": framework, "mode": mode, "case": "W1-b1", "status": status}
        return dict(r, median_us=median) if status == "ok" else r
    run = {"threads": 1, "machine": MACHINE, "rows": [
        row("kiln", "eager", 30.0), row("kiln", "eager-grad", 40.0),
        row("kiln-cpp", "eager-cpp", 5.0),  # kiln too: never "the fastest other"
        row("torch", "eager", 60.0), row("torch", "eager-grad", 80.0),
        row("jax", "jit", 20.0), row("mxnet", "eager", None, "output mismatch: out")]}
    chosen = [frameworks.FRAMEWORKS_BY_NAME[n] for n in ("kiln", "kiln-cpp", "torch", "jax")]
    report.add_ratios(run, [CASES_BY_ID["W1-b1"]], chosen)
    rows = {(r["framework"], r["mode"]): r for r in run["rows"]}
    assert run["cases"]["W1-b1"]["fastest_other"]["framework"] == "jax"
    eager = rows["kiln", "eager"]["ratios"]
    assert eager["vs_torch_eager"] == pytest.approx(0.5)
    assert eager["vs_fastest_other"] == pytest.approx(1.5)
    bound = run["cases"]["W1-b1"]["roofline"]["bound_us"]
    assert eager["vs_roofline"] == pytest.approx(30.0 / bound)
    assert rows["kiln", "eager-grad"]["ratios"]["vs_torch_eager"] == pytest.approx(0.5)
    assert "ratios" not in rows["torch", "eager"]


def test_a_failed_install_is_reported_with_its_reason(tmp_path):
    (tmp_path / "setup-mxnet.failed").write_text("abc123\nERROR: No matching distribution\n")
    argv, why = frameworks.command(frameworks.FRAMEWORKS_BY_NAME["mxnet"], tmp_path / "job.json",
                                   tmp_path)
    assert argv is None
    assert why == "not installed: ERROR: No matching distribution"
    argv, why = frameworks.command(frameworks.FRAMEWORKS_BY_NAME["tinygrad"],
                                   tmp_path / "job.json", tmp_path)
    assert argv is None and why.startswith("not installed: no venv-tinygrad")


def test_thread_settings_reach_each_framework(tmp_path):
    jax_env = frameworks.thread_env(frameworks.FRAMEWORKS_BY_NAME["jax"], 1, tmp_path)
    assert "--xla_cpu_multi_thread_eigen=false" in jax_env["XLA_FLAGS"]
    tf_env = frameworks.thread_env(frameworks.FRAMEWORKS_BY_NAME["tensorflow"], 2, tmp_path)
    assert tf_env["TF_NUM_INTRAOP_THREADS"] == "2" and tf_env["OMP_NUM_THREADS"] == "2"
    assert tf_env["PATH"].startswith(str(tmp_path / "bin"))
