"""Launches a training script on several processes, for users who expect torchrun.

    python -m kiln.distributed.run --nproc 4 train.py --epochs 3

runs ``mpirun -np 4 python train.py --epochs 3`` with what this machine
needs: ``--allow-run-as-root`` when run as root, ``--oversubscribe`` when
there are more processes than cores, OMP_NUM_THREADS=1 per process (as
torchrun does) unless it is set. The script calls
``kiln.distributed.init_process_group("mpi")``; rank and world size come
from mpirun. The exit status is mpirun's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys


def mpirun_command(
    nproc: int,
    script: str,
    script_args: list[str],
    *,
    python: str = sys.executable,
    extra: list[str] | None = None,
) -> list[str]:
    command = ["mpirun", "-np", str(nproc)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if nproc > (os.cpu_count() or 1):
        command.append("--oversubscribe")
    command += extra or []
    return command + [python, script, *script_args]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kiln.distributed.run",
        description="Run a kiln training script on several processes through mpirun.",
    )
    parser.add_argument(
        "--nproc",
        "--nproc-per-node",
        "--nproc_per_node",
        dest="nproc",
        type=int,
        required=True,
        help="number of processes (ranks)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a collective may take (sets KILN_DIST_TIMEOUT)",
    )
    parser.add_argument(
        "--mpirun-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for mpirun (repeatable)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the mpirun command only")
    parser.add_argument("script", help="the Python script each rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error(f"--nproc must be at least 1, got {args.nproc}")
    command = mpirun_command(args.nproc, args.script, args.script_args, extra=args.mpirun_arg)
    if args.dry_run:
        print(" ".join(command))
        return 0
    if shutil.which("mpirun") is None:
        print(
            "kiln.distributed.run: mpirun not found; install OpenMPI "
            "(Debian: apt-get install openmpi-bin libopenmpi-dev)",
            file=sys.stderr,
        )
        return 127
    env = dict(os.environ)
    if args.nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    if args.timeout is not None:
        env["KILN_DIST_TIMEOUT"] = str(args.timeout)
    sys.stdout.flush()
    os.execvpe(command[0], command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
