"""kiln.cuda: what PyTorch programs ask before choosing a device. kiln runs
on the CPU (a CUDA device is issue 28's), so there is none to find."""
from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Without a GPU this does nothing, as in PyTorch."""


def manual_seed_all(seed: int) -> None:
    """Without a GPU this does nothing, as in PyTorch."""


def current_device() -> int:
    raise RuntimeError("kiln.cuda.current_device(): kiln has no CUDA backend yet "
                       "(kiln.cuda.is_available() is False)")


def synchronize() -> None:
    raise RuntimeError("kiln.cuda.synchronize(): kiln has no CUDA backend yet "
                       "(kiln.cuda.is_available() is False)")
