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


def test_collectives_match_numpy_3_ranks(tmp_path):
    outcomes, done, _ = launch("collectives", 3, tmp_path)
    check_all_ok(outcomes, done, 3)


def test_launcher_runs_the_collectives_on_2_ranks(tmp_path):
    command = [sys.executable, "-m", "kiln.distributed.run", "--nproc", "2", str(WORKER)]
    done = subprocess.run(
        command + ["collectives", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=mpirun_env(),
    )
    outcomes = {
        r: (tmp_path / f"rank{r}.txt").read_text()
        for r in range(2)
        if (tmp_path / f"rank{r}.txt").exists()
    }
    check_all_ok(outcomes, done, 2)


def test_launcher_flags():
    from kiln.distributed.run import mpirun_command

    many = (os.cpu_count() or 1) + 1
    command = mpirun_command(many, "train.py", ["--lr", "0.1"], python="py")
    assert command[:3] == ["mpirun", "-np", str(many)]
    assert "--oversubscribe" in command
    assert command[-4:] == ["py", "train.py", "--lr", "0.1"]
    assert ("--allow-run-as-root" in command) == (os.geteuid() == 0)
    assert "--oversubscribe" not in mpirun_command(1, "train.py", [], python="py")


def check_all_ok(outcomes, done, ranks):
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
        failed = outcome.split("failed input: ", 1)[1]
        assert "did not run on any rank: an input failed on rank 0: index_select" in failed, failed


def seconds_of(outcome: str) -> float:
    match = re.match(r"error after ([0-9.]+)s: ", outcome)
    assert match, outcome
    return float(match.group(1))


@pytest.mark.parametrize("scenario", ["timeout", "timeout_compiled"])
def test_timeout_raises_on_every_waiting_rank(tmp_path, scenario):
    # Timeout 1.5 s; the last rank joins the all_reduce 3.5 s late (in a
    # compiled plan too: its all_reduce_wait raises).
    outcomes, done, elapsed = launch(scenario, 3, tmp_path)
    for rank in (0, 1):
        outcome = outcomes.get(rank, "")
        assert "timed out after 1.5 s" in outcome, describe(outcomes, done)
        assert f"on rank {rank} of 3" in outcome, outcome
        assert 1.4 <= seconds_of(outcome) < 10, outcome
    # The late rank times out too, or mpirun ends it once the others exit
    # without finalizing (they skip MPI_Finalize after a fatal error).
    late = outcomes.get(2, "")
    assert (
        "timed out" in late or "rank 2 of 3 terminated by the launcher" in done.stderr + done.stdout
    ), describe(outcomes, done)
    assert done.returncode != 0
    assert elapsed < 60, elapsed


def test_killed_rank_ends_the_survivors(tmp_path):
    # Rank 1 kills itself (SIGKILL) between collectives; mpirun's default is
    # to end the job: every survivor says why on stderr, well within the
    # 3 s timeout, and nothing hangs. mpirun forwards the ranks' stderr on
    # its own and once, on a loaded machine, dropped a survivor's line (the
    # rank did end on SIGTERM): one more launch before that counts.
    for attempt in range(2):
        run_dir = tmp_path / f"attempt{attempt}"
        run_dir.mkdir()
        outcomes, done, elapsed = launch("kill", 3, run_dir)
        output = done.stdout + done.stderr
        assert done.returncode != 0
        assert 1 not in outcomes
        assert elapsed < 60, elapsed
        said_why = [
            f"rank {rank} of 3 terminated by the launcher" in output
            or "timed out" in outcomes.get(rank, "")
            for rank in (0, 2)
        ]
        if all(said_why):
            return
    pytest.fail(f"a survivor did not say why it ended, twice: {describe(outcomes, done)}")


def test_killed_rank_with_recovery_raises_on_every_survivor(tmp_path):
    # With --enable-recovery mpirun lets the survivors run: each raises the
    # timeout error of its pending all_reduce (3 s) and exits, not hangs.
    outcomes, done, elapsed = launch("kill", 3, tmp_path, extra=("--enable-recovery",))
    for rank in (0, 2):
        outcome = outcomes.get(rank, "")
        assert "timed out after 3 s" in outcome, describe(outcomes, done)
        assert 2.9 <= seconds_of(outcome) < 20, outcome
    assert 1 not in outcomes
    assert elapsed < 60, elapsed


def test_uncaught_exception_ends_the_job_at_once(tmp_path):
    # The raising rank exits without MPI_Finalize (kiln's excepthook), so
    # mpirun ends the others long before their 60 s timeout.
    outcomes, done, elapsed = launch("raise", 3, tmp_path)
    output = done.stdout + done.stderr
    assert "ValueError: rank 1 gives up" in output, describe(outcomes, done)
    for rank in (0, 2):
        assert f"rank {rank} of 3 terminated by the launcher" in output, describe(outcomes, done)
    assert done.returncode != 0
    assert elapsed < 30, elapsed
