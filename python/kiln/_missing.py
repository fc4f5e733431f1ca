"""What kiln does not have says so. A PyTorch program ported to kiln that
reaches for a name kiln lacks gets an AttributeError naming the PyTorch
feature and where to look, instead of Python's bare "has no attribute"
with a "did you mean" guess at some other name (which misleads:
kiln.fft.fftn is not a misspelling of kiln.fft.fft)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from kiln import _C

_SURFACE = "the README's table of the PyTorch surface kiln covers"


def missing(owner: str, torch_owner: str, name: str) -> AttributeError:
    """The error for `owner.name`, which PyTorch calls `torch_owner.name`."""
    return AttributeError(f"{owner} has no attribute '{name}': kiln does not implement "
                          f"{torch_owner}.{name} (see {_SURFACE})")


def module_getattr(owner: str, torch_owner: str) -> Callable[[str], NoReturn]:
    """A module-level __getattr__ for kiln's module `owner` (PyTorch's
    `torch_owner`). Dunder lookups (__path__, __wrapped__, ...) keep
    Python's plain error, which import machinery and tools expect."""
    def __getattr__(name: str) -> NoReturn:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module '{owner}' has no attribute '{name}'")
        raise missing(f"module '{owner}'", torch_owner, name)
    return __getattr__


def _tensor_getattr(self: Any, name: str) -> NoReturn:
    # Only called when normal lookup fails, so it costs nothing otherwise.
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"'Tensor' object has no attribute '{name}'")
    raise missing("'kiln.Tensor' object", "torch.Tensor", name)


def install_tensor_getattr() -> None:
    _C.Tensor.__getattr__ = _tensor_getattr
