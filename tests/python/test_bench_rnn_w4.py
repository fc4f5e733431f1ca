"""bench/rnn_w4.py (W4, the LSTM language model, kiln against PyTorch and
ONNX Runtime) on what the main .venv has: one cheap end-to-end run (batch 1,
one thread, no torch.compile) checked for its JSON and statuses, and the
output check against a deliberately wrong output. The timings themselves are
never asserted on."""
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import rnn_w4  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("w4") / "w4.json"
    runs, goals = rnn_w4.main(["--threads", "1", "--batches", "1", "--repeats", "3",
                               "--calls", "2", "--no-torch-compile", "--no-results-md",
                               "--json", str(out)])
    return runs, goals, out


def test_every_mode_ran_or_says_why(quick_run):
    runs, _, out = quick_run
    assert out.exists()
    assert [run["threads"] for run in runs] == [1]
    modes = {m["mode"]: m for m in runs[0]["cases"]["W4 batch 1"]["modes"]}
    for name in (rnn_w4.CPP, rnn_w4.TRACED, rnn_w4.HYBRID, rnn_w4.EAGER, rnn_w4.BASELINE,
                 "torch.jit.script", "ONNX Runtime"):
        assert len(modes[name]["ms"]) == 3 and min(modes[name]["ms"]) > 0, name
    for name in (rnn_w4.COMPILE, rnn_w4.COMPILE_RNN):
        assert modes[name]["status"] == "skipped (--no-torch-compile)"
    assert "2 of them LSTM" in modes["ONNX Runtime"]["note"]


def test_goals_name_every_other_framework(quick_run):
    _, goals, _ = quick_run
    named = {goal.split("faster than ")[1]: met for goal, _, met in goals}
    assert set(named) == {rnn_w4.BASELINE, "torch.jit.script", rnn_w4.COMPILE,
                          rnn_w4.COMPILE_RNN, "ONNX Runtime"}
    assert named[rnn_w4.COMPILE] is None and named["ONNX Runtime"] in (True, False)


def test_a_wrong_output_is_caught():
    right = np.zeros((1, 64, 256), np.float32)
    modes = [(rnn_w4.BASELINE, right, None, ""), (rnn_w4.TRACED, right + 1e-3, None, ""),
             ("skipped", None, "skipped", "")]
    with pytest.raises(SystemExit, match="kiln traced"):
        rnn_w4.check_outputs("W4 batch 1", modes)
    rnn_w4.check_outputs("W4 batch 1", modes[:1] + modes[2:])
