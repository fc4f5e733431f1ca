"""nn.parallel.DistributedDataParallel on 2 and 3 ranks: one mpirun launch
per rank count runs every scenario of ddp_scenarios.py (what each checks is
written there); each test here reads one scenario's result from every
rank."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_scenarios import SCENARIOS

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun (OpenMPI) is not installed")
SCRIPT = Path(__file__).with_name("ddp_scenarios.py")


def launch(ranks: int, out: Path) -> dict[str, list[dict]]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
                           sys.executable, str(SCRIPT), str(out)], capture_output=True,
                          text=True, timeout=300, env=env)
    results: dict[str, list[dict]] = {name: [] for name in SCENARIOS}
    for path in sorted(out.glob("rank*.jsonl")):
        for line in path.read_text().splitlines():
            result = json.loads(line)
            results[result["name"]].append(result)
    results["_log"] = [{"stdout": done.stdout[-4000:], "stderr": done.stderr[-4000:],
                        "returncode": done.returncode}]
    return results


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}ranks")
def run(request, tmp_path_factory):
    ranks = request.param
    return ranks, launch(ranks, tmp_path_factory.mktemp(f"ddp{ranks}"))


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_passes_on_every_rank(run, scenario):
    ranks, results = run
    log = results["_log"][0]
    got = results[scenario]
    assert sorted(r["rank"] for r in got) == list(range(ranks)), \
        f"not every rank reported {scenario}: {log}"
    failures = [f"rank {r['rank']}: {r['detail']}" for r in got if not r["ok"]]
    assert not failures, "\n".join(failures)


def test_the_launch_exits_cleanly(run):
    _, results = run
    log = results["_log"][0]
    assert log["returncode"] == 0, log
    assert "leaked" not in log["stderr"], log["stderr"]
