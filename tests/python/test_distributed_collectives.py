"""kiln.distributed's collectives over MPI, 2 and 3 ranks under mpirun.

Each test launches tests/python/distributed_collectives_worker.py once (a
launch costs about a second), which runs many checks against NumPy on every
rank and writes each rank's outcome to a file read here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("distributed_collectives_worker.py")

pytestmark = pytest.mark.skipif(
    shutil.which("mpirun") is None,
    reason="mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)",
)


def mpirun_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMPI_MCA_btl", "self,vader")  # one machine: shared memory only
    env.pop("KILN_EXECUTION", None)
    env["OMP_NUM_THREADS"] = "1"
    return env


def launch(
    scenario: str, ranks: int, tmp_path: Path, *, timeout: float = 120, extra: tuple[str, ...] = ()
) -> tuple[dict[int, str], subprocess.CompletedProcess, float]:
    command = [
        "mpirun",
        "--oversubscribe",
        *extra,
        "-np",
        str(ranks),
        sys.executable,
        str(WORKER),
        scenario,
        str(tmp_path),
    ]
    if os.geteuid() == 0:
        command.insert(1, "--allow-run-as-root")
    start = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=mpirun_env()
    )
    elapsed = time.monotonic() - start
    outcomes = {}
    for rank in range(ranks):
        path = tmp_path / f"rank{rank}.txt"
        if path.exists():
            outcomes[rank] = path.read_text()
    return outcomes, done, elapsed


def describe(outcomes, done) -> str:
    tail = f"stdout {done.stdout[-3000:]}\nstderr {done.stderr[-3000:]}"
    return f"outcomes {outcomes}\nmpirun rc {done.returncode}\n{tail}"


@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_match_numpy(tmp_path, ranks):
    outcomes, done, _ = launch("collectives", ranks, tmp_path)
    assert done.returncode == 0, describe(outcomes, done)
    assert sorted(outcomes) == list(range(ranks)), describe(outcomes, done)
    for rank, outcome in outcomes.items():
        assert outcome.startswith("ok "), f"rank {rank}: {outcome}"
        assert int(outcome.split()[1]) > 50, outcome


def test_desync_raises_on_every_rank_naming_both_calls(tmp_path):
    outcomes, done, _ = launch("desync", 3, tmp_path)
    assert done.returncode == 0, describe(outcomes, done)
    assert sorted(outcomes) == [0, 1, 2], describe(outcomes, done)
    for rank, outcome in outcomes.items():
        assert outcome.startswith("error "), f"rank {rank}: {outcome}"
        assert "ranks called different collectives" in outcome, outcome
        # Its own call and the other side's, with their shapes.
        assert "all_reduce(float32 [3], op=sum)" in outcome, outcome
        assert "all_reduce(float32 [4], op=sum)" in outcome, outcome
        assert f"rank {rank} (this one)" in outcome, outcome


def seconds_of(outcome: str) -> float:
    match = re.match(r"error after ([0-9.]+)s: ", outcome)
    assert match, outcome
    return float(match.group(1))
