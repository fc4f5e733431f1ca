"""kiln.distributed: several processes that exchange tensors, over MPI.

torch.distributed's names and semantics (docs/distributed.md)::

    import kiln.distributed as dist      # launched: mpirun -np 2 python train.py
    dist.init_process_group("mpi")       # or python -m kiln.distributed.run --nproc 2
    dist.all_reduce(t)                   # in place, summed over the ranks
    work = dist.all_reduce(t, async_op=True); ...; work.wait()

Collectives run on one communication thread per process, in issue order,
each with a deadline (the timeout); ranks that issue different collectives
raise an error naming both calls (src/kiln/distributed/distributed.h).
"""

from __future__ import annotations

import atexit
import datetime
import sys
from typing import Any

from kiln import _C
from kiln._C import Tensor

_D = _C.distributed

ReduceOp = _D.ReduceOp
Work = _D.Work

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "recv",
    "reduce_scatter",
    "send",
]


class group:  # noqa: N801  (torch.distributed.group)
    """The process groups: kiln has one, every rank (``group=`` arguments are ignored)."""

    WORLD: Any = None


def _seconds(timeout: Any) -> float:
    if timeout is None:
        return 0.0  # the default: KILN_DIST_TIMEOUT, else 30 minutes
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def is_available() -> bool:
    return bool(_D.is_available())


def is_initialized() -> bool:
    return bool(_D.is_initialized())


def is_mpi_available() -> bool:
    return True


def init_process_group(
    backend: str | None = "mpi",
    init_method: str | None = None,
    timeout: Any = None,
    world_size: int = -1,
    rank: int = -1,
    **kwargs: Any,
) -> None:
    """Joins the default process group: rank and world size come from mpirun.

    timeout: seconds or a datetime.timedelta for each collective (default
    KILN_DIST_TIMEOUT from the environment, else 30 minutes). world_size
    and rank, when given, must match what the launcher says.
    """
    if init_method not in (None, "env://"):
        raise ValueError(
            f"init_process_group: init_method {init_method!r} is not supported; "
            "ranks come from mpirun"
        )
    seconds = _seconds(timeout)
    if timeout is not None and seconds <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    _D.init(backend or "mpi", seconds)
    if world_size not in (-1, _D.world_size()) or rank not in (-1, _D.rank()):
        found = (_D.rank(), _D.world_size())
        raise ValueError(
            f"init_process_group: rank={rank}, world_size={world_size} differ from "
            f"the launcher's rank {found[0]} of {found[1]}"
        )
    atexit.register(_D.destroy)
    _install_excepthook()


def _install_excepthook() -> None:
    # An uncaught exception on one rank: print it, then exit without
    # MPI_Finalize (which would wait for the other ranks, themselves waiting
    # in a collective for this one); mpirun then ends the job at once.
    previous = sys.excepthook
    if getattr(previous, "_kiln_distributed", False):
        return

    def hook(kind: Any, value: Any, traceback: Any) -> None:
        previous(kind, value, traceback)
        _D.abandon(f"rank {_D.rank()} raised {kind.__name__}: {value}")

    hook._kiln_distributed = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def destroy_process_group(group: Any = None) -> None:
    _D.destroy()


def get_rank(group: Any = None) -> int:
    return int(_D.rank())


def get_world_size(group: Any = None) -> int:
    return int(_D.world_size())


def get_backend(group: Any = None) -> str:
    _D.rank()  # raises without a process group
    return "mpi"


def set_timeout(timeout: Any) -> None:
    """The timeout of the collectives issued from now on."""
    _D.set_timeout(_seconds(timeout))


def barrier(group: Any = None, async_op: bool = False) -> None:
    _D.barrier()


def all_reduce(
    tensor: Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Any:
    return _D.all_reduce(tensor, op, async_op)


def broadcast(tensor: Tensor, src: int, group: Any = None, async_op: bool = False) -> Any:
    return _D.broadcast(tensor, src, async_op)


def all_gather(
    tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False
) -> Any:
    return _D.all_gather(list(tensor_list), tensor, async_op)


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
) -> Any:
    return _D.all_gather_into_tensor(output_tensor, input_tensor, async_op)


def reduce_scatter(
    output: Tensor,
    input_list: list[Tensor],
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    return _D.reduce_scatter(output, list(input_list), op, async_op)


def send(tensor: Tensor, dst: int, group: Any = None, tag: int = 0) -> None:
    _D.send(tensor, dst, tag)


def recv(tensor: Tensor, src: int, group: Any = None, tag: int = 0) -> int:
    _D.recv(tensor, src, tag)
    return src


def isend(tensor: Tensor, dst: int, group: Any = None, tag: int = 0) -> Any:
    return _D.isend(tensor, dst, tag)


def irecv(tensor: Tensor, src: int, group: Any = None, tag: int = 0) -> Any:
    return _D.irecv(tensor, src, tag)
