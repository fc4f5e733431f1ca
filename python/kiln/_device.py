"""kiln.device: where a tensor lives, with PyTorch's names and forms.

kiln runs on the CPU; a CUDA device is issue 28's. So `kiln.device("cuda")`
can be named, compared and printed as PyTorch's can (programs build one
before asking kiln.cuda.is_available()), but putting a tensor or a module
on it raises an error that says so, never a silent CPU run."""
from __future__ import annotations

from typing import Any

from kiln import _C

_TYPES = ("cpu", "cuda")


class device:  # noqa: N801  (PyTorch's name)
    """device("cpu"), device("cuda:1"), device("cuda", 1)."""

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, type: str | int | device, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            kind, at = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            # PyTorch: an ordinal names the current accelerator's device.
            raise RuntimeError("Cannot access accelerator device when none is available.")
        elif isinstance(type, str):
            kind, _, ordinal = type.partition(":")
            at = index
            if ordinal:
                if index is not None:
                    raise RuntimeError(f"type (string) must not include an index because index "
                                       f"was passed explicitly: {type}")
                if not ordinal.isdigit():
                    raise RuntimeError(f"Invalid device string: '{type}'")
                at = int(ordinal)
        else:
            raise TypeError(f"device(): expected a str, int or kiln.device, got "
                            f"{type.__class__.__name__}")
        if kind not in _TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of "
                               f"device string: {kind}")
        if at is not None and at < 0:
            raise RuntimeError(f"Device index must not be negative, got {at}")
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", at)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("kiln.device is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self) -> tuple[object, tuple[str, int | None]]:
        return device, (self.type, self.index)


DeviceLike = device | str | int | None

CPU = device("cpu")


def check_device(where: DeviceLike, what: str) -> None:
    """Raises unless `where` is None or the CPU: what kiln can place on."""
    if where is None:
        return
    place = where if isinstance(where, device) else device(where)
    if place.type == "cpu":
        return
    raise RuntimeError(f"{what}: kiln has no CUDA backend yet, so nothing can be placed on "
                       f"{place} (kiln.cuda.is_available() is False; use device='cpu')")


def parse_to(args: tuple[Any, ...], kwargs: dict[str, Any], what: str,
             accepts_copy: bool) -> tuple[Any, bool]:
    """PyTorch's to() arguments, for Tensor.to and Module.to: a dtype, a
    device, a tensor (its dtype and device), dtype=, device=, copy= (where
    `accepts_copy`), non_blocking= and memory_format= (accepted). Checks the
    device (the CPU) and returns (the dtype or None, copy)."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    where: Any = kwargs.pop("device", None)
    copy = bool(kwargs.pop("copy", False)) if accepts_copy else False
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for arg in args:
        if isinstance(arg, _C.dtype):
            dtype = arg
        elif isinstance(arg, _C.Tensor):
            dtype, where = arg.dtype, CPU
        elif isinstance(arg, (str, int, device)) and not isinstance(arg, bool):
            where = arg
        else:
            raise TypeError(f"to() received an invalid combination of arguments: "
                            f"{type(arg).__name__} is not a dtype, device or tensor")
    check_device(where, what)
    return dtype, copy
