"""The Python examples run as a user runs them, in a fresh interpreter."""
import os
import pathlib
import re
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_train_digits_learns_and_saves_its_plot(tmp_path):
    out = tmp_path / "training.png"
    # 5 epochs reach about 0.96 held-out accuracy (30 epochs: about 0.99);
    # an untrained model is at about 0.1.
    # One OpenMP thread: on a machine that is busy with other work, threads
    # that wait for each other make these small matrix products many times
    # slower, and the result does not depend on it.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py"), "--epochs", "5",
                          "--out", str(out)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert "epoch 5/5" in run.stderr and "100%" in run.stderr  # the tqdm bar
    accuracy = float(re.search(r"held-out accuracy: ([0-9.]+)", run.stdout).group(1))
    assert accuracy > 0.9, run.stdout
